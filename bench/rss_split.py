"""What a process' resident memory is made of (issue 29's RSS goal).

    python bench/rss_split.py PID [PID ...]

Not a test. Prints, per process, the kernel's split of VmRSS (/proc/PID/status: RssAnon, RssFile,
RssShmem and the peak VmHWM) and the resident KiB of every mapping in /proc/PID/smaps grouped by
what it is: the store's files (commit log, consume queues, index, the rest), the process heap and
anonymous memory (Python's objects and malloc arenas, thread stacks; a JVM's heap), and the
shared libraries by package (grpcio, cryptography, protobuf, libpython, libjvm, ...).

RSS counts a file's page when the process has it mapped and touched: the store's mappings are
page cache that the process holds in its page tables, RssFile, beside the private RssAnon.
``broker_bench.py`` records :func:`status` and :func:`by_kind` of its brokers with it.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

#: /proc/PID/status fields kept, in the order printed
STATUS_FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM")

#: (kind, pattern on the mapped path), the first that matches wins
KINDS: list[tuple[str, re.Pattern[str]]] = [
    ("store: commit log", re.compile(r"/commitlog/\d{20}$|/\.commitlog\.next\.")),
    ("store: consume queues", re.compile(r"/consumequeue/")),
    ("store: index", re.compile(r"/index/\d+$")),
    ("store: other", re.compile(r"/store/")),
    ("lib: grpcio", re.compile(r"/grpc/")),
    ("lib: cryptography", re.compile(r"/cryptography/")),
    ("lib: protobuf", re.compile(r"/google/(_upb|protobuf)/")),
    ("lib: libpython", re.compile(r"/libpython[\d.]+\.so")),
    ("lib: openssl", re.compile(r"/lib(crypto|ssl)\.so")),
    ("lib: libjvm", re.compile(r"/libjvm\.so")),
    ("JDK modules / CDS", re.compile(r"/lib/modules$|\.jsa$")),
    ("jars", re.compile(r"\.jar$")),
    ("lib: other .so", re.compile(r"\.so(\.[\d.]+)?$")),
]


def status(pid: int) -> dict[str, float]:
    """The RSS fields of /proc/PID/status in MiB (empty when the process is gone)."""
    out: dict[str, float] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in STATUS_FIELDS:
            out[key] = int(rest.split()[0]) / 1024
    return out


def kind_of(path: str) -> str:
    if not path:
        return "anonymous"
    if path == "[heap]":
        return "heap (brk)"
    if path.startswith("["):
        return "other [special]"
    for kind, pat in KINDS:
        if pat.search(path):
            return kind
    return "other files"


def by_kind(pid: int) -> dict[str, float]:
    """Resident MiB per kind of mapping (:data:`KINDS`) from /proc/PID/smaps, largest first."""
    sums: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return {}
    kind = "anonymous"
    for line in text.splitlines():
        first = line.split(None, 5)
        if not first:
            continue
        if "-" in first[0] and not first[0].endswith(":"):
            kind = kind_of(first[5].strip() if len(first) > 5 else "")
        elif first[0] == "Rss:":
            sums[kind] = sums.get(kind, 0) + int(first[1])
    return {k: v / 1024 for k, v in sorted(sums.items(), key=lambda kv: -kv[1])}


def describe(pid: int) -> str:
    st = status(pid)
    head = ", ".join(f"{k} {st[k]:,.1f}" for k in STATUS_FIELDS if k in st)
    rows = [f"pid {pid} ({_comm(pid)}): {head} MiB"]
    rows += [f"  {mib:9,.1f} MiB  {kind}" for kind, mib in by_kind(pid).items() if mib >= 0.05]
    return "\n".join(rows)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "gone"


def main(argv: list[str]) -> None:
    for arg in argv:
        print(describe(int(arg)))


if __name__ == "__main__":
    main(sys.argv[1:] or [str(os.getpid())])
