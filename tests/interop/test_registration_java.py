"""Issue 31 case 5 against the Java name servers: an rmqpy broker whose topics' JSON (48,000 topics
of 120-character names: 17.7 MB) is over the 16 MiB frame registers with the 4.9.8 and 5.3.3 name
servers at once, compressed though ``compressedRegister`` is false, and both route its topics; a
topic created afterwards is registered alone (5.3.3's registerIncrementBrokerData) and routed by
both."""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rmqpy.protocol.bodies.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from tests.interop import jvm, servers
from tests.interop.conftest import VERSIONS

pytestmark = pytest.mark.interop

TOPICS = 48_000
PREFIX = "scale-" + "x" * 107  # 120 characters with the number: JSON ~380 bytes a topic


def test_java_name_servers_route_an_rmqpy_broker_over_the_frame_as_json(java_built, tmp_path) -> None:
    t0 = time.monotonic()
    marks: list[tuple[str, float]] = []
    with ThreadPoolExecutor(len(VERSIONS)) as pool:  # the two JVMs start side by side
        name_servers = list(pool.map(lambda v: jvm.start_java_namesrv(v, None, tmp_path / f"ns-{v}"), VERSIONS))
    broker = None
    marks.append(("namesrvs", time.monotonic()))
    try:
        addrs = ";".join(ns.addr for ns in name_servers)
        workdir = tmp_path / "broker"
        config = workdir / "store" / "config"
        config.mkdir(parents=True)
        table = {f"{PREFIX}{i:07d}": TopicConfig(f"{PREFIX}{i:07d}", 4, 4) for i in range(TOPICS)}
        wrapper = TopicConfigSerializeWrapper(table, DataVersion(1_700_000_000_000, 1))
        (config / "topics.json").write_text(json.dumps({  # the stdlib's: 48,000 topics in 0.2 s
            "dataVersion": wrapper.dataVersion.to_json(),
            "topicConfigTable": {name: tc.to_json() for name, tc in table.items()}}))
        marks.append(("file", time.monotonic()))
        broker = servers.start_broker(workdir, addrs, {"brokerName": "broker-scale"})
        marks.append(("broker", time.monotonic()))
        for topic in (f"{PREFIX}{0:07d}", f"{PREFIX}{TOPICS - 1:07d}", "TBW102"):
            # 60 s: under load a first registration that times out is sent again registerNameServerPeriod (30 s) later
            assert jvm.wait_broker_registered(addrs, broker.addr, topic, 60), (topic, broker.log_tail())
        marks.append(("routed", time.monotonic()))
        assert "compressed: [True]" in broker.log_tail(20_000)
        # a topic created now: registered alone, routed by both
        started = time.monotonic()
        code, remark, _, _ = jvm.remoting_request(broker.addr, 17, {
            "topic": "CreatedAtScale", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}, timeout=10)
        answered = time.monotonic() - started
        assert code == 0, remark
        assert jvm.wait_broker_registered(addrs, broker.addr, "CreatedAtScale", 5), broker.log_tail()
        print(f"UPDATE_AND_CREATE_TOPIC at {TOPICS} topics answered in {answered * 1000:.0f} ms")
        print(f"timeline: {[(what, round(at - t0, 1)) for what, at in marks]}")
    finally:
        if broker is not None:
            broker.kill9()
        for ns in name_servers:
            ns.kill9()
