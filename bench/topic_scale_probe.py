"""What a broker with many topics pays to create one more and to register them all (issue 31 case 5).

    python bench/topic_scale_probe.py [--counts 1000,10000,100000] [--creates 5]

Not a test. For N topics already in the table it times, in process (a ``task.Clock`` broker whose
config writer runs inline and a name server stub that answers SUCCESS): UPDATE_AND_CREATE_TOPIC
through the dispatcher (the request, the topics.json write, the registration of the topic), min and
median of ``--creates``; and one full registration (the bodies a name server gets and their size).
Before issue 31 a create sent the whole table as JSON and wrote every topic's JSON again: 27.9 ms at
1,000 topics, 454 ms at 10,000, 6.4 s at 100,000; the full registration of 100,000 topics was
15.2 MB of JSON, over what a name server's 16 MiB frame takes with longer topic names.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from twisted.internet import defer  # noqa: E402

from rmqpy.protocol.bodies.topic import TopicConfig  # noqa: E402
from rmqpy.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from rmqpy.protocol.command import RemotingCommand  # noqa: E402
from rmqpy.protocol.headers.admin import CreateTopicRequestHeader  # noqa: E402
from tests.unit.broker.helpers import FakeChannel, make_broker  # noqa: E402


class NameServerStub:
    def __init__(self) -> None:
        self.bodies: list[tuple[int, int, str]] = []

    def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> defer.Deferred:
        self.bodies.append((request.code, len(request.body or b""), (request.ext_fields or {}).get("compressed", "")))
        return defer.succeed(request.response(ResponseCode.SUCCESS))

    def close(self) -> None:
        pass


def probe(n: int, creates: int) -> dict[str, Any]:
    broker, clock = make_broker(pathlib.Path(tempfile.mkdtemp(prefix="topic-scale-")))
    stub = NameServerStub()
    broker.namesrv_client = stub
    broker.broker_config.namesrvAddr = "127.0.0.1:9876"
    tcm = broker.topic_config_manager
    for i in range(n):
        tcm.table[f"topic-{i:06d}"] = TopicConfig(f"topic-{i:06d}", 8, 8)
    tcm.data_version.next_version()
    tcm.persist()  # as at start: the file holds every topic
    started = time.perf_counter()
    broker.register_broker_all()
    full_s = time.perf_counter() - started
    full = list(stub.bodies)
    times = []
    for j in range(creates):
        stub.bodies.clear()
        header = CreateTopicRequestHeader(topic=f"new-{j}", readQueueNums=8, writeQueueNums=8, perm=6)
        started = time.perf_counter()
        broker.dispatcher.dispatch(FakeChannel(), RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header))
        clock.advance(0)
        times.append(time.perf_counter() - started)
    create_bodies = list(stub.bodies)
    broker.shutdown()
    return {"topics": n, "create_min_ms": min(times) * 1000, "create_median_ms": statistics.median(times) * 1000,
            "create_bodies": create_bodies, "full_s": full_s, "full_bodies": full}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--counts", default="1000,10000,100000")
    ap.add_argument("--creates", type=int, default=5)
    args = ap.parse_args()
    print("| topics | create min / median (ms) | create's registration (code, bytes) | full registration |")
    print("| --- | --- | --- | --- |")
    for n in (int(c) for c in args.counts.split(",")):
        r = probe(n, args.creates)
        full = ", ".join(f"{size} B{' compressed' if c == 'true' else ''}" for _, size, c in r["full_bodies"])
        print(f"| {r['topics']:,} | {r['create_min_ms']:.1f} / {r['create_median_ms']:.1f} | "
              f"{[(code, size) for code, size, _ in r['create_bodies']]} | {full} in {r['full_s']:.2f} s |")


if __name__ == "__main__":
    main()
