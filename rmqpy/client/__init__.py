"""A RocketMQ remoting client for Python: producer and pull consumer (docs/client.md).

The blocking classes are exported here; :mod:`rmqpy.client.deferred` (Twisted) and
:mod:`rmqpy.client.aio` (asyncio) run the same plans without blocking.
"""
from rmqpy.client.blocking import Producer, PullConsumer
from rmqpy.client.errors import ClientError
from rmqpy.client.model import Message, MessageQueue, PullResult, PullStatus, SendResult, SendStatus
from rmqpy.protocol.message import MessageExt

__all__ = ["ClientError", "Message", "MessageExt", "MessageQueue", "Producer", "PullConsumer", "PullResult",
           "PullStatus", "SendResult", "SendStatus"]
