"""The reactor's share of one config-file change, before and after the writes moved to a thread (issue 19).

    python bench/config_write_probe.py [--counts 1000,5000,20000] [--repeat 7]

Not a test. For N topics and N subscription groups it times, median of ``--repeat``: ``persist()``
(serialize and fsync on the calling thread: what every updateTopic, updateSubGroup and auto-created
topic or group cost the reactor before) and ``snapshot()`` (the copy the reactor takes now; a
thread serializes and fsyncs it, ConfigManager.save).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rmqpy.broker.config import BrokerSettings  # noqa: E402
from rmqpy.broker.subscription import SubscriptionGroupManager  # noqa: E402
from rmqpy.broker.topic import TopicConfigManager  # noqa: E402
from rmqpy.protocol.bodies.broker import SubscriptionGroupConfig  # noqa: E402
from rmqpy.protocol.bodies.topic import TopicConfig  # noqa: E402


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--counts", default="1000,5000,20000")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, median of {args.repeat}")
    for n in (int(c) for c in args.counts.split(",")):
        d = tempfile.mkdtemp(prefix="rmqpy-configprobe-")
        try:
            topics = TopicConfigManager(BrokerSettings().broker, d)
            groups = SubscriptionGroupManager(BrokerSettings().broker, d)
            for i in range(n):
                topics.table[f"Topic{i}"] = TopicConfig(f"Topic{i}")
                groups.table[f"Group{i}"] = SubscriptionGroupConfig(f"Group{i}")
            print(f"{n:>6} topics: persist {median_ms(topics.persist, args.repeat):7.2f} ms, "
                  f"snapshot {median_ms(topics.snapshot, args.repeat):6.2f} ms | "
                  f"{n:>6} groups: persist {median_ms(groups.persist, args.repeat):7.2f} ms, "
                  f"snapshot {median_ms(groups.snapshot, args.repeat):6.2f} ms", flush=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
