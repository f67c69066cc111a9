"""Issue 11: PUT_KV_CONFIG is bounded (rmqpy's kvConfigMax* keys; Java has no bound), its log
lines are clipped and rate-limited, and kvConfig.json is written off the request path, one
write at a time, the puts during a write sharing the next one."""
from __future__ import annotations

import weakref

import pytest
from twisted.internet import defer, task
from twisted.logger import formatEvent, globalLogPublisher

from rmqpy.namesrv.kvconfig import KVConfigManager, KVLimits
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers import namesrv as h
from rmqpy.remoting import ratelimit
from rmqpy.remoting.ratelimit import RateLimitedLogger
from tests.unit.namesrv.test_namesrv import Harness


@pytest.fixture
def ns(tmp_path) -> Harness:
    return Harness(tmp_path)


def put(ns: Harness, namespace: str, key: str, value: str) -> RemotingCommand:
    return ns.call(RemotingCommand.request(RequestCode.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(
        namespace=namespace, key=key, value=value)))


def test_oversized_puts_are_refused_and_nothing_is_kept(ns: Harness, tmp_path) -> None:
    big = put(ns, "NS", "k", "v" * 70_000)
    assert (big.code, big.remark) == (ResponseCode.SYSTEM_ERROR,
                                       "the KV config value is longer than kvConfigMaxValueLength 16384")
    long_key = put(ns, "NS", "k" * 256, "v")
    assert (long_key.code, long_key.remark) == (ResponseCode.SYSTEM_ERROR,
                                                 "the KV config key is longer than kvConfigMaxKeyLength 255")
    long_ns = put(ns, "N" * 300, "k", "v")
    assert long_ns.remark == "the KV config namespace is longer than kvConfigMaxKeyLength 255"
    assert not (tmp_path / "kvConfig.json").exists()
    ok = put(ns, "NS", "k" * 255, "v" * 16384)  # at the limits
    assert ok.code == ResponseCode.SUCCESS
    get = ns.call(RemotingCommand.request(RequestCode.GET_KV_CONFIG, h.GetKVConfigRequestHeader(
        namespace="NS", key="k" * 255)))
    assert get.ext_fields == {"value": "v" * 16384}


def test_key_count_bound_counts_new_keys_only(tmp_path) -> None:
    ns = Harness(tmp_path)
    ns.ctl.kv.limits = KVLimits(max_keys=3)
    for i in range(3):
        assert put(ns, f"NS{i % 2}", f"k{i}", "v").code == ResponseCode.SUCCESS
    full = put(ns, "NS0", "new", "v")
    assert (full.code, full.remark) == (ResponseCode.SYSTEM_ERROR, "the KV config holds kvConfigMaxKeys 3 keys already")
    assert put(ns, "NS0", "k0", "changed").code == ResponseCode.SUCCESS  # an update adds no key
    ns.call(RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, h.DeleteKVConfigRequestHeader(namespace="NS0", key="k0")))
    assert put(ns, "NS0", "new", "v").code == ResponseCode.SUCCESS
    # the count survives a restart
    kv = KVConfigManager(str(tmp_path / "kvConfig.json"), KVLimits(max_keys=3))
    kv.load()
    with pytest.raises(ValueError, match="kvConfigMaxKeys 3"):
        kv.put("NS9", "other", "v")


def test_writes_are_coalesced_and_puts_answered_after_their_write(tmp_path) -> None:
    path = tmp_path / "kvConfig.json"
    started: list[defer.Deferred] = []
    writes: list[dict] = []

    def in_thread(fn):  # a write "in a thread" that finishes when the test says so
        d = defer.Deferred()
        started.append(d)
        d.addCallback(lambda _: (fn(), writes.append(fastjson.loads(path.read_text())))[0])
        return d

    kv = KVConfigManager(str(path), in_thread=in_thread)
    answered = []
    kv.put("NS", "a", "1").addCallback(lambda _: answered.append("a"))
    for key in "bcdefg":  # arrive while the first write is under way
        kv.put("NS", key, key).addCallback(lambda _, k=key: answered.append(k))
    assert len(started) == 1 and answered == []
    started[0].callback(None)
    assert answered == ["a"] and len(started) == 2  # one more write for the six
    started[1].callback(None)
    assert answered == list("abcdefg")
    assert len(writes) == 2
    assert writes[-1] == {"configTable": {"NS": {"a": "1", "b": "b", "c": "c", "d": "d", "e": "e", "f": "f",
                                                 "g": "g"}}}


def test_kv_log_lines_are_clipped_and_rate_limited(ns: Harness, monkeypatch) -> None:
    monkeypatch.setattr(ratelimit, "_limiters", weakref.WeakKeyDictionary())  # full buckets, whatever ran before
    # the buckets on a clock that stands still: on the global reactor the 200 puts earned one
    # more line for each 1/rate second they took, so a slow (loaded) host logged more than 25
    monkeypatch.setattr(KVConfigManager, "log", RateLimitedLogger(clock=task.Clock()))
    events = []
    globalLogPublisher.addObserver(events.append)
    try:
        for i in range(200):
            assert put(ns, "NS", f"key{i}", "x" * 16000).code == ResponseCode.SUCCESS
    finally:
        globalLogPublisher.removeObserver(events.append)
    lines = [formatEvent(e) for e in events if e.get("log_namespace", "").endswith("KVConfigManager")]
    assert 1 <= len(lines) <= 25
    assert all(len(line) < 300 for line in lines)
    assert lines[0].endswith("…(16000 chars)")
