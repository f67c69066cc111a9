"""The options of the ``rocketmq`` format, checked before anything is read or written.

Three option sets: store mode (a store directory given as ``path``), broker mode (``nameServer``
given) and the sink. An option that the mode does not know, or a value that is not what the
option takes, is refused with an :class:`OptionError` naming the option: a misspelt or
misplaced option must not silently read something else (``topic`` read as nothing, so every
topic; ``checkCRC=maybe`` read as false).

Spark hands options with lower-cased names; the checks here compare lower-cased names and
report the documented spelling. No pyspark import here, so the checks are testable alone.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from typing import Any, Iterable, Mapping

#: RocketMQ's topic and group name rule (Java ``TopicValidator`` / ``Validators``)
_NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_NAME_MAX = 127

#: options Spark itself may add to a data source's options (never ours to refuse)
_SPARK_OWN = {"path", "paths", "checkpointlocation"}


class OptionError(ValueError):
    """An option of the ``rocketmq`` format is unknown or has an invalid value."""


# --------------------------------------------------------------------------- value parsers

def _bool(name: str, v: Any) -> bool:
    s = str(v).strip().lower()
    if s == "true":
        return True
    if s == "false":
        return False
    raise OptionError(f"rocketmq: option {name} must be true or false, not {v!r}")


def _int(name: str, v: Any, lo: int = 1, hi: int | None = None) -> int:
    s = str(v).strip()
    try:
        n = int(s)
    except ValueError:
        raise OptionError(f"rocketmq: option {name} must be an integer, not {v!r}") from None
    if n < lo or (hi is not None and n > hi):
        bound = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise OptionError(f"rocketmq: option {name} must be {bound}, not {n}")
    return n


def _time_ms(name: str, v: Any) -> int:
    """Epoch milliseconds, or an ISO-8601 date/time (no zone = UTC)."""
    s = str(v).strip()
    if s.lstrip("-").isdigit():
        return int(s)
    try:
        t = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(f"rocketmq: option {name} must be epoch milliseconds or an ISO-8601 time, not {v!r}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return int(t.timestamp() * 1000)


def check_name(option: str, name: str, what: str = "topic") -> str:
    if not name or len(name) > _NAME_MAX or not _NAME_RE.match(name):
        raise OptionError(f"rocketmq: option {option}: {name!r} is not a valid {what} name "
                          f"(1..{_NAME_MAX} characters of a-z A-Z 0-9 _ - % |)")
    return name


def _names(option: str, v: Any, what: str = "topic") -> list[str]:
    items = [x.strip() for x in str(v).split(",")]
    if not any(items):
        raise OptionError(f"rocketmq: option {option} is empty")
    return [check_name(option, x, what) for x in items if x]


def _int_list(option: str, v: Any) -> list[int]:
    items = [x.strip() for x in str(v).split(",") if x.strip()]
    if not items:
        raise OptionError(f"rocketmq: option {option} is empty")
    return [_int(option, x, 0) for x in items]


def _choice(name: str, v: Any, choices: Iterable[str]) -> str:
    s = str(v).strip().lower()
    ch = list(choices)
    if s not in ch:
        raise OptionError(f"rocketmq: option {name} must be one of {', '.join(ch)}, not {v!r}")
    return s


def _check_known(opts: Mapping[str, Any], known: Iterable[str], mode: str) -> dict[str, Any]:
    """{lower-cased name: value}; refuses names not in ``known`` (documented spellings)."""
    spelled = {k.lower(): k for k in known}
    out: dict[str, Any] = {}
    for k, v in opts.items():
        low = k.lower()
        if low in _SPARK_OWN:
            out[low] = v
            continue
        if low not in spelled:
            other = _ALL_SPELLINGS().get(low)
            if other is not None:
                raise OptionError(f"rocketmq: option {other} is not one for {mode}; "
                                  f"known: {', '.join(sorted(spelled.values()))}")
            raise OptionError(f"rocketmq: unknown option {k!r} for {mode}; known: {', '.join(sorted(spelled.values()))}")
        out[low] = v
    return out


def _ALL_SPELLINGS() -> dict[str, str]:  # noqa: N802 - a constant computed late (the lists come below)
    return {k.lower(): k for k in (*STORE_OPTIONS, *BROKER_OPTIONS, *SINK_OPTIONS)}


# --------------------------------------------------------------------------- offsets

EARLIEST = "earliest"
LATEST = "latest"


def store_offsets(name: str, v: Any, allow_latest: bool = True) -> str | dict[str, dict[int, int]]:
    """``earliest`` | ``latest`` | ``{"topic": {"queueId": offset}}`` (-2 earliest, -1 latest)."""
    s = str(v).strip()
    if s.lower() in (EARLIEST, LATEST):
        return s.lower()
    try:
        d = json.loads(s)
    except ValueError:
        raise OptionError(f"rocketmq: option {name} must be earliest, latest or JSON like "
                          f'{{"TopicA": {{"0": 23, "1": -2}}}}, not {v!r}') from None
    out: dict[str, dict[int, int]] = {}
    if not isinstance(d, dict):
        raise OptionError(f'rocketmq: option {name}: JSON must be {{"topic": {{"queueId": offset}}}}')
    for t, qs in d.items():
        check_name(name, t)
        if not isinstance(qs, dict) or any(isinstance(x, dict) for x in qs.values()):
            raise OptionError(f'rocketmq: option {name}: in store mode the JSON is {{"topic": {{"queueId": offset}}}} '
                              f"(no broker level: a store is one broker's), got {json.dumps(qs)} for {t}")
        out[t] = {_int(name, q, 0): _offset_value(name, o) for q, o in qs.items()}
    return out


def broker_offsets(name: str, v: Any) -> str | dict[tuple[str, str, int], int]:
    """``earliest`` | ``latest`` | rocketmq-spark's JSON ``{"topic": {"broker": {"queueId": offset}}}``
    (-2 earliest, -1 latest) as {(topic, broker, queueId): offset}."""
    s = str(v).strip()
    if s.lower() in (EARLIEST, LATEST):
        return s.lower()
    example = '{"TopicA": {"broker-a": {"0": 23, "1": -1}}}'
    try:
        d = json.loads(s)
    except ValueError:
        raise OptionError(f"rocketmq: option {name} must be earliest, latest or JSON like {example}, not {v!r}") from None
    if not isinstance(d, dict):
        raise OptionError(f"rocketmq: option {name}: JSON must be like {example}")
    out: dict[tuple[str, str, int], int] = {}
    for t, brokers in d.items():
        check_name(name, t)
        if not isinstance(brokers, dict) or not all(isinstance(x, dict) for x in brokers.values()):
            raise OptionError(f"rocketmq: option {name}: JSON must be like {example} (topic, broker name, queue id), "
                              f"got {json.dumps(brokers)} for {t}")
        for b, qs in brokers.items():
            check_name(name, b, "broker")
            for q, o in qs.items():
                out[(t, b, _int(name, q, 0))] = _offset_value(name, o)
    return out


def _offset_value(name: str, o: Any) -> int:
    if isinstance(o, bool) or not isinstance(o, int) or o < -2:
        raise OptionError(f"rocketmq: option {name}: an offset is an integer >= 0, or -2 (earliest) / -1 (latest), "
                          f"not {o!r}")
    return o


def offsets_json(offsets: Mapping[tuple[str, str, int], int]) -> dict[str, dict[str, dict[str, int]]]:
    """{(topic, broker, queueId): offset} as rocketmq-spark writes it, sorted."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for (t, b, q), o in sorted(offsets.items()):
        out.setdefault(t, {}).setdefault(b, {})[str(q)] = int(o)
    return out


def parse_offsets_json(d: Mapping[str, Any]) -> dict[tuple[str, str, int], int]:
    return {(t, b, int(q)): int(o) for t, bs in d.items() for b, qs in bs.items() for q, o in qs.items()}


# --------------------------------------------------------------------------- store mode

STORE_OPTIONS = ("path", "topic", "topics", "queueIds", "startTime", "endTime", "partitioning", "splitBytes",
                 "unitsPerSplit", "checkCRC", "decompressBody", "batchRows", "batchBytes", "startingOffsets",
                 "endingOffsets", "maxOffsetsPerTrigger", "maxMessagesPerTrigger", "filterPushdown")


class StoreOptions:
    """Store mode: ``spark.read.format("rocketmq").load("/path/to/store")``."""

    def __init__(self, options: Mapping[str, Any], streaming: bool = False):
        o = _check_known(options, STORE_OPTIONS, "reading a store directory")
        path = o.get("path")
        if not path:
            raise OptionError("rocketmq: give the store directory (.load('/path/to/store')) or a name server "
                              "(option nameServer)")
        self.path = str(path)
        self.topics: frozenset[str] | None = None
        for key, spelled in (("topic", "topic"), ("topics", "topics")):
            if key in o:
                ts = frozenset(_names(spelled, o[key]))
                self.topics = ts if self.topics is None else self.topics | ts
        self.queue_ids = frozenset(_int_list("queueIds", o["queueids"])) if "queueids" in o else None
        self.start_ms = _time_ms("startTime", o["starttime"]) if "starttime" in o else None
        self.end_ms = _time_ms("endTime", o["endtime"]) if "endtime" in o else None
        self.split_bytes = _int("splitBytes", o.get("splitbytes", 64 << 20), 4096)
        self.units_per_split = _int("unitsPerSplit", o.get("unitspersplit", 200_000))
        self.check_crc = _bool("checkCRC", o.get("checkcrc", "true"))
        self.decompress = _bool("decompressBody", o.get("decompressbody", "true"))
        self.batch_rows = _int("batchRows", o.get("batchrows", 65536))
        self.batch_bytes = _int("batchBytes", o.get("batchbytes", 32 << 20))
        self.pushdown = _choice("filterPushdown", o.get("filterpushdown", "auto"), ("auto", "true", "false"))
        self.starting = store_offsets("startingOffsets", o["startingoffsets"]) if "startingoffsets" in o else None
        self.ending = store_offsets("endingOffsets", o["endingoffsets"]) if "endingoffsets" in o else None
        if streaming and self.ending is not None:
            raise OptionError("rocketmq: option endingOffsets is for batch queries only")
        if not streaming and self.ending == EARLIEST:
            raise OptionError("rocketmq: option endingOffsets must be latest or JSON in a batch query, not earliest")
        if not streaming and self.starting == LATEST:
            raise OptionError("rocketmq: option startingOffsets must be earliest or JSON in a batch query, not latest")
        mx = None
        for key, spelled in (("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
                             ("maxmessagespertrigger", "maxMessagesPerTrigger")):
            if key in o:
                if not streaming:
                    raise OptionError(f"rocketmq: option {spelled} is for streaming queries only")
                mx = _int(spelled, o[key])
        self.max_per_trigger = mx
        by_offsets = self.starting is not None or self.ending is not None
        if "partitioning" in o:
            self.partitioning = _choice("partitioning", o["partitioning"], ("commitlog", "consumequeue"))
            if by_offsets and self.partitioning == "commitlog" and not streaming:
                raise OptionError("rocketmq: startingOffsets/endingOffsets select consume queue offsets: "
                                  "they need partitioning=consumequeue")
        else:
            self.partitioning = "consumequeue" if by_offsets else "commitlog"


# --------------------------------------------------------------------------- broker mode

BROKER_OPTIONS = ("nameServer", "topic", "topics", "subExpression", "startingOffsets", "endingOffsets",
                  "maxOffsetsPerTrigger", "failOnDataLoss", "pullBatchSize", "pullTimeoutMs", "pullTimeout",
                  "group", "accessKey", "secretKey", "maxQueueSplit", "batchRows")


def _name_server(v: Any) -> str:
    s = str(v).strip()
    addrs = [a.strip() for a in s.split(";") if a.strip()]
    if not addrs:
        raise OptionError("rocketmq: option nameServer is empty")
    for a in addrs:
        host, _, port = a.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise OptionError(f"rocketmq: option nameServer: {a!r} is not host:port (several: separated by ';')")
    return ";".join(addrs)


def _credentials(o: Mapping[str, Any]) -> tuple[str, str] | None:
    ak, sk = o.get("accesskey"), o.get("secretkey")
    if (ak is None) != (sk is None):
        raise OptionError("rocketmq: options accessKey and secretKey go together")
    return (str(ak), str(sk)) if ak is not None and sk is not None else None


class BrokerOptions:
    """Broker mode: ``spark.read.format("rocketmq").option("nameServer", ...).option("topic", ...)``."""

    def __init__(self, options: Mapping[str, Any], streaming: bool = False):
        o = _check_known(options, BROKER_OPTIONS, "reading through brokers (nameServer)")
        if o.get("path"):
            raise OptionError("rocketmq: give either a store directory (load(path)) or option nameServer, not both")
        self.name_server = _name_server(o["nameserver"])
        topics: list[str] = []
        for key, spelled in (("topic", "topic"), ("topics", "topics")):
            if key in o:
                topics += [t for t in _names(spelled, o[key]) if t not in topics]
        if not topics:
            raise OptionError("rocketmq: option topic is required with nameServer (a topic or a comma list)")
        self.topics = topics
        self.sub_expression = str(o.get("subexpression", "*")).strip() or "*"
        if len(self.sub_expression) > 4096:
            raise OptionError("rocketmq: option subExpression is longer than 4096 characters")
        self.starting = broker_offsets("startingOffsets", o.get("startingoffsets", EARLIEST if not streaming else LATEST))
        self.ending = broker_offsets("endingOffsets", o["endingoffsets"]) if "endingoffsets" in o else LATEST
        if streaming and "endingoffsets" in o:
            raise OptionError("rocketmq: option endingOffsets is for batch queries only")
        if not streaming and self.starting == LATEST:
            raise OptionError("rocketmq: option startingOffsets must be earliest or JSON in a batch query, not latest")
        if not streaming and self.ending == EARLIEST:
            raise OptionError("rocketmq: option endingOffsets must be latest or JSON in a batch query, not earliest")
        self.max_per_trigger = None
        if "maxoffsetspertrigger" in o:
            if not streaming:
                raise OptionError("rocketmq: option maxOffsetsPerTrigger is for streaming queries only")
            self.max_per_trigger = _int("maxOffsetsPerTrigger", o["maxoffsetspertrigger"])
        self.fail_on_data_loss = _bool("failOnDataLoss", o.get("failondataloss", "true"))
        self.pull_batch_size = _int("pullBatchSize", o.get("pullbatchsize", 32), 1, 1024)
        t = o.get("pulltimeoutms", o.get("pulltimeout", 10_000))
        self.pull_timeout_ms = _int("pullTimeoutMs", t, 100, 600_000)
        self.group = check_name("group", str(o["group"]).strip(), "group") if "group" in o else None
        self.credentials = _credentials(o)
        self.max_queue_split = _int("maxQueueSplit", o.get("maxqueuesplit", 100_000))
        self.batch_rows = _int("batchRows", o.get("batchrows", 8192))


# --------------------------------------------------------------------------- sink

SINK_OPTIONS = ("nameServer", "topic", "group", "accessKey", "secretKey", "sendTimeoutMs", "retries", "batchSize")


class SinkOptions:
    """The sink: ``df.write.format("rocketmq").option("nameServer", ...).option("topic", ...)``."""

    def __init__(self, options: Mapping[str, Any]):
        o = _check_known(options, SINK_OPTIONS, "writing")
        if o.get("path"):
            raise OptionError("rocketmq: the sink writes through brokers: give option nameServer, not a path")
        if "nameserver" not in o:
            raise OptionError("rocketmq: option nameServer is required to write")
        self.name_server = _name_server(o["nameserver"])
        self.topic = check_name("topic", str(o["topic"]).strip()) if "topic" in o else None
        self.group = check_name("group", str(o.get("group", "rmqpy_spark_sink")).strip(), "group")
        self.credentials = _credentials(o)
        self.send_timeout_ms = _int("sendTimeoutMs", o.get("sendtimeoutms", 3000), 100, 600_000)
        self.retries = _int("retries", o.get("retries", 2), 0, 16)
        self.batch_size = _int("batchSize", o.get("batchsize", 1), 1, 1024)
