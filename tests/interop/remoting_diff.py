"""A differential harness for the remoting protocol: the same request frame, valid or not, sent over
plain TCP to rmqpy's broker and name server and to the Java ones of the reference release, and their
answers compared field by field.

Why: compatibility is shown by the reference answering alike, call by call, not by rmqpy agreeing with
itself; a list of scenarios misses what a request one field off a valid one finds (the dashboard found
SEARCH_OFFSET_BY_TIMESTAMP's ``boundaryType`` ignored, no test did).

Each :class:`Case` is one request: a request code, its header fields (``extFields``, built from the
header classes of ``rmqpy/protocol/headers``) and its body. :func:`cases` gives, for each request a
client, mqadmin or the dashboard sends (sends, pulls, offsets, SEARCH_OFFSET_BY_TIMESTAMP with each
``boundaryType``, view and query of messages, heartbeats, locks, POP and its acks, topic and group
admin, stats, routes, cluster and config queries), a valid base request and variants with one field
moved to a boundary: missing, empty, 0, -1, past the Java int or long, not a number, unknown names,
over-long and non-ASCII names, a queue id out of range, a body that does not decode.
:func:`random_cases` moves two or three fields at once for the long run (bench/remoting_diff_long.py).

What an :class:`Answer` holds: the response code, the remark, the response's ``extFields`` and its body
(JSON parsed with rmqpy's fastjson reader, stored messages decoded, a properties text as its keys),
each after :func:`normalise`, which replaces only what differs by nature between two servers:
``ip:port`` addresses, message ids, millisecond timestamps, commit-log offsets and store sizes (by
their key: :data:`VOLATILE_KEYS`). Both sides get the same cases in the same order, one connection each.
"""
from __future__ import annotations

import json
import random
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping

from rmqpy.protocol import command, fastjson
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode, SerializeType, code_name
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers import admin, broker, namesrv, pop
from rmqpy.protocol.headers.base import INT_RANGE, CommandHeader
from rmqpy.protocol.message import decode_offset_msg_id, decode_records, properties_to_string
from tests.interop import diff_common

# the resources both sides get, under the same names
BROKER_NAME, CLUSTER = "broker-rdiff", "DefaultCluster"
TOPIC, ORDER_TOPIC, EMPTY_TOPIC, ADMIN_TOPIC = "RDiffT", "RDiffOrder", "RDiffEmpty", "RDiffAdmin"
SEND_TOPIC = "RDiffSend"  # where the send cases store: what the other cases read stays as the setup left it
GROUP, ADMIN_GROUP, PRODUCER_GROUP = "rdiff_g", "rdiff_admin_g", "rdiff_p"
UNKNOWN_TOPIC, UNKNOWN_GROUP = "RDiffNoSuchTopic", "rdiff_no_such_group"
CLIENT_ID = "127.0.0.1@rdiff-client"
QUEUES = 4
#: the messages every side stores at setup: (queue id, keys, tags, body), each with a fixed UNIQ_KEY
MESSAGES = [(i % QUEUES, f"rdk{i}", "tagA" if i % 2 else "tagB", f"rdiff body {i}") for i in range(8)]
BORN_MS = 1_700_000_000_000  # the born timestamp of every message the harness sends: the same on both
KV_NAMESPACE = "RDIFF_NS"

# ---------------------------------------------------------------------- answers
_NORMALISE = [
    (re.compile(r"\d{1,3}(?:\.\d{1,3}){3}:\d+"), "<addr>"),
    (re.compile(r"\b[0-9A-F]{32}\b"), "<id>"),
    (re.compile(r"\b1\d{12}\b"), "<ms>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}#\d{2}:\d{2}:\d{2}:\d{3}"), "<date>"),  # UtilAll.timeMillisToHumanString2
    (re.compile(r"\d+(?:\.\d+)? GiB"), "<size>"),  # a disk's capacity and free space
]
#: JSON keys whose value differs between two servers by nature (a store's own positions, sizes,
#: times, paths, process facts); their values are replaced, their presence still compared
VOLATILE_KEYS = frozenset({
    "storeTimestamp", "commitLogOffset", "storeSize", "lastUpdateTimestamp", "bootTimestamp",
    "indexLastUpdateTimestamp", "indexLastUpdatePhyoffset", "phyOffset", "physicOffset", "minTimeStamp",
    "maxTimeStamp", "consumeTimeStamp", "timestamp", "counter", "lastTimestamp", "brokerVersion",
    "earliestStoreTime", "lastConsumeTimestamp", "delayTime", "popTime", "consumeTps", "pullTPS",
    "consumeFailedTPS", "pullRT", "pullTps", "sendTps", "brokerVersionDesc", "stateVersion",
    "avgpt", "tps", "sum",  # VIEW_BROKER_STATS_DATA: measured times and rates, and counts as of the
    # sampler's last run (Java samples every 10 s: the same puts counted or not, by the clock)
})


def normalise(text: str) -> str:
    """``text`` with what differs between two servers by nature replaced (see the module's doc)."""
    for pattern, token in _NORMALISE:
        text = pattern.sub(token, text)
    return text


def _plain(value: Any, key: str = "") -> Any:
    """A parsed JSON value as comparable plain data: object keys (fastjson writes MessageQueue keys)
    made text, volatile values replaced, strings normalised, dict entries sorted."""
    if key in VOLATILE_KEYS and value is not None and not isinstance(value, (dict, list)):
        return "<v>"
    if isinstance(value, dict):
        items = [(normalise(_key_text(k)), _plain(v, k if isinstance(k, str) else "")) for k, v in value.items()]
        return {k: v for k, v in sorted(items, key=lambda kv: kv[0])}
    if isinstance(value, list):  # a list of texts or numbers is a Java Set: its order is a HashSet's
        items = [_plain(v) for v in value]
        return sorted(items, key=str) if all(isinstance(v, (str, int, float)) for v in items) else items
    if isinstance(value, str):
        return normalise(value)
    if isinstance(value, int) and not isinstance(value, bool) and 10**12 <= value < 2 * 10**12:
        return "<ms>"
    return value


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, dict):
        return json.dumps(_plain(key), sort_keys=True, ensure_ascii=False)
    return str(key)


#: request codes whose success body is stored messages (the records of the commit log)
MESSAGE_BODIES = {RequestCode.PULL_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.QUERY_MESSAGE,
                  RequestCode.POP_MESSAGE, RequestCode.PEEK_MESSAGE}
#: request codes whose body is a properties text (``key=value`` lines): compared as its keys
PROPERTIES_BODIES = {RequestCode.GET_BROKER_CONFIG, RequestCode.GET_NAMESRV_CONFIG}
#: request codes whose body is compared as its keys only (a broker's own figures, each by nature)
KEYS_ONLY_BODIES = {RequestCode.GET_BROKER_RUNTIME_INFO}
#: properties a broker stamps on a stored message itself (positions, times, its own ids)
VOLATILE_PROPERTIES = frozenset({"MSG_REGION", "TRACE_ON", "POP_CK", "1ST_POP_TIME", "POP_CK_OFFSET"})


def body_of(code: int, body: bytes | None) -> Any:
    """The compared form of a response body (see the module's doc)."""
    if not body:
        return ""
    if code in MESSAGE_BODIES:
        try:
            return [_message(m) for m in decode_records(body)]
        except Exception as exc:  # noqa: BLE001  not records: compared as what it is
            return f"<{len(body)} bytes, not records: {type(exc).__name__}>"
    if code in KEYS_ONLY_BODIES:
        try:
            table = fastjson.loads(body)
            return sorted(table.get("table", table)) if isinstance(table, dict) else f"<{len(body)} bytes>"
        except (ValueError, RecursionError):
            return f"<{len(body)} bytes, not JSON>"
    if code in PROPERTIES_BODIES:
        text = body.decode("utf-8", "replace")
        return sorted({line.split("=", 1)[0] for line in text.splitlines() if "=" in line})
    try:
        return _plain(fastjson.loads(body))
    except (ValueError, RecursionError):
        text = body.decode("utf-8", "replace")
        return normalise(text) if text.isprintable() else f"<{len(body)} bytes>"


def _message(m: Any) -> dict[str, Any]:
    props = {k: ("<v>" if k in VOLATILE_PROPERTIES else normalise(v)) for k, v in sorted(m.properties.items())}
    return {"topic": m.topic, "queueId": m.queue_id, "queueOffset": m.queue_offset, "flag": m.flag,
            "sysFlag": m.sys_flag, "bornTimestamp": m.born_timestamp, "reconsumeTimes": m.reconsume_times,
            "body": (m.body or b"").decode("utf-8", "replace"), "properties": props}


@dataclass(frozen=True)
class Answer:
    """What one side answered to one request, in the fields that are compared."""

    code: str  # the response code's name (TIMEOUT / CLOSED / ONEWAY / HARNESS when there was none)
    remark: str = ""
    ext: tuple[tuple[str, str], ...] = ()
    body: str = ""

    def differences(self, other: "Answer") -> list[str]:
        out = []
        for name in ("code", "remark", "ext", "body"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                out.append(f"{name}: {a!r} != {b!r}" if name != "body" else _body_diff(a, b))
        return out


def _body_diff(a: str, b: str) -> str:
    """The body difference, readable: the first lines that differ of the two pretty texts."""
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"body: line {i}: {x.strip()!r} != {y.strip()!r}"
    return f"body: {len(la)} lines != {len(lb)} lines: {'|'.join(la[len(lb):] or lb[len(la):])[:300]!r}"


#: ext fields of a response that differ by nature (store positions and times, the store's own ids)
VOLATILE_EXT = frozenset({"msgId", "queueOffset", "offset", "timestamp", "indexLastUpdateTimestamp",
                          "indexLastUpdatePhyoffset", "popTime", "MSG_REGION", "TRACE_ON", "transactionId",
                          "nextBeginOffset", "minOffset", "maxOffset", "startOffsetInfo", "msgOffsetInfo",
                          "orderCountInfo", "restNum", "reviveQid", "extraInfo"})
#: ext fields compared as they are although named in VOLATILE_EXT: offsets of queues whose every
#: message the harness sent alike (a GET_MAX_OFFSET's ``offset`` is its count, not a position)
EXACT_EXT_CODES = {RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                   RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.PULL_MESSAGE}


def answer_of(request_code: int, reply: RemotingCommand) -> Answer:
    try:
        name = ResponseCode(reply.code).name
    except ValueError:
        name = str(reply.code)
    exact = request_code in EXACT_EXT_CODES
    ext = tuple(sorted((k, normalise(v) if exact or k not in VOLATILE_EXT else "<v>")
                       for k, v in (reply.ext_fields or {}).items()))
    body = body_of(request_code, reply.body) if reply.code == ResponseCode.SUCCESS or reply.body else ""
    if not isinstance(body, str):
        body = json.dumps(body, sort_keys=True, ensure_ascii=False, indent=1)
    return Answer(name, normalise(reply.remark or ""), ext, body)


# ---------------------------------------------------------------------- a request
@dataclass(frozen=True)
class Request:
    """One frame's content: its header fields and its body."""

    ext: Mapping[str, str] | None = None
    body: bytes | None = None
    serialize: int = SerializeType.JSON


#: a field left out of a request (a variant's value)
MISSING = "\0missing"


@dataclass(frozen=True)
class Case:
    """One request: ``build(side)`` makes it (what only a side knows, such as the commit-log offset of
    one of its messages, comes from ``side.facts``), sent to the side's broker or name server."""

    code: int
    label: str
    build: Callable[["Side"], Request] = field(compare=False)
    to: str = "broker"  # or "namesrv"
    oneway: bool = False

    @property
    def name(self) -> str:
        return f"{code_name(self.code)}[{self.label}]"


# ---------------------------------------------------------------------- a side
class Connection:
    """One TCP connection to a server, one request at a time; requests the server sends (notices
    to a consumer) are read and left unanswered."""

    def __init__(self, addr: str, timeout: float) -> None:
        self.addr, self.timeout = addr, timeout
        self.sock: socket.socket | None = None
        self.opaque = 0

    def _connect(self) -> socket.socket:
        if self.sock is None:
            host, port = self.addr.rsplit(":", 1)
            self.sock = socket.create_connection((host, int(port)), timeout=self.timeout)
            self.sock.settimeout(self.timeout)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def call(self, code: int, req: Request, oneway: bool = False) -> RemotingCommand | str:
        """The reply, or why there is none: ONEWAY, TIMEOUT, CLOSED."""
        self.opaque += 1
        cmd = RemotingCommand.request(code, ext_fields=dict(req.ext) if req.ext else None, body=req.body,
                                      oneway=oneway, serialize_type=req.serialize, version=MQVersion.V5_3_3)
        cmd.opaque = self.opaque
        try:
            sock = self._connect()
            sock.sendall(command.encode(cmd))
            if oneway:
                return "ONEWAY"
            while True:
                reply = command.decode(self._frame(sock))
                if reply.is_response and reply.opaque == self.opaque:
                    return reply
        except socket.timeout:
            self.close()
            return "TIMEOUT"
        except (OSError, ConnectionError):
            self.close()
            return "CLOSED"

    def _frame(self, sock: socket.socket) -> bytes:
        length = int.from_bytes(self._read(sock, 4), "big")
        return self._read(sock, length)

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)


class Side:
    """One server pair (a broker and its name server) as the harness uses it, with what the setup
    learnt of it (``facts``: the commit-log offsets of its messages, its earliest store time)."""

    def __init__(self, name: str, broker_addr: str, namesrv_addr: str, timeout: float = 3.0) -> None:
        self.name, self.broker_addr, self.namesrv_addr = name, broker_addr, namesrv_addr
        self.conns = {"broker": Connection(broker_addr, timeout), "namesrv": Connection(namesrv_addr, timeout)}
        self.facts: dict[str, Any] = {}

    def ask(self, case: Case) -> Answer:
        try:
            req = case.build(self)
        except Exception as exc:  # noqa: BLE001  the harness's own failure: shown, not hidden
            return Answer("HARNESS", f"{type(exc).__name__}: {exc}")
        reply = self.conns[case.to].call(case.code, req, case.oneway)
        if isinstance(reply, str):
            return Answer(reply)
        return answer_of(case.code, reply)

    def close(self) -> None:
        for c in self.conns.values():
            c.close()


# ---------------------------------------------------------------------- setup
def _ext(header: CommandHeader) -> dict[str, str]:
    return header.encode()


def topic_request(topic: str, queues: int = QUEUES, order: bool = False, **more: str) -> Request:
    return Request({**_ext(admin.CreateTopicRequestHeader(
        topic=topic, defaultTopic="TBW102", readQueueNums=queues, writeQueueNums=queues, perm=6,
        topicFilterType="SINGLE_TAG", topicSysFlag=0, order=order)), **more})


def group_body(group: str, orderly: bool = False) -> bytes:
    return json.dumps({"groupName": group, "consumeEnable": True, "consumeBroadcastEnable": True,
                       "consumeMessageOrderly": orderly, "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0,
                       "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True,
                       "groupSysFlag": 0, "consumeTimeoutMinute": 15}).encode()


def uniq_key(i: int) -> str:
    """The UNIQ_KEY of the harness's message ``i``: the same on both sides (32 hex digits)."""
    return f"7F00000100{i:022X}"


def send_request(topic: str, queue: int, keys: str, tags: str, body: str, uniq: str, v2: bool = True) -> Request:
    props = properties_to_string({"KEYS": keys, "TAGS": tags, "UNIQ_KEY": uniq, "WAIT": "true"})
    h = broker.SendMessageRequestHeader(producerGroup=PRODUCER_GROUP, topic=topic, defaultTopic="TBW102",
                                        defaultTopicQueueNums=4, queueId=queue, sysFlag=0, bornTimestamp=BORN_MS,
                                        flag=0, properties=props, reconsumeTimes=0, unitMode=False, batch=False)
    ext = _ext(broker.SendMessageRequestHeaderV2.from_v1(h)) if v2 else _ext(h)
    return Request(ext, body.encode())


def heartbeat_body(group: str = GROUP, topic: str = TOPIC, client: str = CLIENT_ID) -> bytes:
    return json.dumps({"clientID": client, "producerDataSet": [{"groupName": PRODUCER_GROUP}],
                       "consumerDataSet": [{"groupName": group, "consumeType": "CONSUME_PASSIVELY",
                                            "messageModel": "CLUSTERING",
                                            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                                            "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [],
                                                                     "codeSet": [], "subVersion": BORN_MS,
                                                                     "expressionType": "TAG",
                                                                     "classFilterMode": False}]}]}).encode()


class SetupError(AssertionError):
    pass


def set_up(side: Side, timeout: float = 30.0) -> None:
    """The same topics, groups, messages, consumer offset and client on ``side``, each request checked;
    then until its name server routes the topics and its index finds the keys. Records the facts the
    cases need (each message's commit-log offset, queue 0's earliest store time)."""
    def must(code: int, req: Request, to: str = "broker") -> RemotingCommand:
        reply = side.conns[to].call(code, req)
        if isinstance(reply, str) or reply.code != 0:
            raise SetupError(f"{side.name}: {code_name(code)} {req.ext}: {reply!r}")
        return reply
    for topic, order in ((TOPIC, False), (ORDER_TOPIC, True), (EMPTY_TOPIC, False), (ADMIN_TOPIC, False),
                         (SEND_TOPIC, False)):
        must(RequestCode.UPDATE_AND_CREATE_TOPIC, topic_request(topic, order=order))
    for group in (GROUP, ADMIN_GROUP):
        must(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, Request(body=group_body(group)))
    offsets = []
    for i, (queue, keys, tags, body) in enumerate(MESSAGES):
        reply = must(RequestCode.SEND_MESSAGE_V2, send_request(TOPIC, queue, keys, tags, body, uniq_key(i)))
        offsets.append(decode_offset_msg_id(reply.ext("msgId") or "")[1])
    side.facts["offsets"] = offsets
    must(RequestCode.UPDATE_CONSUMER_OFFSET, Request(_ext(broker.UpdateConsumerOffsetRequestHeader(
        consumerGroup=GROUP, topic=TOPIC, queueId=0, commitOffset=1))))
    must(RequestCode.HEART_BEAT, Request(body=heartbeat_body()))
    must(RequestCode.PUT_KV_CONFIG, Request(_ext(namesrv.PutKVConfigRequestHeader(
        namespace=KV_NAMESPACE, key="k", value="v"))), "namesrv")
    deadline = time.monotonic() + timeout
    while True:
        routed = all(not isinstance(r := side.conns["namesrv"].call(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                     Request({"topic": t})), str) and r.code == 0
                     for t in (TOPIC, ORDER_TOPIC, EMPTY_TOPIC, ADMIN_TOPIC))
        q = side.conns["broker"].call(RequestCode.QUERY_MESSAGE, Request(_ext(broker.QueryMessageRequestHeader(
            topic=TOPIC, key="rdk7", maxNum=32, beginTimestamp=0, endTimestamp=2**62))))
        if routed and not isinstance(q, str) and q.code == 0:
            break
        if time.monotonic() > deadline:
            raise SetupError(f"{side.name}: routes {routed}, the index's answer {q!r}")
        time.sleep(0.2)
    reply = must(RequestCode.GET_EARLIEST_MSG_STORETIME, Request({"topic": TOPIC, "queueId": "0"}))
    side.facts["earliest"] = int(reply.ext("timestamp") or 0)


# ---------------------------------------------------------------------- cases
#: boundary values of a header field by its declared kind; MISSING leaves the field out
TEXTS = {"missing": MISSING, "empty": "", "blank": " ", "non-ascii": "主题", "over-long": "T" * 256,
         "huge": "T" * 20_000, "control": "a\x01b", "percent": "%RETRY%rdiff_g"}
INTS = {"missing": MISSING, "empty": "", "0": "0", "-1": "-1", "max-int": str(INT_RANGE[1]),
        "int+1": str(INT_RANGE[1] + 1), "max-long": str(2**63 - 1), "long+1": str(2**63), "text": "abc",
        "decimal": "1.5", "spaces": " 1 "}
BOOLS = {"missing": MISSING, "empty": "", "yes": "yes", "TRUE": "TRUE", "1": "1"}
#: values of fields named as a resource (a topic, a group, a queue id)
TOPICS = {"unknown": UNKNOWN_TOPIC, "system": "TBW102", "retry": "%RETRY%rdiff_g", "order": ORDER_TOPIC,
          "empty-topic": EMPTY_TOPIC}
GROUPS = {"unknown": UNKNOWN_GROUP, "other": ADMIN_GROUP, "system": "TOOLS_CONSUMER"}
QUEUE_IDS = {"last": str(QUEUES - 1), "out-of-range": str(QUEUES), "1024": "1024"}
_TOPIC_FIELDS = {"topic", "b", "originTopic"}
_GROUP_FIELDS = {"consumerGroup", "group", "groupName", "producerGroup", "a", "srcGroup", "destGroup",
                 "compareGroup"}
_QUEUE_FIELDS = {"queueId", "e"}


def _values(header_cls: type[CommandHeader], name: str) -> dict[str, str]:
    kinds = {n: k for n, k, _r in header_cls._fields}
    kind = kinds.get(name, str)
    out = dict(INTS if kind is int else BOOLS if kind is bool else TEXTS)
    if name in _TOPIC_FIELDS:
        out.update(TOPICS)
    if name in _GROUP_FIELDS:
        out.update(GROUPS)
    if name in _QUEUE_FIELDS:
        out.update(QUEUE_IDS)
    return out


def _with(ext: Mapping[str, str], changes: Mapping[str, str]) -> dict[str, str]:
    out = dict(ext)
    for k, v in changes.items():
        if v == MISSING:
            out.pop(k, None)
        else:
            out[k] = v
    return out


@dataclass(frozen=True)
class Base:
    """A valid request of one code and the header class its fields are declared by (its variants
    move each of these fields); ``build`` may read the side's facts."""

    code: int
    label: str
    header: type[CommandHeader] | None
    build: Callable[[Side], Request]
    to: str = "broker"
    vary: bool = True  # variants of its header fields
    bodies: Mapping[str, bytes] = field(default_factory=dict)  # body variants: label -> body
    skip: frozenset[str] = frozenset()  # value labels not tried (a send must not fill a topic others read)

    def case(self) -> Case:
        return Case(self.code, self.label, self.build, self.to)

    def variants(self) -> list[Case]:
        out: list[Case] = []
        if self.vary and self.header is not None:
            for name, _kind, _req in self.header._fields:
                for label, value in _values(self.header, name).items():
                    if label in self.skip:
                        continue
                    out.append(Case(self.code, f"{self.label}:{name}={label}",
                                    partial(_build_changed, self.build, {name: value}), self.to))
        for label, body in self.bodies.items():
            out.append(Case(self.code, f"{self.label}:body={label}", partial(_build_body, self.build, body),
                            self.to))
        return out


def _changed(req: Request, changes: Mapping[str, str]) -> Request:
    return Request(_with(req.ext or {}, changes), req.body, req.serialize)


def _build_changed(build: Callable[[Side], Request], changes: Mapping[str, str], side: Side) -> Request:
    return _changed(build(side), changes)


def _build_body(build: Callable[[Side], Request], body: bytes, side: Side) -> Request:
    return Request(build(side).ext, body)


def _search(at: Callable[[Side], int], extra: Mapping[str, str], side: Side) -> Request:
    return Request({"topic": TOPIC, "queueId": "0", "timestamp": str(at(side)), **extra})


def _fixed(ext: Mapping[str, str] | CommandHeader | None = None, body: bytes | None = None,
           serialize: int = SerializeType.JSON) -> Callable[[Side], Request]:
    """A request the same on every side."""
    req = Request(_ext(ext) if isinstance(ext, CommandHeader) else dict(ext or {}), body, serialize)
    return lambda s: req


BAD_JSON_BODIES = {"garbage": b"\x00\x01not json", "empty-object": b"{}", "array": b"[1,2]",
                   "truncated": b'{"clientID":"x","consumerDataSet":[{'}


_READ_TOPICS = frozenset({"order", "empty-topic"})


def _bases() -> list[Base]:
    B = RequestCode
    now_ms = 2 * 10**12 - 1  # later than any store time, the same on both sides
    out = [
        # ---- sends (each a new message on both sides: the same queue, the same UNIQ_KEY)
        Base(B.SEND_MESSAGE_V2, "send-v2", broker.SendMessageRequestHeaderV2,
             lambda s: send_request(SEND_TOPIC, 1, "k", "t", "new", uniq_key(100)), skip=_READ_TOPICS),
        Base(B.SEND_MESSAGE, "send", broker.SendMessageRequestHeader,
             lambda s: send_request(SEND_TOPIC, 2, "k", "t", "new", uniq_key(101), v2=False),
             bodies={"empty": b""}, skip=_READ_TOPICS),
        # ---- pulls, without suspension (sysFlag 0: no commit, no long polling)
        Base(B.PULL_MESSAGE, "pull", broker.PullMessageRequestHeader, _fixed(broker.PullMessageRequestHeader(
            consumerGroup=GROUP, topic=TOPIC, queueId=0, queueOffset=0, maxMsgNums=32, sysFlag=0, commitOffset=0,
            suspendTimeoutMillis=0, subscription="*", subVersion=0, expressionType="TAG"))),
        Base(B.PULL_MESSAGE, "pull-offset-past", None, _fixed(broker.PullMessageRequestHeader(
            consumerGroup=GROUP, topic=TOPIC, queueId=1, queueOffset=100, maxMsgNums=32, sysFlag=0, commitOffset=0,
            suspendTimeoutMillis=0, subscription="*", subVersion=0, expressionType="TAG"))),
        Base(B.PULL_MESSAGE, "pull-tag", None, _fixed(broker.PullMessageRequestHeader(
            consumerGroup=GROUP, topic=TOPIC, queueId=0, queueOffset=0, maxMsgNums=32, sysFlag=2, commitOffset=0,
            suspendTimeoutMillis=0, subscription="tagA", subVersion=0, expressionType="TAG"))),
        # ---- consumer offsets
        Base(B.QUERY_CONSUMER_OFFSET, "query-offset", broker.QueryConsumerOffsetRequestHeader,
             _fixed(broker.QueryConsumerOffsetRequestHeader(consumerGroup=GROUP, topic=TOPIC, queueId=0))),
        Base(B.QUERY_CONSUMER_OFFSET, "query-offset-unset", None,
             _fixed(broker.QueryConsumerOffsetRequestHeader(consumerGroup=GROUP, topic=TOPIC, queueId=1))),
        Base(B.QUERY_CONSUMER_OFFSET, "query-offset-unset-nozero", None, _fixed(
            broker.QueryConsumerOffsetRequestHeader(consumerGroup=GROUP, topic=TOPIC, queueId=1,
                                                    setZeroIfNotFound=False))),
        Base(B.UPDATE_CONSUMER_OFFSET, "update-offset", broker.UpdateConsumerOffsetRequestHeader, _fixed(
            broker.UpdateConsumerOffsetRequestHeader(consumerGroup=ADMIN_GROUP, topic=TOPIC, queueId=2, commitOffset=1))),
        # ---- queue offsets and times
        Base(B.GET_MAX_OFFSET, "max-offset", broker.GetMaxOffsetRequestHeader,
             _fixed(broker.GetMaxOffsetRequestHeader(topic=TOPIC, queueId=0))),
        Base(B.GET_MIN_OFFSET, "min-offset", broker.GetMinOffsetRequestHeader,
             _fixed(broker.GetMinOffsetRequestHeader(topic=TOPIC, queueId=0))),
        Base(B.GET_EARLIEST_MSG_STORETIME, "earliest", broker.GetEarliestMsgStoretimeRequestHeader,
             _fixed(broker.GetEarliestMsgStoretimeRequestHeader(topic=TOPIC, queueId=0))),
        # ---- messages by offset and by key
        Base(B.VIEW_MESSAGE_BY_ID, "view", broker.ViewMessageRequestHeader,
             lambda s: Request({"offset": str(s.facts["offsets"][0])})),
        Base(B.VIEW_MESSAGE_BY_ID, "view-misaligned", None,
             lambda s: Request({"offset": str(s.facts["offsets"][0] + 1)})),
        Base(B.QUERY_MESSAGE, "query-key", broker.QueryMessageRequestHeader, _fixed(broker.QueryMessageRequestHeader(
            topic=TOPIC, key="rdk3", maxNum=32, beginTimestamp=0, endTimestamp=now_ms))),
        Base(B.QUERY_MESSAGE, "query-uniq", None, _fixed({**_ext(broker.QueryMessageRequestHeader(
            topic=TOPIC, key=uniq_key(2), maxNum=32, beginTimestamp=0, endTimestamp=now_ms)),
            "_UNIQUE_KEY_QUERY": "true"})),
        # ---- clients
        Base(B.HEART_BEAT, "heartbeat", None, _fixed(body=heartbeat_body()), bodies={
            **BAD_JSON_BODIES, "unknown-group": heartbeat_body(group=UNKNOWN_GROUP),
            "unknown-topic": heartbeat_body(topic=UNKNOWN_TOPIC)}),
        Base(B.GET_CONSUMER_LIST_BY_GROUP, "consumer-list", broker.GetConsumerListByGroupRequestHeader,
             _fixed(broker.GetConsumerListByGroupRequestHeader(consumerGroup=GROUP))),
        Base(B.LOCK_BATCH_MQ, "lock", None, _fixed(body=_lock_body()), bodies={
            **BAD_JSON_BODIES, "other-broker": _lock_body(broker_name="no-such-broker"),
            "unknown-group": _lock_body(group=UNKNOWN_GROUP), "no-queues": _lock_body(queues=())}),
        Base(B.UNLOCK_BATCH_MQ, "unlock", None, _fixed(body=_lock_body()), bodies={
            **BAD_JSON_BODIES, "unknown-group": _lock_body(group=UNKNOWN_GROUP)}),
        # ---- POP (no long polling: a pop waits at most pollTime)
        Base(B.POP_MESSAGE, "pop-empty", pop.PopMessageRequestHeader, _fixed(pop.PopMessageRequestHeader(
            consumerGroup=GROUP, topic=EMPTY_TOPIC, queueId=-1, maxMsgNums=1, invisibleTime=60_000, pollTime=0,
            bornTime=BORN_MS, initMode=0, expType="TAG", exp="*"))),
        Base(B.PEEK_MESSAGE, "peek", pop.PeekMessageRequestHeader, _fixed(pop.PeekMessageRequestHeader(
            consumerGroup=GROUP, topic=TOPIC, queueId=0, maxMsgNums=1))),
        Base(B.ACK_MESSAGE, "ack-forged", pop.AckMessageRequestHeader, _fixed(pop.AckMessageRequestHeader(
            consumerGroup=GROUP, topic=TOPIC, queueId=0, extraInfo=f"0 {BORN_MS} 60000 0 0 {BROKER_NAME} 0 0",
            offset=0))),
        Base(B.CHANGE_MESSAGE_INVISIBLETIME, "change-forged", pop.ChangeInvisibleTimeRequestHeader, _fixed(
            pop.ChangeInvisibleTimeRequestHeader(consumerGroup=GROUP, topic=TOPIC, queueId=0,
                                                 extraInfo=f"0 {BORN_MS} 60000 0 0 {BROKER_NAME} 0 0", offset=0,
                                                 invisibleTime=30_000))),
        Base(B.POLLING_INFO, "polling-info", pop.PollingInfoRequestHeader,
             _fixed(pop.PollingInfoRequestHeader(consumerGroup=GROUP, topic=TOPIC, queueId=0))),
        # ---- topic and group admin (ADMIN_TOPIC / ADMIN_GROUP: the other cases do not read them)
        Base(B.UPDATE_AND_CREATE_TOPIC, "create-topic", admin.CreateTopicRequestHeader,
             lambda s: topic_request(ADMIN_TOPIC)),
        Base(B.GET_TOPIC_CONFIG, "topic-config", admin.TopicRequestHeader, _fixed({"topic": TOPIC})),
        Base(B.GET_TOPIC_STATS_INFO, "topic-stats", admin.TopicRequestHeader, _fixed({"topic": TOPIC})),
        Base(B.QUERY_TOPIC_CONSUME_BY_WHO, "consumed-by", admin.TopicRequestHeader, _fixed({"topic": TOPIC})),
        Base(B.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, "create-group", None, _fixed(body=group_body(ADMIN_GROUP)),
             bodies={**BAD_JSON_BODIES, "no-name": group_body("")}),
        Base(B.GET_SUBSCRIPTIONGROUP_CONFIG, "group-config", None, _fixed({"group": GROUP})),
        Base(B.GET_CONSUME_STATS, "consume-stats", admin.GetConsumeStatsRequestHeader,
             _fixed(admin.GetConsumeStatsRequestHeader(consumerGroup=GROUP, topic=TOPIC))),
        Base(B.GET_CONSUME_STATS, "consume-stats-all-topics", None,
             _fixed(admin.GetConsumeStatsRequestHeader(consumerGroup=GROUP))),
        Base(B.GET_CONSUMER_CONNECTION_LIST, "connections", admin.ConsumerGroupRequestHeader,
             _fixed(admin.ConsumerGroupRequestHeader(consumerGroup=GROUP))),
        Base(B.GET_PRODUCER_CONNECTION_LIST, "producers", admin.GetProducerConnectionListRequestHeader,
             _fixed(admin.GetProducerConnectionListRequestHeader(producerGroup=PRODUCER_GROUP))),
        Base(B.QUERY_TOPICS_BY_CONSUMER, "topics-of-group", None, _fixed({"group": GROUP})),
        Base(B.QUERY_SUBSCRIPTION_BY_CONSUMER, "subscription", None, _fixed({"group": GROUP, "topic": TOPIC})),
        Base(B.QUERY_CONSUME_TIME_SPAN, "time-span", admin.QueryConsumeTimeSpanRequestHeader,
             _fixed(admin.QueryConsumeTimeSpanRequestHeader(topic=TOPIC, group=GROUP))),
        Base(B.QUERY_CONSUME_QUEUE, "consume-queue", admin.QueryConsumeQueueRequestHeader,
             _fixed(admin.QueryConsumeQueueRequestHeader(topic=TOPIC, queueId=0, index=0, count=4,
                                                         consumerGroup=GROUP))),
        Base(B.VIEW_BROKER_STATS_DATA, "stats", admin.ViewBrokerStatsDataRequestHeader,
             _fixed(admin.ViewBrokerStatsDataRequestHeader(statsName="TOPIC_PUT_NUMS", statsKey=TOPIC))),
        Base(B.GET_BROKER_CONSUME_STATS, "broker-consume-stats", None, _fixed({"isOrder": "false"})),
        Base(B.GET_ALL_CONSUMER_OFFSET, "all-offsets", None, _fixed(), vary=False),
        Base(B.GET_ALL_DELAY_OFFSET, "delay-offsets", None, _fixed(), vary=False),
        Base(B.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "all-groups", None, _fixed(), vary=False),
        Base(B.GET_ALL_TOPIC_CONFIG, "all-topics", None, _fixed(), vary=False),
        Base(B.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, "system-topics", None, _fixed(), vary=False),
        Base(B.GET_BROKER_RUNTIME_INFO, "runtime-info", None, _fixed(), vary=False),
        Base(B.GET_BROKER_CONFIG, "broker-config", None, _fixed(), vary=False),
        # ---- the name server
        Base(B.GET_ROUTEINFO_BY_TOPIC, "route", namesrv.GetRouteInfoRequestHeader, _fixed({"topic": TOPIC}),
             "namesrv"),
        Base(B.GET_BROKER_CLUSTER_INFO, "cluster", None, _fixed(), "namesrv", vary=False),
        Base(B.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, "topic-list", None, _fixed(), "namesrv", vary=False),
        Base(B.GET_SYSTEM_TOPIC_LIST_FROM_NS, "ns-system-topics", None, _fixed(), "namesrv", vary=False),
        Base(B.GET_TOPICS_BY_CLUSTER, "topics-of-cluster", namesrv.GetTopicsByClusterRequestHeader,
             _fixed({"cluster": CLUSTER}), "namesrv"),
        Base(B.GET_KV_CONFIG, "kv", namesrv.GetKVConfigRequestHeader,
             _fixed({"namespace": KV_NAMESPACE, "key": "k"}), "namesrv"),
        Base(B.GET_KVLIST_BY_NAMESPACE, "kv-list", namesrv.GetKVListByNamespaceRequestHeader,
             _fixed({"namespace": KV_NAMESPACE}), "namesrv"),
        Base(B.GET_NAMESRV_CONFIG, "ns-config", None, _fixed(), "namesrv", vary=False),
    ]
    # SEARCH_OFFSET_BY_TIMESTAMP: each boundaryType at each kind of time (the side's own earliest store time)
    for boundary in (None, "lower", "upper", "LOWER", "Upper", "middle", ""):
        for label, at in (("0", lambda s: 0), ("earliest", lambda s: s.facts["earliest"]),
                          ("future", lambda s: now_ms)):
            extra = {} if boundary is None else {"boundaryType": boundary}
            out.append(Base(B.SEARCH_OFFSET_BY_TIMESTAMP, f"search-{label}-boundary={boundary}",
                            broker.SearchOffsetRequestHeader if (boundary, label) == (None, "earliest") else None,
                            partial(_search, at, extra)))
    return out


def _lock_body(group: str = GROUP, broker_name: str = BROKER_NAME, queues: tuple[int, ...] = (0, 1)) -> bytes:
    return json.dumps({"consumerGroup": group, "clientId": CLIENT_ID, "onlyThisBroker": False,
                       "mqSet": [{"topic": TOPIC, "brokerName": broker_name, "queueId": q} for q in queues]}).encode()


#: cases whose request is no base's variant: unknown codes, frames in the other serialisation
def _extra_cases() -> list[Case]:
    out = [Case(99_999, "unknown-code", _fixed()), Case(99_999, "unknown-code-ns", _fixed(), "namesrv")]
    for code, ext in ((RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}),
                      (RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"})):
        out.append(Case(code, "rocketmq-serialized", _fixed(ext, serialize=SerializeType.ROCKETMQ)))
    out.append(Case(RequestCode.GET_ROUTEINFO_BY_TOPIC, "rocketmq-serialized",
                    lambda s: Request({"topic": TOPIC}, None, SerializeType.ROCKETMQ), "namesrv"))
    return out


def cases() -> list[Case]:
    """The CI set: each base request, then its variants, in a fixed order."""
    out: list[Case] = []
    for base in _bases():
        out.append(base.case())
        out += base.variants()
    return out + _extra_cases()


_STRINGS = ["", " ", "a", "主题", "T" * 256, "%RETRY%x", "TBW102", "-1", "0", "1", "4", "2147483648",
            "9223372036854775808", "abc", "true", UNKNOWN_TOPIC, UNKNOWN_GROUP, MISSING]


def random_cases(count: int, seed: int) -> list[Case]:
    """``count`` cases for the long run: the bases with two or three of their fields set to random
    boundary values (of any kind), reproducible from ``seed``."""
    rng = random.Random(seed)
    bases = [b for b in _bases()]
    out = []
    for i in range(count):
        b = rng.choice(bases)
        moves = [(rng.random(), rng.choice(_STRINGS)) for _ in range(rng.randint(1, 3))]
        out.append(Case(b.code, f"{b.label}~{i}", partial(_build_moved, b.build, moves), b.to))
    return out


def _build_moved(build: Callable[[Side], Request], moves: list[tuple[float, str]], side: Side) -> Request:
    return _moved(build(side), moves)


def _moved(req: Request, moves: list[tuple[float, str]]) -> Request:
    keys = sorted(req.ext or {})
    changes: dict[str, str] = {}
    for pick, value in moves:
        if keys:
            changes[keys[int(pick * len(keys)) % len(keys)]] = value
    return _changed(req, changes)


# ---------------------------------------------------------------------- running
Result = diff_common.Result


def run(ours: Side, theirs: Side, selected: list[Case]) -> list[Result[Case, Answer]]:
    """Every case sent to both sides, in order, each side on its own thread (the order of the state
    changes is the same on both: a side's cases run one after another)."""
    answers: dict[str, list[Answer]] = {}

    def all_of(side: Side) -> None:
        answers[side.name] = [side.ask(c) for c in selected]
    threads = [threading.Thread(target=all_of, args=(s,)) for s in (ours, theirs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [Result(c, a, b) for c, a, b in zip(selected, answers[ours.name], answers[theirs.name])]


# ---------------------------------------------------------------------- the two sides, started
BROKER_PROPS: dict[str, object] = {"brokerName": BROKER_NAME, "brokerClusterName": CLUSTER,
                                   "autoCreateTopicEnable": False, "autoCreateSubscriptionGroup": False}
VERSION = "5.3.3"
HOST = "127.0.0.1"


class Both:
    """rmqpy's name server + broker and the Java ones of :data:`VERSION`, started side by side and set
    up alike (:func:`set_up`); ``close()`` stops everything started (Java killed: its store is thrown away)."""

    def __init__(self, tmp: Any, version: str = VERSION) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from tests.interop import jvm, servers
        self.version = version
        self.rmqpy: Any = None
        self.java: Any = None
        self.sides: list[Side] = []
        try:
            with ThreadPoolExecutor(2) as pool:  # the JVMs take longest: started beside rmqpy
                java = pool.submit(jvm.JavaCluster, version, tmp / "java", HOST, BROKER_PROPS)
                self.rmqpy = servers.Cluster(tmp / "rmqpy", HOST, BROKER_PROPS)
                self.java = java.result()
            self.ours = Side("rmqpy", self.rmqpy.broker_addr, self.rmqpy.ns_addr)
            self.theirs = Side("java", self.java.broker_addr, self.java.ns_addr)
            self.sides = [self.ours, self.theirs]
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(set_up, self.sides))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for s in self.sides:
            s.close()
        if self.java is not None:
            self.java.close(clean=False)
        if self.rmqpy is not None:
            self.rmqpy.close()
