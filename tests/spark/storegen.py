"""Test-only writer of RocketMQ store files (commitlog + consumequeue), in the exact on-disk format.

Records are encoded with rmqpy's record encoder; commit log files are named by their 20-digit
starting offset, preallocated to ``commitlog_size`` and closed by an 8-byte blank record when the
next record does not fit; consume queue files hold 20-byte units (offset, size, tags hash).
Transaction PREPARED/ROLLBACK records are not dispatched to a consume queue (as in the broker).
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from dataclasses import dataclass, field

from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.message import (
    BLANK_MAGIC_CODE,
    create_offset_msg_id,
    create_uniq_id,
    encode_record_into,
    host_bytes,
    java_string_hash,
    properties_to_string,
    record_size,
)

UNIT = struct.Struct(">qiq")


@dataclass
class Msg:
    topic: str
    queue_id: int
    body: bytes
    tags: str | None = None
    keys: str | None = None
    props: dict = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_ts: int = 0
    store_ts: int = 0
    born_host: tuple = ("10.1.2.3", 40000)
    store_host: tuple = ("127.0.0.1", 10911)
    reconsume_times: int = 0
    prepared_offset: int = 0
    raw_props: str | None = None  # the stored properties string as is (e.g. a name given twice)
    # filled by the writer
    queue_offset: int = -1
    commit_log_offset: int = -1
    size: int = 0
    uniq_key: str | None = None
    msg_id: str = ""
    stored_body: bytes = b""
    properties: dict = field(default_factory=dict)


class StoreWriter:
    def __init__(self, root: str, commitlog_size: int = 1 << 20, cq_units: int = 1000):
        self.root = root
        self.size = commitlog_size
        self.cq_file_size = cq_units * 20
        self.clog_dir = os.path.join(root, "commitlog")
        os.makedirs(self.clog_dir, exist_ok=True)
        self.phy = 0  # next commit log offset
        self.cur = None  # (base, bytearray)
        self.queue_next: dict[tuple[str, int], int] = {}
        self.cq: dict[tuple[str, int], dict[int, bytearray]] = {}
        self.messages: list[Msg] = []
        self.now = int(time.time() * 1000) - 3_600_000

    def _file(self):
        base = self.phy - self.phy % self.size
        if self.cur is None or self.cur[0] != base:
            self._flush_file()
            self.cur = (base, bytearray(self.size))
        return self.cur

    def _flush_file(self):
        if self.cur is not None:
            with open(os.path.join(self.clog_dir, "%020d" % self.cur[0]), "wb") as f:
                f.write(self.cur[1])

    def add(self, m: Msg, dispatch: bool | None = None) -> Msg:
        props = dict(m.props)
        if m.tags is not None:
            props["TAGS"] = m.tags
        if m.keys is not None:
            props["KEYS"] = m.keys
        if "UNIQ_KEY" not in props:
            props["UNIQ_KEY"] = create_uniq_id("10.1.2.3")
        props.setdefault("WAIT", "true")
        m.uniq_key = props["UNIQ_KEY"]
        m.properties = props
        body = m.body
        if m.sys_flag & SF.COMPRESSED_FLAG:
            body = zlib.compress(body)
        m.stored_body = body
        self.now += 1
        m.born_ts = m.born_ts or self.now - 5
        m.store_ts = m.store_ts or self.now
        pb = (m.raw_props if m.raw_props is not None else properties_to_string(props)).encode()
        tb = m.topic.encode()
        bh, sh = host_bytes(m.born_host), host_bytes(m.store_host)
        sf = m.sys_flag | (SF.BORNHOST_V6_FLAG if len(bh) == 20 else 0) | (SF.STOREHOSTADDRESS_V6_FLAG if len(sh) == 20 else 0)
        size = record_size(sf, len(body), len(tb), len(pb))
        base, buf = self._file()
        pos = self.phy - base
        if pos + size + 8 > self.size:
            struct.pack_into(">iI", buf, pos, self.size - pos, BLANK_MAGIC_CODE)
            self.phy = base + self.size
            base, buf = self._file()
            pos = 0
        tran = sf & SF.TRANSACTION_ROLLBACK_TYPE
        if dispatch is None:
            dispatch = tran not in (SF.TRANSACTION_PREPARED_TYPE, SF.TRANSACTION_ROLLBACK_TYPE)
        key = (m.topic, m.queue_id)
        qoff = self.queue_next.get(key, 0) if dispatch else 0
        encode_record_into(buf, pos, topic_bytes=tb, queue_id=m.queue_id, flag=m.flag, body=body, props_bytes=pb,
                           sys_flag=sf, born_timestamp=m.born_ts, born_host=bh, store_timestamp=m.store_ts,
                           store_host=sh, reconsume_times=m.reconsume_times,
                           prepared_transaction_offset=m.prepared_offset, queue_offset=qoff, physical_offset=self.phy)
        m.sys_flag = sf
        m.queue_offset = qoff
        m.commit_log_offset = self.phy
        m.size = size
        m.msg_id = create_offset_msg_id(m.store_host, self.phy)
        if dispatch:
            self.queue_next[key] = qoff + 1
            files = self.cq.setdefault(key, {})
            bpos = qoff * 20
            fbase = bpos - bpos % self.cq_file_size
            f = files.get(fbase)
            if f is None:
                f = files[fbase] = bytearray(self.cq_file_size)
            UNIT.pack_into(f, bpos - fbase, self.phy, size, java_string_hash(m.tags) if m.tags else 0)
        self.phy += size
        self.messages.append(m)
        return m

    def close(self, torn_tail: bytes | None = None) -> None:
        """Write the files; ``torn_tail`` = bytes appended after the last record (a half-written one)."""
        if torn_tail and self.cur is not None:
            pos = self.phy - self.cur[0]
            self.cur[1][pos:pos + len(torn_tail)] = torn_tail
        self._flush_file()
        for (topic, qid), files in self.cq.items():
            d = os.path.join(self.root, "consumequeue", topic, str(qid))
            os.makedirs(d, exist_ok=True)
            for fbase, data in files.items():
                with open(os.path.join(d, "%020d" % fbase), "wb") as f:
                    f.write(data)

    def dispatched(self) -> list[Msg]:
        return [m for m in self.messages
                if (m.sys_flag & SF.TRANSACTION_ROLLBACK_TYPE) not in (SF.TRANSACTION_PREPARED_TYPE,
                                                                       SF.TRANSACTION_ROLLBACK_TYPE)]


def make_store(root: str, n: int = 300, topics=("TopicA", "TopicB", "TopicC"), queues: int = 4,
               commitlog_size: int = 24 * 1024, body_size: int = 100, extras: bool = True,
               cq_units: int = 1000) -> StoreWriter:
    """A store with ``n`` ordinary messages spread over topics and queues (several commit log
    files), plus (``extras``) an IPv6 record, a compressed body, a PREPARED and a COMMIT record."""
    w = StoreWriter(root, commitlog_size, cq_units)
    for i in range(n):
        t = topics[i % len(topics)]
        body = (f"body-{i}-".encode() * (body_size // 8 + 1))[:body_size + (i % 7)]
        w.add(Msg(t, (i // len(topics)) % queues, body, tags=f"Tag{i % 3}", keys=f"key-{i} alt-{i}",
                  props={"custom": f"v{i}"}, flag=i % 5))
    if extras:
        w.add(Msg(topics[0], 0, b"ipv6 born and stored", tags="V6", keys="k-v6",
                  born_host=("::1", 5555), store_host=("fe80::1", 10911)))
        w.add(Msg(topics[1], 1, b"compress me " * 50, tags="Z", keys="k-zip", sys_flag=SF.COMPRESSED_FLAG))
        h = w.add(Msg(topics[2], 0, b"half message", tags="T", keys="k-prepared",
                      sys_flag=SF.TRANSACTION_PREPARED_TYPE, props={"TRAN_MSG": "true"}))
        w.add(Msg(topics[2], 0, b"committed", tags="T", keys="k-commit", sys_flag=SF.TRANSACTION_COMMIT_TYPE,
                  prepared_offset=h.commit_log_offset))
    return w
