"""The revive topic's records: checkpoints (``PopCheckPoint``, tag ``ck``) and acks (``AckMsg``, tag
``ack``; ``BatchAckMsg``, tag ``bAck``), as JSON bodies with Java's short field names.

Bodies are read back from the store, which anyone with the revive topic's name could write to;
:func:`decode_record_body` returns None for a body that is not one of these.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rmqpy.protocol import fastjson

MAX_CK_NUM = 32  # a pop returns at most 32 messages, so a checkpoint covers at most 32


@dataclass
class PopCheckPoint:
    start_offset: int
    pop_time: int
    invisible_time: int
    bit_map: int
    num: int
    queue_id: int
    topic: str
    cid: str
    revive_offset: int = 0
    diffs: list[int] = field(default_factory=list)
    broker_name: str = ""
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def merge_key(self) -> str:
        """Java's mergeKey: what an ack names to find its checkpoint."""
        return f"{self.topic}{self.cid}{self.queue_id}{self.start_offset}{self.pop_time}{self.broker_name}"

    def index_of_ack(self, ack_offset: int) -> int:
        if ack_offset < self.start_offset:
            return -1
        if not self.diffs:
            return ack_offset - self.start_offset if ack_offset - self.start_offset < self.num else -1
        try:
            return self.diffs.index(ack_offset - self.start_offset)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        return self.start_offset + (self.diffs[index] if self.diffs else index)

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"so": self.start_offset, "pt": self.pop_time, "it": self.invisible_time,
                               "bm": self.bit_map, "n": self.num, "q": self.queue_id, "t": self.topic,
                               "c": self.cid, "ro": self.revive_offset, "d": self.diffs, "bn": self.broker_name,
                               "reviveTime": self.revive_time}
        if self.re_put_times is not None:
            obj["rp"] = self.re_put_times
        return json.dumps(obj, separators=(",", ":")).encode()


@dataclass
class AckMsg:
    ack_offsets: list[int]  # one for ``ack``, the list of ``bAck``
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str
    batch: bool = False

    def merge_key(self) -> str:
        return f"{self.topic}{self.consumer_group}{self.queue_id}{self.start_offset}{self.pop_time}{self.broker_name}"

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"so": self.start_offset, "c": self.consumer_group, "t": self.topic,
                               "q": self.queue_id, "pt": self.pop_time, "bn": self.broker_name}
        if self.batch:
            obj["aol"] = self.ack_offsets
            obj["ao"] = -1
        else:
            obj["ao"] = self.ack_offsets[0]
        return json.dumps(obj, separators=(",", ":")).encode()


def _get(obj: dict, short: str, long: str, kind: type) -> Any:
    value = obj.get(short, obj.get(long))
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(short)
        return value
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(short)
    return value


def decode_record_body(tag: str | None, body: bytes | None) -> PopCheckPoint | AckMsg | None:
    """The checkpoint or ack in a revive record's body; None when it is neither."""
    if not body or len(body) > 65536:
        return None
    try:
        obj = fastjson.loads(body)
        if not isinstance(obj, dict):
            return None
        if tag == "ck":
            diffs = obj.get("d") or []
            if not isinstance(diffs, list) or len(diffs) > MAX_CK_NUM or not all(
                    isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in diffs):
                return None
            num = _get(obj, "n", "num", int)
            if not 0 <= num <= MAX_CK_NUM or (diffs and len(diffs) != num):
                return None
            rp = obj.get("rp")
            return PopCheckPoint(
                start_offset=_get(obj, "so", "startOffset", int), pop_time=_get(obj, "pt", "popTime", int),
                invisible_time=_get(obj, "it", "invisibleTime", int), bit_map=_get(obj, "bm", "bitMap", int),
                num=num, queue_id=_get(obj, "q", "queueId", int), topic=_get(obj, "t", "topic", str),
                cid=_get(obj, "c", "cid", str), revive_offset=0, diffs=list(diffs),
                broker_name=_get(obj, "bn", "brokerName", str), re_put_times=rp if isinstance(rp, str) else None)
        if tag in ("ack", "bAck"):
            batch = tag == "bAck"
            if batch:
                offsets = obj.get("aol", obj.get("ackOffsetList"))
                if not isinstance(offsets, list) or len(offsets) > MAX_CK_NUM * 64 or not all(
                        isinstance(o, int) and not isinstance(o, bool) for o in offsets):
                    return None
            else:
                offsets = [_get(obj, "ao", "ackOffset", int)]
            return AckMsg(ack_offsets=list(offsets), start_offset=_get(obj, "so", "startOffset", int),
                          consumer_group=_get(obj, "c", "consumerGroup", str), topic=_get(obj, "t", "topic", str),
                          queue_id=_get(obj, "q", "queueId", int), pop_time=_get(obj, "pt", "popTime", int),
                          broker_name=_get(obj, "bn", "brokerName", str), batch=batch)
    except (ValueError, TypeError, RecursionError):
        return None
    return None
