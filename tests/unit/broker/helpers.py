"""A broker on a task.Clock with a real store in a temp dir, and fake client channels."""
from __future__ import annotations

import itertools
from typing import Any

from twisted.internet import defer, reactor, task

from rmqpy.broker.config import BrokerSettings
from rmqpy.broker.controller import BrokerController
from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RPC_ONEWAY, RemotingCommand
from rmqpy.protocol.headers.broker import PullMessageRequestHeader, SendMessageRequestHeaderV2
from rmqpy.protocol.message import properties_to_string

_ports = itertools.count(40000)


class FakeChannel:
    def __init__(self, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.remote_host = host
        self.remote_port = port or next(_ports)
        self.remote_address = f"{host}:{self.remote_port}"
        self.connected_ = True
        self.read_at: float | None = None  # not read from a socket: no wait in rmqpy
        self.oneway: list[RemotingCommand] = []
        self.sent: list[RemotingCommand] = []
        self.closed = False
        self.clock = reactor  # as before channels had one: the process's log limiter

    def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> defer.Deferred[RemotingCommand]:
        return defer.fail(RuntimeError("a fake channel cannot invoke"))

    def invoke_oneway(self, request: RemotingCommand) -> None:
        request.flag |= RPC_ONEWAY
        self.oneway.append(request)

    def send_command(self, cmd: RemotingCommand) -> None:
        if cmd.body_parts is not None:  # a pull's records, framed one after the other: the body a client reads
            cmd.body = b"".join(cmd.body_parts)
        self.sent.append(cmd)

    def close(self) -> None:
        self.closed = True
        self.connected_ = False


def make_broker(tmp_path, **overrides: Any) -> tuple[BrokerController, task.Clock]:
    clock = task.Clock()
    clock.advance(1_700_000_000)
    settings = BrokerSettings()
    b = settings.broker
    b.brokerIP1 = b.brokerIP2 = "127.0.0.1"
    b.brokerName = "broker-a"
    b.namesrvAddr = None
    settings.netty.listenPort = 10911
    s = settings.store
    s.storePathRootDir = str(tmp_path / "store")
    s.mappedFileSizeCommitLog = 1024 * 1024
    s.mappedFileSizeConsumeQueue = 20 * 1000
    s.messageIndexEnable = False
    for key, value in overrides.items():
        for obj in (b, settings.netty, s):
            if hasattr(obj, key):
                setattr(obj, key, value)
    controller = BrokerController(settings, clock)
    controller.initialize()
    controller.start()
    return controller, clock


def send_request(topic: str, body: bytes = b"hello", queue_id: int = 0, tags: str | None = None,
                 props: dict | None = None, code: int = RequestCode.SEND_MESSAGE_V2) -> RemotingCommand:
    p = {"WAIT": "true", **(props or {})}
    if tags:
        p["TAGS"] = tags
    header = SendMessageRequestHeaderV2(a="PG", b=topic, c="TBW102", d=4, e=queue_id, f=0, g=1_700_000_000_000,
                                        h=0, i=properties_to_string(p), j=0, k=False, m=False)
    return RemotingCommand.request(code, header, body)


def pull_request(topic: str, group: str, queue_id: int = 0, offset: int = 0, sys_flag: int = 0x2 | 0x4,
                 subscription: str = "*", expression_type: str = "TAG", suspend_ms: int = 15000,
                 commit_offset: int = 0, sub_version: int = 0) -> RemotingCommand:
    header = PullMessageRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset,
                                      maxMsgNums=32, sysFlag=sys_flag, commitOffset=commit_offset,
                                      suspendTimeoutMillis=suspend_ms, subscription=subscription,
                                      subVersion=sub_version, expressionType=expression_type)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header)


def call(broker: BrokerController, channel: FakeChannel, request: RemotingCommand) -> Any:
    """Dispatch like the server does; returns the response (or the pending Deferred's result list)."""
    out: list[RemotingCommand] = []
    channel.sent = out
    broker.dispatcher.dispatch(channel, request)
    return out[-1] if out else None
