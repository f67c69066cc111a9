"""Free ports for the servers the tests start, chosen where nothing else will take them.

Asking the kernel for port 0 gives a port of the ephemeral range, the same range it picks the source
port of every outgoing connection from: between the check and the server's bind, any connection
(the suite makes thousands) may take it, and a big probe leaves thousands there in TIME_WAIT. So a
port is drawn at random below that range, from a band of its own per pytest-xdist worker (two workers
never draw the same port), and a port handed out is not handed out again by this process until many
others have been (a test asking twice before binding either gets two ports).
"""
from __future__ import annotations

import collections
import os
import random
import socket
from collections.abc import Iterable

#: the lowest port drawn: above the well-known and registered ports services here listen on
LOW = 10000
#: ports handed out lately by this process, not handed out again
_RECENT: collections.deque[int] = collections.deque(maxlen=512)


def ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read: Linux's default)."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def band(env: dict[str, str] | os._Environ[str] = os.environ) -> tuple[int, int]:
    """[low, high) of the ports this process draws from: its xdist worker's share below the ephemeral range."""
    high = max(ephemeral_low(), LOW + 2000)
    workers = int(env.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    name = env.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0
    width = (high - LOW) // max(workers, 1)
    index = min(index, max(workers, 1) - 1)
    return LOW + index * width, LOW + (index + 1) * width


def is_free(port: int) -> bool:
    """Nothing listens on or is bound to ``port``, on the wildcard address or loopback."""
    for host in ("0.0.0.0", "127.0.0.1"):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_port(span: Iterable[int] = (0,)) -> int:
    """A port p such that p + d is free for every d in ``span`` (a broker: (-2, 0, 1) for its fast,
    main and HA ports)."""
    offsets = tuple(span)
    low, high = band()
    for _ in range(1000):
        p = random.randrange(low - min(offsets), high - max(offsets))
        ports = [p + d for d in offsets]
        if any(q in _RECENT for q in ports) or not all(is_free(q) for q in ports):
            continue
        _RECENT.extend(ports)
        return p
    raise RuntimeError(f"no free port in {low}..{high} for offsets {offsets}")


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports."""
    return [free_port() for _ in range(n)]
