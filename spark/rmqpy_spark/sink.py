"""The sink: rows to messages, sent with :class:`rmqpy.client.Producer` (no pyspark import here).

Columns: ``body`` (binary or string, required), ``topic`` (string; else option ``topic``), and
optional ``tags`` (string), ``keys`` (string, keys separated by spaces, or array of strings),
``properties`` (map of strings), ``queueId`` (int) with optional ``brokerName`` (string). The
other columns of the ``rocketmq`` source's rows are accepted and ignored (a topic read by the
source can be written back); any other column is refused, so that a misspelt ``tag`` is not
silently dropped.

Delivery is at-least-once: a task that fails after sending some rows is run again and sends them
again. Each message therefore carries a row id, the user property ``SPARK_ROW_ID``, that is a
function of where the row comes from, not of the send: the write (a batch write's id, or a
streaming query's id and micro-batch id), the Spark partition and the row's index in it. A row
without keys also gets its row id as its key (so ``mqadmin queryMsgByKey`` finds it). A re-sent
row has the row id of its first send, and a consumer drops duplicates by it. (The UNIQ_KEY, the
message id, cannot be it: rmqpy.client, as the Java client in practice, makes a fresh one per send.)
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Iterator

import pyarrow as pa

from .options import OptionError, SinkOptions, check_name

ROW_ID = "SPARK_ROW_ID"
#: properties a producer or broker sets (a row read from a topic has them): not forwarded
_SYSTEM_PROPERTIES = frozenset({"TAGS", "KEYS", "UNIQ_KEY", "WAIT", "MIN_OFFSET", "MAX_OFFSET", "CLUSTER", ROW_ID})

#: sink columns and the Arrow types each may have
_COLUMNS = ("body", "topic", "tags", "keys", "properties", "queueId", "brokerName")
#: the rocketmq source's other columns: accepted and not sent
_IGNORED = ("queueOffset", "commitLogOffset", "size", "bodyCRC", "flag", "sysFlag", "bornTimestamp", "bornHost",
            "storeTimestamp", "storeHost", "reconsumeTimes", "preparedTransactionOffset", "msgId", "uniqKey")


def check_schema(fields: Iterable[tuple[str, str]], opts: SinkOptions) -> None:
    """Refuse a DataFrame the sink cannot write; ``fields`` are (name, Spark simple type string)."""
    types = {}
    for name, typ in fields:
        if name in types:
            raise OptionError(f"rocketmq sink: column {name!r} appears twice")
        types[name] = typ
    unknown = [n for n in types if n not in _COLUMNS and n not in _IGNORED]
    if unknown:
        raise OptionError(f"rocketmq sink: unknown column(s) {unknown}; the sink writes {', '.join(_COLUMNS)}")
    if "body" not in types:
        raise OptionError("rocketmq sink: the DataFrame needs a body column (binary or string)")
    want = {"body": ("binary", "string"), "topic": ("string",), "tags": ("string",), "keys": ("string", "array<string>"),
            "properties": ("map<string,string>",), "queueId": ("int", "bigint", "smallint", "tinyint"),
            "brokerName": ("string",)}
    for n, ok in want.items():
        if n in types and types[n] not in ok:
            raise OptionError(f"rocketmq sink: column {n} must be {' or '.join(ok)}, not {types[n]}")
    if "topic" not in types and opts.topic is None:
        raise OptionError("rocketmq sink: give option topic or a topic column")
    if "brokerName" in types and "queueId" not in types:
        raise OptionError("rocketmq sink: column brokerName goes with a queueId column")


def row_id(write_id: str, partition: int, index: int) -> str:
    """A 32-hex-digit id for row ``index`` of ``partition`` of a write."""
    return hashlib.md5(f"{write_id}/{partition}/{index}".encode()).hexdigest().upper()


def _messages(batch: pa.RecordBatch, opts: SinkOptions, write_id: str, partition: int, first: int):
    """(Message, queue id or None, broker name or None) per row."""
    from rmqpy.client import Message

    cols = {n: batch.column(i).to_pylist() for i, n in enumerate(batch.schema.names) if n in _COLUMNS}
    n = batch.num_rows
    none = [None] * n
    body, topic = cols["body"], cols.get("topic", none)
    tags, keys, props = cols.get("tags", none), cols.get("keys", none), cols.get("properties", none)
    qids, brokers = cols.get("queueId", none), cols.get("brokerName", none)
    for i in range(n):
        b = body[i]
        if b is None:
            raise ValueError(f"rocketmq sink: row {first + i} of partition {partition} has a null body")
        if isinstance(b, str):
            b = b.encode("utf-8")
        t = topic[i] if topic[i] is not None else opts.topic
        if t is None:
            raise ValueError(f"rocketmq sink: row {first + i} of partition {partition} has a null topic and "
                             "option topic is not set")
        check_name("topic", t)
        p = {k: v for k, v in (props[i] or ()) if k not in _SYSTEM_PROPERTIES}
        rid = row_id(write_id, partition, first + i)
        p[ROW_ID] = rid
        k = keys[i]
        if isinstance(k, list):
            k = [x for x in k if x]
        if not k:
            k = rid
        yield Message(t, bytes(b), tags=tags[i] or None, keys=k or None, properties=p), qids[i], brokers[i]


#: a batch send holds at most this many body bytes, well under the broker's 4 MiB (maxMessageSize)
#: for the encoded batch with its properties
BATCH_BODY_BYTES = 1024 * 1024

_SENT = ("SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE")


class Sender:
    """One task's producer: sends the rows of a partition in order, synchronously: one message a send,
    or with option ``batchSize`` N > 1 up to N consecutive rows of one topic and target queue in one
    SEND_BATCH_MESSAGE (stored together, in order, in one queue)."""

    def __init__(self, opts: SinkOptions):
        from rmqpy.client import Producer, PullConsumer

        self.opts = opts
        self.producer = Producer(name_server=opts.name_server, group=opts.group,
                                 send_timeout_ms=opts.send_timeout_ms, retries=opts.retries,
                                 credentials=opts.credentials)
        self._routes: PullConsumer | None = None
        self._queues: dict[str, list] = {}
        self._route_cls = PullConsumer

    def _queue_of(self, topic: str, qid: int, broker: str | None):
        from rmqpy.client import MessageQueue

        if broker is not None:
            return MessageQueue(topic, broker, int(qid))
        if topic not in self._queues:
            if self._routes is None:
                self._routes = self._route_cls(name_server=self.opts.name_server, group=self.opts.group,
                                               credentials=self.opts.credentials)
            self._queues[topic] = sorted(self._routes.fetch_queues(topic))
        owners = [mq for mq in self._queues[topic] if mq.queue_id == int(qid)]
        if not owners:
            raise ValueError(f"rocketmq sink: topic {topic} has no queue {qid}")
        return owners[0]  # the first broker (by name) that has the queue: the same on every run

    def write(self, batches: Iterator[pa.RecordBatch], write_id: str, partition: int) -> int:
        n = 0
        pending: list = []  # consecutive messages of one topic and target queue, not sent yet
        target: tuple = ()
        size = 0
        for batch in batches:
            for msg, qid, broker in _messages(batch, self.opts, write_id, partition, n):
                queue = self._queue_of(msg.topic, qid, broker) if qid is not None else None
                if pending and ((msg.topic, queue) != target or len(pending) >= self.opts.batch_size
                                or size + len(msg.body) > BATCH_BODY_BYTES):
                    self._send(pending, target[1])
                    pending, size = [], 0
                pending.append(msg)
                target, size = (msg.topic, queue), size + len(msg.body)
                n += 1
        if pending:
            self._send(pending, target[1])
        return n

    def _send(self, msgs: list, queue: Any) -> None:
        if len(msgs) == 1:
            r = self.producer.send(msgs[0], queue=queue)
        else:
            r = self.producer.send_batch(msgs, queue=queue)
        if r.status not in _SENT:
            raise RuntimeError(f"rocketmq sink: send to {msgs[0].topic} answered {r.status}")

    def close(self) -> None:
        self.producer.shutdown()
        if self._routes is not None:
            self._routes.shutdown()
