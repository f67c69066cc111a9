"""What every gRPC activity shares: the broker, its dispatcher, the clients, and the lookups they all make.

Each activity (:mod:`rmqpy.proxy.grpc.activity`) turns a call into the broker's own remoting
requests and runs them through the broker's dispatcher on the client's :class:`LocalChannel`
(:meth:`ActivityContext.invoke`), as the 5.x proxy's local mode hands them to its broker's
processors. Runs on the reactor.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from rmqpy.protocol.bodies import retry_policy
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE
from rmqpy.protocol.command import RemotingCommand
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.clients import GrpcClients
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.validate import Code, Refused

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

# ProxyConfig defaults of 5.3.3 that more than one activity reads
MIN_INVISIBLE_MS = 10 * 1000  # minInvisibleTimeMillsForRecv
MAX_INVISIBLE_MS = 12 * 3600 * 1000  # maxInvisibleTimeMills
MAX_BATCH = 32  # receive batch; a send takes MAX_BATCH * 32 messages
_NAME = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")  # TopicValidator / GroupValidator patterns, 127: topic max


def duration_ms(d: Any) -> int:
    """A protobuf ``Duration`` or ``Timestamp`` in milliseconds."""
    return int(d.seconds * 1000 + d.nanos // 1_000_000)


class ActivityContext:
    """One per endpoint; ``grpc_port`` is the port routes name (the server sets the bound one)."""

    def __init__(self, broker: "Broker", dispatcher: Any, grpc_port: int) -> None:
        self.broker = broker
        self.dispatcher = dispatcher  # the broker's RequestDispatcher: its processors and hooks
        self.grpc_port = grpc_port
        self.clients = GrpcClients(broker, dispatcher)

    def invoke(self, ch: LocalChannel, request: RemotingCommand) -> defer.Deferred[RemotingCommand]:
        """``request`` run as the client's, through the broker's dispatcher."""
        return ch.call(self.dispatcher, request)

    def topic(self, res: Any, write: bool = False, read: bool = False) -> Any:
        """The topic a ``Resource`` names, checked (``GrpcValidator``), known and, if asked, writable
        or readable; its ``TopicConfig``."""
        name = validate.check_topic(res.name)
        tc = self.broker.topic_config_manager.select(name)
        if tc is None:
            raise validate.topic_not_found(name)
        if (write and not tc.perm & PERM_WRITE) or (read and not tc.perm & PERM_READ):
            raise Refused(Code.FORBIDDEN, f"topic {name} is not {'writable' if write else 'readable'}")
        return tc

    @staticmethod
    def group(res: Any) -> str:
        """The consumer group a ``Resource`` names, checked (``GrpcValidator.validateConsumerGroup``)."""
        return validate.check_group(res.name)

    def group_config(self, group: str) -> Any:
        """The group's ``SubscriptionGroupConfig``; None for a name no group can have or one the broker
        does not know."""
        return self.broker.subscription_group_manager.find(group) if _NAME.match(group or "") else None

    def retry_policy(self, group: str) -> retry_policy.RetryPolicy:
        """The group's ``groupRetryPolicy`` (the default for a group the broker does not know)."""
        sgc = self.group_config(group)
        return retry_policy.of_group(sgc.extra) if sgc is not None else retry_policy.DEFAULT
