"""Where a py-spy recording spends its samples: per thread, then the functions with the most samples.

    python bench/pyspy_summary.py FILE.txt [--top 30] [--thread SUBSTRING] [--match SUBSTRING ...]

Reads ``py-spy record --format raw --threads`` output (collapsed stacks: ``frame;frame;... count``, the
thread first). Prints each thread's share of the samples, then for the chosen thread (or all) the
functions by inclusive samples (in a stack at all) and by self samples (the leaf), as a share of the
thread's samples; ``--match`` adds the inclusive share of every stack with a frame containing that text.
A frame is ``function (file:line)``; the line is dropped so a function counts once per stack.
"""
from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r":\d+\)$")


def frames_of(stack: str) -> list[str]:
    return [_LINE.sub(")", f) for f in stack.split(";")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--thread", help="only the threads whose first frame contains this")
    ap.add_argument("--match", action="append", default=[])
    a = ap.parse_args()
    threads: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    matched: Counter[str] = Counter()
    total = 0
    for line in a.file.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = frames_of(stack)
        threads[frames[0]] += n
        if a.thread and a.thread not in frames[0]:
            continue
        total += n
        for f in set(frames[1:]):
            inclusive[f] += n
        leaf[frames[-1]] += n
        for m in a.match:
            if any(m in f for f in frames):
                matched[m] += n
    every = sum(threads.values()) or 1
    print(f"{every} samples")
    for t, n in threads.most_common():
        print(f"  {n / every:6.1%}  {t}")
    total = total or 1
    print(f"\ninclusive, of {total} samples ({a.thread or 'all threads'})")
    for f, n in inclusive.most_common(a.top):
        print(f"  {n / total:6.1%}  {f}")
    print("\nself")
    for f, n in leaf.most_common(a.top):
        print(f"  {n / total:6.1%}  {f}")
    for m in a.match:
        print(f"\nmatch {m!r}: {matched[m] / total:.1%}")


if __name__ == "__main__":
    main()
