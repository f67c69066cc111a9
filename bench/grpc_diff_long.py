"""The differential harness's long run: rmqpy's gRPC endpoint against Apache's proxy + Java broker
(5.4.0, the CI set's, or ``--version 5.3.3``), the CI set (tests/interop/test_grpc_diff.py) and ``--count``
generated cases more.

    python bench/grpc_diff_long.py --count 2000 [--seed 1] [--workers 8] [--version 5.3.3] [--out diff.txt]

Prints each difference not explained in docs/compatibility.md (tests/interop/test_grpc_diff.py's
KNOWN), then the explained ones, and the counts; exits 1 when any is unexplained. Needs what the
interop suite needs (the Java jars of tests/interop/java/build.sh).
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.interop import diff_common, grpc_diff, grpc_diff_env  # noqa: E402
from tests.interop.test_grpc_diff import explained  # noqa: E402


def main() -> int:
    ap = diff_common.long_run_arguments(__doc__)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--version", default="5.4.0", choices=grpc_diff_env.REFERENCE_VERSIONS,
                    help="the reference proxy + broker (default %(default)s)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="grpc-diff-") as tmp:
        started = time.monotonic()
        both = grpc_diff_env.Both(Path(tmp), version=args.version)
        try:
            print(f"targets up in {time.monotonic() - started:.1f} s (reference: proxy {args.version})", flush=True)
            selected = [] if args.no_ci_set else grpc_diff.cases()
            need = grpc_diff.handles_needed(selected)
            for t in both.targets:
                if need:
                    t.stock_handles(need)
            selected += grpc_diff.random_cases(args.count, args.seed)
            t0 = time.monotonic()
            results = grpc_diff.run(both.ours, both.theirs, selected, args.workers)
            took = time.monotonic() - t0
        finally:
            both.close()
    bad, ok = diff_common.report(results, lambda r: explained(r, args.version), args.out, "proxy")
    print(f"{len(results)} cases (seed {args.seed}, proxy {args.version}) in {took:.1f} s: {len(bad)} unexplained, {len(ok)} explained "
          f"differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
