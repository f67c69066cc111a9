"""QueryAssignmentProcessor: QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401), as 5.3.3 answers them.

A 5.x push consumer with client rebalance off asks the broker which queues to consume and how
(PULL or POP). The mode of a topic and group is what SET_MESSAGE_REQUEST_MODE stored
(config/messageRequestMode.json, Java's ``MessageRequestModeManager``), else PULL for retry
topics and ``defaultMessageRequestMode`` for others. In POP mode with ``popShareQueueNum`` <= 0
(``defaultPopShareQueueNum`` = -1) every client gets every queue as queueId -1 (it pops from all);
otherwise queues are allocated with the strategy the client names (AVG, AVG_BY_CIRCLE).

The queues are this broker's readable queues of the topic (rmqpy: Java takes the topic's route
from the name server, i.e. the queues of every broker of the cluster).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet.interfaces import IDelayedCall, IReactorTime

from rmqpy.broker.configfile import ConfigManager
from rmqpy.broker.pop.receipt import RETRY_GROUP_TOPIC_PREFIX
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.errors import BodyError
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

MODES = ("PULL", "POP")
#: SET_MESSAGE_REQUEST_MODE writes messageRequestMode.json at most once in this many seconds: a
#: client repeating the request costs the reactor one file write a second, not one per request
PERSIST_DELAY = 1.0
Queue = tuple[str, str, int]  # topic, brokerName, queueId (MessageQueue's sort order)


class MessageRequestModeManager(ConfigManager):
    """config/messageRequestMode.json: ``{"messageRequestModeMap":{topic:{group:{...}}}}``.

    Java persists the file synchronously on every SET_MESSAGE_REQUEST_MODE; here :meth:`persist_soon`
    coalesces the writes (one :data:`PERSIST_DELAY` after the first change) and :meth:`flush`, at
    shutdown, writes what is still pending."""

    file_name = "messageRequestMode.json"

    def __init__(self, config_dir: str | None, clock: IReactorTime) -> None:
        super().__init__(config_dir)
        self.clock = clock
        self.table: dict[str, dict[str, dict[str, Any]]] = {}
        self._pending: IDelayedCall | None = None

    def encode(self) -> Any:
        return {"messageRequestModeMap": self.table}

    def decode(self, obj: Any) -> None:
        table = obj.get("messageRequestModeMap") if isinstance(obj, dict) else None
        for topic, groups in (table or {}).items():
            if isinstance(groups, dict):
                for group, body in groups.items():
                    if isinstance(body, dict) and body.get("mode") in MODES:
                        self.table.setdefault(str(topic), {})[str(group)] = dict(body)

    def get(self, topic: str, group: str) -> dict[str, Any] | None:
        return self.table.get(topic, {}).get(group)

    def set(self, topic: str, group: str, body: dict[str, Any]) -> None:
        self.table.setdefault(topic, {})[group] = body

    def persist_soon(self) -> None:
        if self._pending is None or not self._pending.active():
            self._pending = self.clock.callLater(PERSIST_DELAY, self.persist)

    def flush(self) -> None:
        """Writes the file now if a change is still waiting for :meth:`persist_soon`'s write."""
        if self._pending is not None and self._pending.active():
            self._pending.cancel()
            self.persist()
        self._pending = None


def allocate_averagely(client_id: str, mqs: list[Queue], cids: list[str]) -> list[Queue]:
    """``AllocateMessageQueueAveragely``."""
    if client_id not in cids or not mqs:
        return []
    index, n, c = cids.index(client_id), len(mqs), len(cids)
    mod = n % c
    size = 1 if n <= c else (n // c + 1 if mod > 0 and index < mod else n // c)
    start = index * size if mod > 0 and index < mod else index * size + mod
    return [mqs[(start + i) % n] for i in range(min(size, n - start))]


def allocate_by_circle(client_id: str, mqs: list[Queue], cids: list[str]) -> list[Queue]:
    """``AllocateMessageQueueAveragelyByCircle``."""
    if client_id not in cids:
        return []
    index = cids.index(client_id)
    return [mq for i, mq in enumerate(mqs) if i % len(cids) == index]


STRATEGIES = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_by_circle}


class QueryAssignmentProcessor:
    log = RateLimitedLogger()
    codes = (RequestCode.QUERY_ASSIGNMENT, RequestCode.SET_MESSAGE_REQUEST_MODE)

    def __init__(self, broker: "Broker", modes: MessageRequestModeManager) -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self.modes = modes

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        body = _body(request)
        if request.code == RequestCode.SET_MESSAGE_REQUEST_MODE:
            return self._set_mode(request, body)
        return self._query(request, body)

    def _query(self, request: RemotingCommand, body: dict[str, Any]) -> RemotingCommand:
        b = self.broker
        topic, group = _str(body, "topic"), _str(body, "consumerGroup")
        client_id, strategy = _str(body, "clientId", ""), _str(body, "strategyName", "")
        model = _str(body, "messageModel", "CLUSTERING")
        mode = self.modes.get(topic, group)
        if mode is None:
            default = "PULL" if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else b.broker_config.defaultMessageRequestMode
            mode = {"topic": topic, "consumerGroup": group, "mode": default,
                    "popShareQueueNum": b.broker_config.defaultPopShareQueueNum if default == "POP" else 0}
        tc = b.topic_config_manager.select(topic)
        name = b.broker_config.brokerName
        assigned: list[Queue] | None
        if tc is None:
            assigned = None
        else:
            mqs = sorted((topic, name, q) for q in range(tc.readQueueNums))
            assigned = mqs if model == "BROADCASTING" else self._clustering(group, client_id, strategy, mqs, mode)
        out: dict[str, Any] = {}
        if assigned is not None:
            out["messageQueueAssignments"] = [
                {"messageQueue": {"topic": t, "brokerName": bn, "queueId": q}, "mode": mode["mode"]}
                for t, bn, q in assigned]
        return request.response(ResponseCode.SUCCESS, None, body=fastjson.dumps(out).encode())

    def _clustering(self, group: str, client_id: str, strategy: str, mqs: list[Queue],
                    mode: dict[str, Any]) -> list[Queue] | None:
        b = self.broker
        if not b.broker_config.serverLoadBalancerEnable:
            return mqs
        cgi = b.consumer_manager.get(group)
        if cgi is None:
            return None
        cids = sorted(cgi.client_ids())
        allocate = STRATEGIES.get(strategy)
        if allocate is None:
            self.log.warn("QueryLoad: unsupported strategy [{s}]", s=strategy)
            return None
        if mode["mode"] == "POP":
            share = mode.get("popShareQueueNum", 0)
            share = share if isinstance(share, int) else 0
            if share <= 0 or share >= len(cids) - 1:
                return [(t, bn, -1) for t, bn, _ in mqs]
            if len(cids) <= len(mqs) and client_id in cids:
                result = list(allocate(client_id, mqs, cids))
                index = cids.index(client_id)
                for _ in range(share):
                    index = (index + 1) % len(cids)
                    result.extend(allocate(cids[index], mqs, cids))
                return result
            return [mqs[cids.index(client_id) % len(mqs)]] if client_id in cids else []
        return allocate(client_id, mqs, cids)

    def _set_mode(self, request: RemotingCommand, body: dict[str, Any]) -> RemotingCommand:
        b = self.broker
        topic, group = _str(body, "topic"), _str(body, "consumerGroup")
        mode = _str(body, "mode", "PULL")
        share = body.get("popShareQueueNum", 0)
        if mode not in MODES or isinstance(share, bool) or not isinstance(share, int) or not -1 <= share <= 1024:
            raise BodyError("mode must be PULL or POP and popShareQueueNum -1..1024")
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return request.response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if b.topic_config_manager.select(topic) is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if b.subscription_group_manager.find(group) is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
        self.modes.set(topic, group, {"topic": topic, "consumerGroup": group, "mode": mode,
                                      "popShareQueueNum": share})
        self.modes.persist_soon()
        return request.response(ResponseCode.SUCCESS, None)


def _body(request: RemotingCommand) -> dict[str, Any]:
    if not request.body:
        raise BodyError("the request has no body")
    try:
        obj = fastjson.loads(request.body)
    except ValueError as exc:
        raise BodyError(f"the body is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise BodyError("the body is not a JSON object")
    return obj


def _str(body: dict[str, Any], key: str, default: str | None = None) -> str:
    value = body.get(key, default)
    if not isinstance(value, str) or (default is None and not value) or len(value) > 255:
        raise BodyError(f"body field {key} is missing or not a string")
    return value
