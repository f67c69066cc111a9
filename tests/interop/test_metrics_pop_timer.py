"""Issue 17: POP, timer and half-message metrics with RocketMQ 5's names, moving with Java 5.3.3 traffic.

One rmqpy broker with ``metricsExporterType=PROM`` and ``defaultMessageRequestMode=POP`` gets, from
the official 5.3.3 client in its client host:

* transactional sends: two left UNKNOWN (``rocketmq_half_messages`` counts them), one committed
  (prepared and ended: the gauge stays at two, ``rocketmq_commit_messages_total`` moves);
* three timer messages 3 s ahead: ``rocketmq_timer_enqueue_total``, ``rocketmq_timing_messages`` and
  the 5 s bound of ``rocketmq_timer_message_snapshot`` count them while they wait,
  ``rocketmq_delay_message_latency_seconds`` observed them; once delivered,
  ``rocketmq_timer_dequeue_total`` counts them and nothing is timing any more;
* a POP push consumer that takes and acks four messages: checkpoints and acks written to the revive
  topic (``rocketmq_pop_revive_in_message_total`` by CK/ACK and put status) and read back by the
  revive service (``rocketmq_pop_revive_out_message_total``); a second group's consumer dies inside
  its listener, so its popped messages are revived to the retry topic
  (``rocketmq_pop_revive_retry_messages_total``) after their invisible time.

The names and label names are Java's (PopMetricsConstant, DefaultStoreMetricsConstant,
BrokerMetricsConstant of rocketmq-all-5.3.3); the values are checked against the traffic sent.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop import clients, jvm, servers
from tests.interop.test_metrics_logs import Samples, scrape, value
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

VERSION = "5.3.3"
FAST = ["--poll-namesrv-ms", "1000", "--heartbeat-ms", "1000", "--rebalance-interval-ms", "1000"]
BASE = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-m"}
STORE = {"storage_type": "local", "storage_medium": "disk"}


def test_pop_timer_and_half_message_metrics_move(java_built, client_host, tmp_path: Path) -> None:
    ip = client_host.host_ip
    port = jvm.free_port()
    props = {"brokerName": "broker-m", "metricsExporterType": "PROM", "metricsPromExporterPort": port,
             "defaultMessageRequestMode": "POP"}
    with servers.Cluster(tmp_path, ip, props) as cluster:
        def harness(*args: str, **kw):
            return clients.harness(client_host, VERSION, [args[0], "-n", cluster.ns_addr, *FAST, *args[1:]], **kw)

        def now() -> Samples:
            return scrape(ip, port)

        # half messages
        harness("transaction", "--topic", "TTx", "--count", "2", "--local", "unknown")
        harness("transaction", "--topic", "TTx", "--count", "1", "--local", "commit")
        samples = now()
        assert value(samples, "rocketmq_half_messages", topic="TTx", **BASE) == 2
        assert value(samples, "rocketmq_commit_messages_total", topic="TTx") == 1

        # timer messages
        sent = harness("timer", "--topic", "TTimer", "--count", "3", "--delay-ms", "3000")
        assert len(sent.of("sent")) == 3, sent
        samples = now()
        timer = dict(topic="TTimer", **BASE, **STORE)
        assert value(samples, "rocketmq_timer_enqueue_total", **timer) == 3
        assert value(samples, "rocketmq_timing_messages", **timer) == 3
        assert value(samples, "rocketmq_timer_message_snapshot", timer_bound_s="5", **STORE) == 3
        assert value(samples, "rocketmq_delay_message_latency_seconds_count", **timer) == 3
        assert value(samples, "rocketmq_delay_message_latency_seconds_bucket", le="60.0", **timer) == 3
        assert value(samples, "rocketmq_timer_dequeue_total", **timer) == 0
        assert wait_until(lambda: value(now(), "rocketmq_timer_dequeue_total", **timer) == 3, 30, 0.5)
        samples = now()
        assert value(samples, "rocketmq_timing_messages", **timer) == 0
        assert value(samples, "rocketmq_timer_message_snapshot", **STORE) == 0
        for gauge in ("rocketmq_timer_enqueue_lag", "rocketmq_timer_dequeue_lag"):
            assert [v for n, _, v in samples if n == gauge] == [0.0], gauge

        # POP: popped, acked, read back by the revive service
        harness("produce", "--topic", "TPop", "-c", "4")
        got = harness("consume-push", "--pop", "--topic", "TPop", "--group", "g_pop", "--count", "4",
                      "--timeout-ms", "40000", "--from", "first", timeout=100)
        assert len({r["msgId"] for r in got.of("received")}) == 4, got
        pop = dict(consumer_group="g_pop", topic="TPop", **BASE)
        samples = now()
        # one checkpoint per queue a pop took messages from (the four are spread over four queues);
        # the 5.3.3 push consumer acks each message with its own ACK_MESSAGE
        cks = value(samples, "rocketmq_pop_revive_in_message_total", revive_message_type="CK", put_status="PUT_OK",
                    **pop)
        assert 1 <= cks <= 4, cks
        acks = value(samples, "rocketmq_pop_revive_in_message_total", revive_message_type="ACK",
                     put_status="PUT_OK", **pop)
        assert acks == 4

        def read_back() -> bool:
            s = now()
            return (value(s, "rocketmq_pop_revive_out_message_total", revive_message_type="CK", **pop)
                    == value(s, "rocketmq_pop_revive_in_message_total", revive_message_type="CK", **pop)
                    and value(s, "rocketmq_pop_revive_out_message_total", revive_message_type="ACK", **pop) == acks)
        assert wait_until(read_back, 20, 0.5), [x for x in now() if x[0].startswith("rocketmq_pop")]
        queues = {lab["queue_id"] for n, lab, _ in now() if n == "rocketmq_pop_revive_lag_milliseconds"}
        assert queues == {str(q) for q in range(8)}, queues

        # POP: a consumer dies before acking; what it popped is revived after 5 s (the client's minimum)
        harness("produce", "--topic", "TPopDie", "-c", "2")
        died = harness("consume-push", "--pop", "--topic", "TPopDie", "--group", "g_die", "--count", "2",
                       "--halt-after", "1", "--pop-invisible-ms", "5000", "--timeout-ms", "30000", "--from", "first",
                       check=False, timeout=90)
        assert len(died.of("halting")) == 1, died
        die = dict(consumer_group="g_die", topic="TPopDie", **BASE)
        assert value(now(), "rocketmq_pop_revive_retry_messages_total", **die) == 0
        assert wait_until(lambda: value(now(), "rocketmq_pop_revive_retry_messages_total", put_status="PUT_OK",
                                        **die) == 2, 30, 0.5)
