"""A small blocking RocketMQ client for tests and tools (not for production use).

It speaks the remoting protocol as the Java client does: routes from the name server
(GET_ROUTEINFO_BY_TOPIC, falling back to TBW102 for unknown topics), SEND_MESSAGE_V2 to
the master, PULL_MESSAGE, consumer offsets and HEART_BEAT. Every call blocks on a socket;
do not use it inside a running reactor.
"""
from __future__ import annotations

import itertools
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import (
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeaderV2,
    UpdateConsumerOffsetRequestHeader,
)
from rmqpy.protocol.message import MessageExt, create_uniq_id, decode_records, properties_to_string
from rmqpy.tools.blocking_client import BlockingClient

AUTO_CREATE_TOPIC = "TBW102"


class ClientError(Exception):
    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"CODE: {code}  DESC: {remark}")
        self.code = code
        self.remark = remark


@dataclass
class SendResult:
    msg_id: str           # UNIQ_KEY (the client's id)
    offset_msg_id: str    # store host + commit log offset
    broker_name: str
    queue_id: int
    queue_offset: int


@dataclass
class PullResult:
    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]


class SimpleClient:
    _instances = itertools.count()

    def __init__(self, namesrv_addr: str, group: str = "PY_CLIENT", timeout: float = 5.0) -> None:
        self.namesrv_addrs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
        self.group = group
        self.timeout = timeout
        self.client_id = f"{_local_ip()}@py-{os.getpid()}-{next(self._instances)}"
        self._conns: dict[str, BlockingClient] = {}
        self._rr = itertools.count()

    # ------------------------------------------------------------------ plumbing
    def _conn(self, addr: str) -> BlockingClient:
        conn = self._conns.get(addr)
        if conn is None:
            conn = self._conns[addr] = BlockingClient(addr, self.timeout)
        return conn

    def invoke(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        try:
            return self._conn(addr).invoke(request)
        except (OSError, ConnectionError):
            self._conns.pop(addr, None)
            raise

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def __enter__(self) -> "SimpleClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ routes
    def route(self, topic: str) -> dict[str, Any] | None:
        """TopicRouteData as parsed JSON, or None when the name servers do not know the topic."""
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic})
        for addr in self.namesrv_addrs:
            resp = self.invoke(addr, request)
            if resp.code == ResponseCode.SUCCESS and resp.body:
                return fastjson.loads(resp.body)
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                continue
            raise ClientError(resp.code, resp.remark)
        return None

    def write_queues(self, topic: str) -> tuple[list[tuple[str, str, int]], bool]:
        """[(broker name, master address, queue id)] and whether TBW102's route was used."""
        route, default = self.route(topic), False
        if route is None:
            route, default = self.route(AUTO_CREATE_TOPIC), True
            if route is None:
                raise ClientError(ResponseCode.TOPIC_NOT_EXIST, f"No route info of this topic: {topic}")
        masters = {}
        for bd in route.get("brokerDatas") or []:
            addrs = {int(k): v for k, v in (bd.get("brokerAddrs") or {}).items()}
            if 0 in addrs:
                masters[bd["brokerName"]] = addrs[0]
        queues = []
        for qd in sorted(route.get("queueDatas") or [], key=lambda q: q["brokerName"]):
            if qd["perm"] & 2 and qd["brokerName"] in masters:
                n = min(4, qd["writeQueueNums"]) if default else qd["writeQueueNums"]
                queues += [(qd["brokerName"], masters[qd["brokerName"]], i) for i in range(n)]
        return queues, default

    # ------------------------------------------------------------------ produce
    def send(self, topic: str, body: bytes, tags: str | None = None, keys: str | None = None,
             queue_id: int | None = None, properties: dict[str, str] | None = None, flag: int = 0,
             broker_addr: str | None = None, broker_name: str | None = None) -> SendResult:
        props = dict(properties or {})
        if tags:
            props["TAGS"] = tags
        if keys:
            props["KEYS"] = keys
        props.setdefault("WAIT", "true")
        uniq = props.setdefault("UNIQ_KEY", create_uniq_id(_local_ip()))
        if broker_addr is None:
            queues, _default = self.write_queues(topic)
            chosen = queues[next(self._rr) % len(queues)]
            if queue_id is not None:
                chosen = (chosen[0], chosen[1], queue_id)
            broker_name, broker_addr, queue_id = chosen
        header = SendMessageRequestHeaderV2(a=self.group, b=topic, c=AUTO_CREATE_TOPIC, d=4, e=queue_id or 0, f=0,
                                            g=int(time.time() * 1000), h=flag, i=properties_to_string(props),
                                            j=0, k=False, m=False, n=broker_name)
        resp = self.invoke(broker_addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, body))
        if resp.code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT,
                             ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE):
            raise ClientError(resp.code, resp.remark)
        ext = resp.ext_fields or {}
        return SendResult(uniq, ext["msgId"], broker_name or "", int(ext["queueId"]), int(ext["queueOffset"]))

    # ------------------------------------------------------------------ consume
    def heartbeat(self, broker_addr: str, consumer_group: str | None = None,
                  subscriptions: list[SubscriptionData] | None = None, message_model: str = "CLUSTERING") -> None:
        consumers = []
        if consumer_group:
            consumers.append(ConsumerData(consumer_group, consumeType="CONSUME_ACTIVELY", messageModel=message_model,
                                          consumeFromWhere="CONSUME_FROM_FIRST_OFFSET",
                                          subscriptionDataSet=subscriptions or []))
        data = HeartbeatData(self.client_id, [ProducerData(self.group)], consumers)
        resp = self.invoke(broker_addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=data.encode()))
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(resp.code, resp.remark)

    def pull(self, broker_addr: str, topic: str, group: str, queue_id: int, offset: int, max_nums: int = 32,
             expression: str = "*", expression_type: str = "TAG", commit_offset: int | None = None,
             suspend_ms: int = 0) -> PullResult:
        flag = 0x4 | (0x2 if suspend_ms else 0) | (0x1 if commit_offset is not None else 0)
        header = PullMessageRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset,
                                          maxMsgNums=max_nums, sysFlag=flag, commitOffset=commit_offset or 0,
                                          suspendTimeoutMillis=suspend_ms, subscription=expression,
                                          subVersion=int(time.time() * 1000), expressionType=expression_type)
        resp = self.invoke(broker_addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header))
        if resp.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                             ResponseCode.PULL_OFFSET_MOVED):
            raise ClientError(resp.code, resp.remark)
        ext = resp.ext_fields or {}
        msgs = list(decode_records(resp.body)) if resp.code == ResponseCode.SUCCESS and resp.body else []
        return PullResult(resp.code, int(ext["nextBeginOffset"]), int(ext["minOffset"]), int(ext["maxOffset"]), msgs)

    def query_offset(self, broker_addr: str, group: str, topic: str, queue_id: int) -> int | None:
        resp = self.invoke(broker_addr, RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(group, topic, queue_id)))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(resp.code, resp.remark)
        assert resp.ext_fields is not None  # QueryConsumerOffsetResponseHeader
        return int(resp.ext_fields["offset"])

    def update_offset(self, broker_addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        resp = self.invoke(broker_addr, RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)))
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(resp.code, resp.remark)


def _local_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
