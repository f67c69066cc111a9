"""StoreStatsService equivalent: counters, TPS windows and latency buckets for runtime_info."""

from __future__ import annotations

import bisect
from collections import deque
from typing import Callable


def java_double(v: float) -> str:
    """Java ``Double.toString`` for the value ranges we produce."""
    if v != v:
        return "NaN"
    if v == 0:
        return "0.0"
    a = abs(v)
    if 1e-3 <= a < 1e7:
        s = repr(float(v))
        return s if ("." in s or "e" in s) else s + ".0"
    m, e = f"{v:.16e}".split("e")
    m = m.rstrip("0")
    if m.endswith("."):
        m += "0"
    return f"{m}E{int(e)}"


# put latency buckets (ms) as in Java's putMessageDistributeTime
_BUCKETS = [0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000]
PUT_BUCKETS_MS = tuple(_BUCKETS)  # the metrics' put latency histogram: dist[i] counts puts <= bound i
#: commit log flush latency buckets (ms), for the metrics (rmqpy; Java has no such histogram)
FLUSH_BUCKETS_MS = (1, 5, 10, 50, 100, 200, 500, 1000, 2000, 5000)
_BUCKET_NAMES = ["<=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms", "200~500ms", "500ms~1s", "1~2s", "2~3s",
                 "3~4s", "4~5s", "5~10s", "10s~"]


class StoreStats:
    def __init__(self, now: Callable[[], int]) -> None:
        self.now = now
        self.boot_timestamp = now()
        self.put_times_total = 0
        self.put_size_total = 0
        self.put_failed_times = 0
        self.put_entire_time_max = 0
        # puts that held the (single) writer longer than osPageCacheBusyTimeOutMills: Java's
        # "page cache busy"; the broker's fast failure watches the count
        self.slow_put_ms = 1000
        self.slow_puts = 0
        self.get_found = 0
        self.get_miss = 0
        self.get_transferred = 0
        self.get_entire_time_max = 0
        self.dist = [0] * len(_BUCKET_NAMES)
        self.put_ms_sum = 0.0  # of every put's latency: the put histogram's sum
        self.flush_dist = [0] * (len(FLUSH_BUCKETS_MS) + 1)
        self.flush_ms_sum = 0.0
        self.lat_ms: deque = deque(maxlen=100000)
        self.snapshots: deque = deque(maxlen=601)

    def start(self) -> None:
        self.boot_timestamp = self.now()
        self.sample()

    def put_ok(self, size: int, seconds: float, count: int = 1) -> None:
        self.put_times_total += count
        self.put_size_total += size
        ms = int(seconds * 1000)
        if ms > self.put_entire_time_max:
            self.put_entire_time_max = ms
        if ms > self.slow_put_ms:
            self.slow_puts += 1
        self.dist[bisect.bisect_left(_BUCKETS, ms) if ms > 0 else 0] += 1
        self.lat_ms.append(seconds * 1000)
        self.put_ms_sum += seconds * 1000

    def flush_done(self, seconds: float) -> None:
        """A commit log flush (fsync of the dirty files) took ``seconds``."""
        ms = seconds * 1000
        self.flush_dist[bisect.bisect_left(FLUSH_BUCKETS_MS, ms)] += 1
        self.flush_ms_sum += ms

    def put_failed(self) -> None:
        self.put_failed_times += 1

    def get_done(self, found: bool, count: int, seconds: float) -> None:
        if found:
            self.get_found += 1
        else:
            self.get_miss += 1
        self.get_transferred += count
        ms = int(seconds * 1000)
        if ms > self.get_entire_time_max:
            self.get_entire_time_max = ms

    def sample(self) -> None:
        self.snapshots.append((self.now(), self.put_times_total, self.get_found, self.get_miss,
                               self.get_found + self.get_miss, self.get_transferred))

    def _tps(self, idx: int) -> str:
        out = []
        for window in (10, 60, 600):
            if len(self.snapshots) > window:
                a = self.snapshots[-(window + 1)]
                b = self.snapshots[-1]
                dt = b[0] - a[0]
                out.append(java_double((b[idx] - a[idx]) * 1000.0 / dt) if dt > 0 else "0.0")
            else:
                out.append("0.0")
        return " ".join(out)

    def _px(self, p: float) -> float:
        if not self.lat_ms:
            return 0.0
        s = sorted(self.lat_ms)
        return s[min(len(s) - 1, int(len(s) * p))]

    def runtime_info(self) -> dict[str, str]:
        total = self.put_times_total or 1
        ms = self.now() - self.boot_timestamp
        day, hour, minute = 86400000, 3600000, 60000
        runtime = (f"[ {ms // day} days, {(ms % day) // hour} hours, {(ms % hour) // minute} minutes, "
                   f"{(ms % minute) // 1000} seconds ]")
        return {
            "bootTimestamp": str(self.boot_timestamp),
            "runtime": runtime,
            "putMessageEntireTimeMax": str(self.put_entire_time_max),
            "putMessageTimesTotal": str(total),
            "putMessageFailedTimes": str(self.put_failed_times),
            "putMessageSizeTotal": str(self.put_size_total),
            "putMessageDistributeTime": " ".join(f"[{n}]:{c}" for n, c in zip(_BUCKET_NAMES, self.dist)),
            "putMessageAverageSize": java_double(self.put_size_total / total),
            "dispatchMaxBuffer": "0",
            "getMessageEntireTimeMax": str(self.get_entire_time_max),
            "putTps": self._tps(1),
            "getFoundTps": self._tps(2),
            "getMissTps": self._tps(3),
            "getTotalTps": self._tps(4),
            "getTransferedTps": self._tps(5),
            "getTransferredTps": self._tps(5),
            "putLatency99": "%.2f" % self._px(0.99),
            "putLatency999": "%.2f" % self._px(0.999),
        }
