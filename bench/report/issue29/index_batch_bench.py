"""CPU per key of IndexService.build_index_batch: 1000 batches of 32 UNIQ_KEYs (as a 4.9 producer's
batch: one head, a counter), one topic, index files of broker_bench's size; minimum of 7 runs.

    python bench/report/issue29/index_batch_bench.py TREE   # TREE: a checkout (a git archive) of rmqpy

Not a test (issue 29, second session: alternate two trees in the same minutes).
"""
from __future__ import annotations

import sys
import tempfile
import time

sys.path.insert(0, sys.argv[1])

from rmqpy.store.index import IndexService  # noqa: E402

best = 1e9
for _rep in range(7):
    with tempfile.TemporaryDirectory() as d:
        svc = IndexService(d, 100000, 400000, now=lambda: 1_700_000_000_000)
        batches = [[(b * 40000 + i * 1100, "7F00000100002A9F0000%012X" % (b * 32 + i), "") for i in range(32)]
                   for b in range(1000)]
        t = time.process_time()
        for b in batches:
            svc.build_index_batch("BenchTopic", 1_700_000_000_000, 0, b)
        best = min(best, time.process_time() - t)
print(f"{sys.argv[1]}: build_index_batch {best / 32000 * 1e6:.2f} us/key (min of 7)")
