"""The process's open-file limit, and how many connections a port may take from it.

Every socket costs a file descriptor, and so does every store file (the commit log's and each
consume queue's mapped files, the index, the checkpoint). With the usual soft limit (1,024 or 4,096)
a flood of idle connections left the broker unable to open its next commit-log file ("create mapped
file failed"), so the broker raises the soft limit to the hard one at start (as Java's scripts ask
of ``ulimit -n`` in their docs), and the ports' connection caps default to what is left after a
reserve for the store (:func:`connection_budget`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

try:
    import resource
except ImportError:  # not on Windows: no limit to raise, no budget to compute
    resource = None  # type: ignore[assignment]

#: where the hard limit is "unlimited" (macOS), the soft one is raised to this much
UNLIMITED_TARGET = 1 << 20
#: the smallest reserve kept for the store's own files (openFileReserve=0)
MIN_RESERVE = 1024


@dataclass(frozen=True)
class OpenFileLimit:
    before: int  # the soft limit the process started with
    soft: int  # the soft limit now
    hard: int  # -1: unlimited
    error: str = ""  # why it could not be raised, if it could not


def raise_open_file_limit() -> OpenFileLimit:
    """Raises the soft RLIMIT_NOFILE to the hard limit; says what it was and what it is."""
    if resource is None:
        return OpenFileLimit(-1, -1, -1, "no resource module")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, UNLIMITED_TARGET)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return OpenFileLimit(soft, soft, _finite(hard))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        return OpenFileLimit(soft, soft, _finite(hard), str(exc))
    return OpenFileLimit(soft, target, _finite(hard))


def _finite(limit: int) -> int:
    return -1 if resource is None or limit == resource.RLIM_INFINITY else limit


def soft_limit() -> int:
    """The soft RLIMIT_NOFILE now; -1 when unlimited or unknown."""
    if resource is None:
        return -1
    return _finite(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def open_files() -> int:
    """File descriptors the process holds now (0 where /proc/self/fd is not there)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def default_reserve(limit: int) -> int:
    """openFileReserve=0: a quarter of the limit, at least :data:`MIN_RESERVE` or half the limit when
    that is less (under a limit of 1,024 a reserve of 1,024 would leave the ports nothing)."""
    return max(min(MIN_RESERVE, limit // 2), limit // 4)


def connection_budget(limit: int, held: int, reserve: int, fds_per_connection: int) -> int:
    """How many connections fit in ``limit`` descriptors when ``held`` are in use and ``reserve`` are
    kept for the store; at least 1. ``limit`` < 0 (unlimited or unknown): no cap (0)."""
    if limit < 0:
        return 0
    return max(1, (limit - held - reserve) // max(1, fds_per_connection))


def port_caps(max_total: int, max_per_address: int, reserve: int, fds_per_connection: int,
              limit: int | None = None, held: int | None = None) -> tuple[int, int, str]:
    """A port's caps (in all, per address) from its keys: 0 = from the open-file limit now (``limit``,
    ``held``: the soft limit and the descriptors open; read from the process when None) less
    ``reserve`` (0 = :func:`default_reserve`), and a quarter of that per address; < 0 = no cap (0).
    The text says how the caps were found, for the start-up line."""
    how = "set"
    if max_total == 0:
        limit = soft_limit() if limit is None else limit
        held = open_files() if held is None else held
        reserve = reserve or default_reserve(limit)
        max_total = connection_budget(limit, held, reserve, fds_per_connection)
        how = (f"open-file limit {limit}, {held} open, {reserve} kept for the store (openFileReserve), "
               f"{fds_per_connection} a connection")
    max_total = max(0, max_total)
    if max_per_address == 0:
        max_per_address = max(1, max_total // 4) if max_total > 0 else 0
    return max_total, max(0, max_per_address), how
