"""Three PySyncObjLog nodes in one process, on real sockets and PySyncObj's own threads: the
reactor side (role changes and commits handed back with callFromThread) is driven by a Clock."""
from __future__ import annotations

import queue
import socket
import time

from twisted.internet.task import Clock

from rmqpy.controller.raft import PySyncObjLog
from rmqpy.controller.state import ApplyBrokerIdEvent, ElectMasterEvent
from tests.ports import free_ports


class ThreadedClock(Clock):
    """A Clock that also takes calls from other threads, run when the test pumps it."""

    def __init__(self) -> None:
        super().__init__()
        self.from_threads: queue.Queue = queue.Queue()

    def callFromThread(self, fn, *args, **kwargs):  # noqa: N802 (Twisted's name)
        self.from_threads.put((fn, args, kwargs))

    def pump(self) -> None:
        while True:
            try:
                fn, args, kwargs = self.from_threads.get_nowait()
            except queue.Empty:
                break
            fn(*args, **kwargs)
        self.advance(0.05)


def wait(clock: ThreadedClock, cond, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        clock.pump()
        value = cond()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met within %s s" % timeout)


def make(clock, tmp_path, peers):
    return {p: PySyncObjLog(clock, p, peers, str(tmp_path / p), retry=0.05, raft_timeouts=(0.4, 0.8)) for p in peers}


def test_replicate_fail_over_and_restart(tmp_path):
    clock = ThreadedClock()
    peers = {f"n{i}": f"127.0.0.1:{port}" for i, port in enumerate(free_ports(3))}
    nodes = make(clock, tmp_path, peers)
    roles: list[tuple[str, bool]] = []
    for peer, node in nodes.items():
        node.role_listeners.append(lambda leader, p=peer: roles.append((p, leader)))
        node.start()
    try:
        leader = wait(clock, lambda: next((p for p, n in nodes.items() if n.leader_ready), None))
        assert roles == [(leader, True)]
        assert all(wait(clock, lambda n=n: n.leader_id() == leader) for n in nodes.values())

        done: list[object] = []
        event = ApplyBrokerIdEvent("c", "b", "10.0.0.1:10911", 1, "10.0.0.1:10911;1")
        nodes[leader].append([event, ElectMasterEvent("b", True, 1)]).addBoth(done.append)
        wait(clock, lambda: done)
        assert done == [None]
        # the leader answers once applied here; the others apply it too
        assert nodes[leader].state.sync_state["b"].masterBrokerId == 1
        wait(clock, lambda: all(n.state.dump() == nodes[leader].state.dump() for n in nodes.values()))
        # a snapshot (PySyncObj's log compaction, every 5 min in production): the state's dump is written
        for node in nodes.values():
            node._sync.forceLogCompaction()
        wait(clock, lambda: all((tmp_path / p / "raft.dump").exists() for p in nodes))

        # the leader goes: another one takes over with the same state
        nodes[leader].stop()
        rest = {p: n for p, n in nodes.items() if p != leader}
        second = wait(clock, lambda: next((p for p, n in rest.items() if n.leader_ready), None))
        assert rest[second].state.sync_state["b"].masterEpoch == 1
        done.clear()
        rest[second].append([ElectMasterEvent("b", True, 1)]).addBoth(done.append)
        wait(clock, lambda: done)
        assert done == [None] and rest[second].state.sync_state["b"].masterEpoch == 2
        for node in rest.values():
            node.stop()

        # all three restarted on their journals keep it
        nodes = make(clock, tmp_path, peers)
        for node in nodes.values():
            node.start()
        third = wait(clock, lambda: next((p for p, n in nodes.items() if n.leader_ready), None))
        wait(clock, lambda: "b" in nodes[third].state.sync_state)
        info = nodes[third].state.sync_state["b"]
        assert (info.masterBrokerId, info.masterEpoch, info.syncStateSet) == (1, 2, {1})
        assert nodes[third].state.replica_info["b"].nextAssignBrokerId == 2
    finally:
        for node in nodes.values():
            node.stop()


def test_append_without_a_running_log_fails_as_not_leader(tmp_path):
    from rmqpy.controller.raft import NotLeaderError
    node = PySyncObjLog(ThreadedClock(), "n0", {"n0": "127.0.0.1:1"}, str(tmp_path))
    failures: list = []
    node.append([]).addErrback(failures.append)
    assert failures and failures[0].check(NotLeaderError)


def test_the_leader_state_is_pysyncobjs():
    from rmqpy.controller.raft import RAFT_LEADER, pysyncobj
    assert pysyncobj().syncobj._RAFT_STATE.LEADER == RAFT_LEADER


def test_importing_pysyncobj_leaves_socket_inet_ntop_working():
    """PySyncObj 0.3.17 replaces socket.inet_ntop with a Windows-only function on import."""
    from rmqpy.controller.raft import pysyncobj
    pysyncobj()
    assert socket.inet_ntop(socket.AF_INET, b"\x7f\x00\x00\x01") == "127.0.0.1"
