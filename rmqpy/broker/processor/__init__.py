"""Request processors of the broker, one per request family as RocketMQ has them.

Each processor is built with the broker (typed :class:`~rmqpy.broker.api.Broker`, the part of
the ``BrokerController`` it uses) and exposes ``process_request(channel, request)``. Which code
goes to which processor is the one table of ``BrokerController.register_processor()``.
"""
