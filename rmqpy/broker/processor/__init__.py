"""Request processors of the broker, one per request family as RocketMQ has them.

Each processor is built with the :class:`~rmqpy.broker.controller.BrokerController` and
exposes ``process_request(channel, request)``. Which codes go to which processor is the
list :data:`rmqpy.broker.controller.PROCESSORS`; adding a processor is one line there.
"""
