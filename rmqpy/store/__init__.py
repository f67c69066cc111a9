"""RocketMQ-compatible message store (commit log, consume queues, index, checkpoint).

Main entry points: :class:`rmqpy.store.message_store.MessageStore` and
:class:`rmqpy.store.config.MessageStoreConfig`; config/*.json helpers live in
:mod:`rmqpy.store.config_file`; ``python -m rmqpy.store`` is the read-only tool.
"""
