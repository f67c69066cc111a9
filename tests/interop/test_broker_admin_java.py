"""`twistd rmq-broker` against the official Java clients 4.9.8 and 5.3.3: send-back, retry and
DLQ, delay levels, orderly consumption (LOCK_BATCH_MQ) and the mqadmin commands.

The broker runs with short delay levels (level 2 = 4 s, every other level 1 s) so retries are
quick. The clients run inside the client host's network namespace.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.interop import clients, servers
from tests.interop.conftest import VERSIONS
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

DELAY_LEVELS = " ".join(["1s", "4s"] + ["1s"] * 16)


class Env(servers.Cluster):
    def __init__(self, version: str, host, tmp: Path) -> None:
        self.version, self.host = version, host
        super().__init__(tmp, host.host_ip, {"messageDelayLevel": DELAY_LEVELS, "brokerName": "broker-py"})
        self.tag = version.replace(".", "")

    def admin(self, *args: str) -> str:
        return clients.mqadmin(self.host, self.version, args, self.ns.addr)

    def harness(self, *args: str, timeout: float = 60, check: bool = True):
        extra = ["--poll-namesrv-ms", "1000"] if args[0].startswith("consume") else []
        return clients.harness(self.host, self.version, [args[0], "-n", self.ns.addr, *extra, *args[1:]],
                               timeout=timeout, check=check)


@pytest.fixture(scope="module", params=VERSIONS)
def env(request, java_built, client_host, tmp_path_factory):
    with Env(request.param, client_host, tmp_path_factory.mktemp(f"bra-{request.param}")) as e:
        yield e


def test_reconsume_later_goes_through_retry_to_dlq(env: Env) -> None:
    topic, group = f"RetryT{env.tag}", f"retry_g_{env.tag}"
    sent = env.harness("produce", "--topic", topic, "--count", "1", "--keys", "rk")
    assert len(sent.of("sent")) == 1
    got = env.harness("consume-push", "--topic", topic, "--group", group, "--reconsume-later", "100",
                      "--max-reconsume-times", "2", "--count", "0", "--timeout-ms", "14000",
                      # learn the new %RETRY% route and rebalance onto it within a second, not 30 s
                      "--rebalance-interval-ms", "1000", check=False)
    deliveries = sorted(e["reconsumeTimes"] for e in got.of("received"))
    assert deliveries[:3] == [0, 1, 2], got.of("received")
    retried = [e for e in got.of("received") if e["reconsumeTimes"] > 0]
    assert all(e["topic"] == topic for e in retried)  # the client restores the topic from RETRY_TOPIC
    dlq = env.harness("consume-push", "--topic", f"%DLQ%{group}", "--group", f"dlq_reader_{env.tag}",
                      "--count", "1", "--timeout-ms", "20000")
    (m,) = dlq.of("received")[:1]
    assert m["reconsumeTimes"] == 3 and m["properties"]["RETRY_TOPIC"] == topic
    assert m["properties"]["ORIGIN_MESSAGE_ID"]


def test_delay_level_message_arrives_after_its_delay(env: Env) -> None:
    topic, group = f"DelayT{env.tag}", f"delay_g_{env.tag}"
    sent = env.harness("produce", "--topic", topic, "--count", "2", "--delay-level", "2")
    assert len(sent.of("sent")) == 2
    got = env.harness("consume-push", "--topic", topic, "--group", group, "--count", "2", "--timeout-ms", "25000")
    msgs = got.of("received")
    assert len(msgs) >= 2
    for m in msgs:
        assert m["storeTimestamp"] - m["bornTimestamp"] >= 3900, m
        assert m["properties"]["REAL_TOPIC"] == topic


def test_orderly_consumer_keeps_queue_order(env: Env) -> None:
    topic, group = f"OrderT{env.tag}", f"order_g_{env.tag}"
    out = env.admin("updateTopic", "-b", env.broker.addr, "-t", topic, "-r", "2", "-w", "2")
    assert "success" in out.lower(), out
    sent = env.harness("produce", "--topic", topic, "--count", "20", "--queue-mod", "2", "--body", "m-{i}")
    assert len(sent.of("sent")) == 20
    got = env.harness("consume-push", "--topic", topic, "--group", group, "--orderly", "true",
                      "--count", "20", "--timeout-ms", "30000")
    per_queue: dict[int, list[int]] = {}
    for e in got.of("received"):
        per_queue.setdefault(e["queueId"], []).append(e["queueOffset"])
    assert sum(len(v) for v in per_queue.values()) >= 20
    for offsets in per_queue.values():
        assert offsets == sorted(offsets), per_queue


def test_mqadmin_commands(env: Env) -> None:
    topic, group = f"AdminT{env.tag}", f"admin_g_{env.tag}"
    out = env.admin("updateTopic", "-b", env.broker.addr, "-t", topic, "-r", "3", "-w", "3")
    assert "success" in out.lower(), out
    assert wait_until(lambda: topic in env.admin("topicList"), 20.0, 0.5), "topic not listed"
    sent = env.harness("produce", "--topic", topic, "--count", "3", "--keys", "key{i}", "--queue-mod", "3")
    status = env.admin("topicStatus", "-t", topic)
    assert status.count("broker-py") == 3, status
    out = env.admin("updateSubGroup", "-b", env.broker.addr, "-g", group, "-r", "5")
    assert "success" in out.lower(), out
    env.harness("consume-push", "--topic", topic, "--group", group, "--count", "3", "--timeout-ms", "20000")
    progress = wait_until(lambda: (lambda o: o if re.search(r"Diff Total:\s*0", o) else None)(
        env.admin("consumerProgress", "-g", group)), 12, 0.5)
    assert progress, env.admin("consumerProgress", "-g", group)
    status = env.admin("brokerStatus", "-b", env.broker.addr)
    assert "brokerVersionDesc" in status and "putTps" in status, status
    by_key = env.admin("queryMsgByKey", "-t", topic, "-k", "key1")
    assert "key1" in by_key or re.search(r"[0-9A-F]{32}", by_key), by_key
    offset_id = sent.of("sent")[0].get("offsetMsgId")
    if offset_id:
        topic_opt = ["-t", topic] if env.version.startswith("5.") else []  # 5.x mqadmin requires -t
        by_id = env.admin("queryMsgById", "-i", offset_id, *topic_opt)
        assert topic in by_id and "hello-0" in by_id or "Body" in by_id, by_id
    # the consumer has exited: mqadmin reports CONSUMER_NOT_ONLINE on stderr (exit 0)
    env.admin("consumerConnection", "-g", group)
