"""RocketMQ-compatible message store (commit log, consume queues, index, checkpoint).

Main entry points: :class:`rmqpy.store.message_store.MessageStore` and
:class:`rmqpy.store.config.MessageStoreConfig`; the broker's config/*.json files are
:mod:`rmqpy.broker.configfile`; ``python -m rmqpy.store`` is the read-only tool.
"""
