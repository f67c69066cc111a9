"""The remoting differential harness's long run: rmqpy's broker and name server against the Java 5.3.3
ones, the CI set (tests/interop/test_remoting_diff.py) and ``--count`` generated cases more.

    python bench/remoting_diff_long.py --count 2000 [--seed 1] [--no-ci-set] [--out diff.txt]

Prints each difference not explained in docs/compatibility.md (tests/interop/test_remoting_diff.py's
KNOWN), then the explained ones, and the counts; exits 1 when any is unexplained. Needs what the
interop suite needs (the Java jars of tests/interop/java/build.sh).
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.interop import diff_common, jvm, remoting_diff  # noqa: E402
from tests.interop.test_remoting_diff import explained  # noqa: E402


def main() -> int:
    args = diff_common.long_run_arguments(__doc__).parse_args()
    jvm.ensure_built()
    with tempfile.TemporaryDirectory(prefix="remoting-diff-") as tmp:
        started = time.monotonic()
        both = remoting_diff.Both(Path(tmp))
        try:
            print(f"servers up and set up in {time.monotonic() - started:.1f} s (Java {both.version})", flush=True)
            selected = [] if args.no_ci_set else remoting_diff.cases()
            selected += remoting_diff.random_cases(args.count, args.seed)
            t0 = time.monotonic()
            results = remoting_diff.run(both.ours, both.theirs, selected)
            took = time.monotonic() - t0
        finally:
            both.close()
    bad, ok = diff_common.report(results, explained, args.out, "java")
    print(f"{len(results)} cases (seed {args.seed}, Java {both.version}) in {took:.1f} s: {len(bad)} unexplained, "
          f"{len(ok)} explained differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
