"""PySyncObj's dynamic membership change, measured outside rmqpy's controller (issue 32's library
comparison): three nodes with ``dynamicMembershipChange=True`` replicate a counter; a fourth node,
started with the three as its partners, is added through the leader (``addNodeToCluster``) and must
catch up; then one of the first three is removed (``removeNodeFromCluster``) and stopped, and the
remaining three must still commit. Prints how long each step took. Not part of CI:

    PYTHONPATH=. python3 bench/pysyncobj_membership_probe.py
"""
from __future__ import annotations

import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmqpy.controller.raft import pysyncobj  # noqa: E402 (imports the library without its socket patch)

lib = pysyncobj()


class Counter(lib.SyncObj):  # type: ignore[misc]
    def __init__(self, me: str, others: list[str], store: Path) -> None:
        conf = lib.SyncObjConf(dynamicMembershipChange=True, useFork=False, connectionRetryTime=1.0,
                               journalFile=str(store / f"{me}.journal"), fullDumpFile=str(store / f"{me}.dump"))
        super().__init__(me, others, conf)
        self.value = 0

    @lib.replicated
    def incr(self) -> int:
        self.value += 1
        return self.value


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def until(cond, timeout: float = 30.0) -> float:
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            raise SystemExit("timed out")
        time.sleep(0.01)
    return time.monotonic() - start


def call(fn, *args) -> object:
    done = threading.Event()
    out: list[object] = []

    def cb(result: object, error: int) -> None:
        out.append((result, error))
        done.set()
    fn(*args, callback=cb)
    done.wait(30)
    return out[0] if out else None


def main() -> int:
    store = Path(tempfile.mkdtemp(prefix="psyo-membership-"))
    addrs = [f"127.0.0.1:{p}" for p in free_ports(4)]
    first = addrs[:3]
    nodes = {a: Counter(a, [o for o in first if o != a], store) for a in first}
    try:
        t = until(lambda: any(n._isLeader() for n in nodes.values()))
        print(f"three nodes: a leader after {t:.2f} s")
        leader = next(n for n in nodes.values() if n._isLeader())
        for _ in range(100):
            leader.incr(sync=True)
        print("100 commits:", {a[-5:]: n.value for a, n in nodes.items()})
        new = addrs[3]
        nodes[new] = Counter(new, first, store)
        start = time.monotonic()
        result = call(leader.addNodeToCluster, new)
        until(lambda: nodes[new].value == 100)
        print(f"4th node added ({result}) and caught up to 100 in {time.monotonic() - start:.2f} s")
        leader.incr(sync=True)
        until(lambda: all(n.value == 101 for n in nodes.values()))
        print("one more commit reaches all four")
        gone = next(a for a in first if not nodes[a]._isLeader())
        start = time.monotonic()
        result = call(leader.removeNodeFromCluster, gone)
        nodes.pop(gone).destroy_synchronous()
        leader.incr(sync=True)
        until(lambda: all(n.value == 102 for n in nodes.values()))
        print(f"a follower removed ({result}) and stopped; the other three commit again in "
              f"{time.monotonic() - start:.2f} s")
        return 0
    finally:
        for node in nodes.values():
            node.destroy_synchronous()
        for f in store.iterdir():
            f.unlink()
        store.rmdir()


if __name__ == "__main__":
    raise SystemExit(main())
