"""The remoting differential harness's long run: rmqpy's broker and name server against the Java 5.3.3
ones, the CI set (tests/interop/test_remoting_diff.py) and ``--count`` generated cases more.

    python bench/remoting_diff_long.py --count 2000 [--seed 1] [--no-ci-set] [--out diff.txt]

Prints each difference not explained in docs/compatibility.md (tests/interop/test_remoting_diff.py's
KNOWN), then the explained ones, and the counts; exits 1 when any is unexplained. Needs what the
interop suite needs (the Java jars of tests/interop/java/build.sh).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.interop import jvm, remoting_diff  # noqa: E402
from tests.interop.test_remoting_diff import explained  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1000, help="generated cases besides the CI set")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-ci-set", action="store_true", help="the generated cases only")
    ap.add_argument("--out", type=Path, help="write every case's two answers here")
    args = ap.parse_args()
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
    bad = [r for r in results if r.differences and not explained(r)]
    ok = [r for r in results if r.differences and explained(r)]
    if args.out:
        args.out.write_text("".join(f"{r.case.name}\n  rmqpy: {r.ours}\n  java:  {r.theirs}\n" for r in results))
    for r in bad:
        print("UNEXPLAINED", r.case.name, "; ".join(r.differences))
    for r in ok:
        print("explained  ", r.case.name, f"[{explained(r)}]")
    print(f"{len(results)} cases (seed {args.seed}, Java {both.version}) in {took:.1f} s: {len(bad)} unexplained, "
          f"{len(ok)} explained differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
