"""Issue 13 item 5: the store's stdlib log records reach Twisted's log observers (what twistd
writes to its log file), with their levels, and recovery, truncation, rolls and flush errors
are logged once each; issue 11: a client's bad batch is a rate-limited, bounded line."""
import logging
import re

import pytest
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.python.failure import Failure

from rmqpy.common import logbridge
from rmqpy.protocol.message import MessageExtBatch
from rmqpy.store.message_store import PutMessageStatus

from .conftest import msg


@pytest.fixture
def twisted_events():
    """Events as a twistd log file observer sees them, with the bridge the taps install."""
    events = []
    observer = events.append
    handler = logbridge.install()
    old_level = logging.getLogger("rmqpy").level
    globalLogPublisher.addObserver(observer)
    yield events
    globalLogPublisher.removeObserver(observer)
    logbridge.uninstall(handler)
    logging.getLogger("rmqpy").setLevel(old_level)


def _lines(events, namespace_prefix="rmqpy.store"):
    return [(e["log_level"], formatEvent(e)) for e in events
            if e.get("log_namespace", "").startswith(namespace_prefix)]


def test_abnormal_recovery_reaches_the_twisted_log(harness, twisted_events):
    harness.open()
    for i in range(50):
        harness.put(msg(qid=i % 2))
    harness.crash()
    twisted_events.clear()
    harness.open()
    lines = _lines(twisted_events)
    texts = [t for _, t in lines]
    assert (LogLevel.info, "message store load: last exit ABNORMAL") in lines
    abnormal = [t for t in texts if t.startswith("recover abnormally")]
    assert len(abnormal) == 1, texts
    assert "re-dispatched 50 records" in abnormal[0]
    assert not any(t.startswith("recover normally") for t in texts)


def test_normal_recovery_logged_once_and_file_rolls(harness, twisted_events):
    harness.open()
    for _i in range(1000):  # 64 KiB commit log files: several rolls
        harness.put(msg(qid=0))
    rolls = [t for _, t in _lines(twisted_events) if "rolled to a new file" in t]
    assert len(rolls) >= 2
    assert len(set(rolls)) == len(rolls)  # each roll once
    harness.close()
    twisted_events.clear()
    harness.open()
    texts = [t for _, t in _lines(twisted_events)]
    normal = [t for t in texts if t.startswith("recover normally")]
    assert len(normal) == 1, texts
    files = len(harness.store.commit_log.queue.files)
    assert re.fullmatch(rf"recover normally: commit log of {files} files, checked 3 from file {files - 3} "
                        rf"\(\d+ records\), valid data ends at offset {harness.store.commit_log.get_max_offset()}; "
                        r"1 consume queues", normal[0]), normal[0]
    assert not any("truncated" in t for t in texts)  # a clean end is not a truncation


def test_torn_tail_truncation_is_logged(harness, twisted_events):
    s = harness.open()
    for _i in range(20):
        harness.put(msg(qid=0))
    end = s.commit_log.get_max_offset()
    mf = s.commit_log.queue.last()
    mf.mm[end - mf.file_from_offset:end - mf.file_from_offset + 16] = b"\x00\x00\x01\x00garbage!garbage!"[:16]
    harness.crash()
    twisted_events.clear()
    harness.open()
    texts = [t for _, t in _lines(twisted_events)]
    trunc = [t for t in texts if "truncated after offset" in t]
    assert len(trunc) == 1, texts
    assert f"truncated after offset {end}" in trunc[0]


def test_flush_failure_logged_once_then_recovery(harness, twisted_events):
    s = harness.open()
    for _ in range(3):
        s.flush_service.flushing = True
        s.flush_service.flush_failed(Failure(OSError(5, "Input/output error")))
    s.flush_service.flush_done(s.commit_log.get_max_offset(), 0)
    lines = _lines(twisted_events)
    errors = [t for lvl, t in lines if lvl == LogLevel.error and "flush failed" in t]
    assert errors[0] == "commit log flush failed (1 in a row): [Errno 5] Input/output error"
    assert (LogLevel.info, "commit log flush succeeded again after 3 failed attempts") in lines


def test_exception_records_carry_the_traceback(twisted_events):
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("rmqpy.store.message_store").exception("store timer x failed")
    (event,) = [e for e in twisted_events if e.get("log_namespace") == "rmqpy.store.message_store"]
    assert event["log_level"] == LogLevel.error
    assert event["log_failure"].check(ValueError)
    assert formatEvent(event) == "store timer x failed"


def test_bad_batch_bodies_are_one_bounded_rate_limited_line(harness, twisted_events):
    s = harness.open()
    topic = "T"
    results = []
    for _ in range(500):
        b = MessageExtBatch(topic=topic, queue_id=0, body=b"\x00\x00\x00\x10" + b"Z" * 70_000,
                            born_host=("10.1.2.3", 5555), store_host=("127.0.0.1", 10911))
        s.put_messages(b).addCallback(results.append)
    assert {r.put_message_status for r in results} == {PutMessageStatus.MESSAGE_ILLEGAL}
    bad = [t for _, t in _lines(twisted_events) if "bad batch body" in t]
    assert 1 <= len(bad) <= 25  # the burst, not one per request
    assert max(map(len, bad)) < 600


def test_index_file_roll_is_logged_once(harness, twisted_events):
    harness.open()  # small config: 256 index entries per file
    for i in range(300):
        harness.put(msg(qid=0, keys=f"k{i}"))
    rolls = [t for lvl, t in _lines(twisted_events) if "index file full, rolled" in t and lvl == LogLevel.info]
    assert len(rolls) == len(harness.store.index_service.files) - 1 >= 1
