"""The replicated log under the controller's state: PySyncObj (Raft) for a controller set, and a
one-node log for tests and a lone controller.

Both hold a :class:`~rmqpy.controller.state.ReplicasState` and take events with :meth:`append`,
whose Deferred fires on the reactor once the events are committed and applied here. PySyncObj runs
its own thread (``autoTick``): its network, its journal and the apply of committed commands happen
there, under :attr:`lock`; the reactor never waits on it. Results come back with
``reactor.callFromThread``, and so do the Raft role's changes (``SyncObjConf.onStateChanged``,
called on PySyncObj's thread).

As Java's ``DLedgerController.RoleChangeHandler`` does, a node that becomes the Raft leader first
commits an empty entry (which applies every entry of earlier terms) before it acts as the
controller leader; :attr:`leader_ready` says it has.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

from twisted.internet import defer
from twisted.logger import Logger

from rmqpy.controller.state import Event, ReplicasState, event_from_wire

#: the state PySyncObj's ``onStateChanged`` names a leader by (its ``_RAFT_STATE.LEADER``)
RAFT_LEADER = 2


class NotLeaderError(Exception):
    """The log could not take the events: this node is not (or no longer) the leader."""


class LocalLog:
    """One node, always the leader, applying at once: the unit tests' log."""

    def __init__(self) -> None:
        self.state = ReplicasState()
        self.lock = threading.RLock()
        self.leader_ready = True
        self.role_listeners: list[Callable[[bool], None]] = []

    def start(self) -> None:
        for listener in self.role_listeners:
            listener(True)

    def stop(self) -> defer.Deferred[None]:
        return defer.succeed(None)

    def leader_id(self) -> str | None:
        return "local"

    def append(self, events: list[Event]) -> defer.Deferred[None]:
        with self.lock:
            for event in events:
                self.state.apply(event)
        return defer.succeed(None)


def pysyncobj() -> Any:
    """The ``pysyncobj`` module, imported without its side effect on ``socket``.

    PySyncObj 0.3.17's ``win_inet_pton`` (imported by its TCP transport) sets ``socket.inet_ntop``
    to a Windows-only function on every platform; on Linux that function raises TypeError on any
    call, in the whole process (measured: rmqpy's message-id code, which formats addresses with
    ``inet_ntop``, failed after a controller had started). The original is put back.
    """
    import socket
    saved = socket.inet_ntop
    try:
        import pysyncobj as module
        import pysyncobj.tcp_connection  # noqa: F401 (the module that patches)
    finally:
        socket.inet_ntop = saved
    return module


def _consumer_class() -> type:
    lib = pysyncobj()
    SyncObjConsumer: Any = lib.SyncObjConsumer  # noqa: N806 (the library's names)
    replicated: Any = lib.replicated

    class ReplicatedState(SyncObjConsumer):
        """What PySyncObj replicates and snapshots: the state as a plain dump (``_data``)."""

        def __init__(self, log: PySyncObjLog) -> None:
            self._owner = log  # set before SyncObjConsumer.__init__: not part of the snapshot
            super().__init__()
            self._data: dict[str, Any] = {}

        @replicated
        def apply_events(self, wires: list[tuple[Any, ...]]) -> int:
            with self._owner.lock:
                for wire in wires:
                    self._owner.state.apply(event_from_wire(wire))
            return len(wires)

        @replicated
        def noop(self) -> int:
            return 0

        def _serialize(self) -> dict[str, Any]:
            with self._owner.lock:
                return {"_data": self._owner.state.dump()}

        def _deserialize(self, data: dict[str, Any]) -> None:
            with self._owner.lock:
                self._owner.state = ReplicasState.load(data.get("_data") or {})

    return ReplicatedState


class PySyncObjLog:
    """The state replicated by PySyncObj among ``raft_peers`` (``{peer id: "host:port"}``)."""

    log = Logger()

    def __init__(self, reactor: Any, self_id: str, raft_peers: dict[str, str], store_path: str,
                 retry: float = 0.1, raft_timeouts: tuple[float, float] = (0.4, 1.4)) -> None:
        self.reactor = reactor
        self.self_id = self_id
        self.raft_peers = dict(raft_peers)
        self.store_path = store_path
        self.retry = retry  # seconds before a new leader tries its initial entry again
        self.raft_timeouts = raft_timeouts
        self.state = ReplicasState()
        self.lock = threading.RLock()
        self.leader_ready = False
        self.role_listeners: list[Callable[[bool], None]] = []
        self._sync: Any = None
        self._consumer: Any = None
        self._raft_leader = False
        self._claiming = False
        #: told ``(status, started)`` of each initial entry a new leader commits (dledger_op_total)
        self.append_observer: Callable[[str, float], None] | None = None

    def start(self) -> None:
        lib = pysyncobj()
        SyncObj, SyncObjConf = lib.SyncObj, lib.SyncObjConf  # noqa: N806 (the library's names)
        os.makedirs(self.store_path, exist_ok=True)
        conf = SyncObjConf(
            journalFile=os.path.join(self.store_path, "raft.journal"),
            fullDumpFile=os.path.join(self.store_path, "raft.dump"),
            # log compaction serialises in a forked child by default: no fork in a threaded reactor
            useFork=False,
            raftMinTimeout=self.raft_timeouts[0], raftMaxTimeout=self.raft_timeouts[1],
            # a command sent while no leader is known fails at once instead of waiting in a queue:
            # only the leader sends commands, and it answers its callers itself
            commandsWaitLeader=False,
            # PySyncObj retries a peer it could not reach every 5 s by default: a set started (or
            # restarted) together then waited up to that long for its first leader
            connectionRetryTime=1.0,
            onStateChanged=self._state_changed,
        )
        self._consumer = _consumer_class()(self)
        own = self.raft_peers[self.self_id]
        others = [a for p, a in sorted(self.raft_peers.items()) if p != self.self_id]
        self._sync = SyncObj(own, others, conf=conf, consumers=[self._consumer])

    def stop(self) -> defer.Deferred[None]:
        sync, self._sync = self._sync, None
        if sync is None:
            return defer.succeed(None)
        from twisted.internet import threads
        from twisted.internet.interfaces import IReactorThreads
        if not IReactorThreads.providedBy(self.reactor):  # a test's clock: wait here
            sync.destroy_synchronous()
            return defer.succeed(None)
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), sync.destroy_synchronous)

    def leader_id(self) -> str | None:
        """The peer id of the last known Raft leader."""
        if self._sync is None:
            return None
        node = self._sync._getLeader()
        if node is None:
            return None
        address = getattr(node, "address", str(node))
        for peer, raft_address in self.raft_peers.items():
            if raft_address == address:
                return peer
        return None

    def status(self) -> dict[str, Any]:
        return dict(self._sync.getStatus()) if self._sync is not None else {}

    def append(self, events: list[Event]) -> defer.Deferred[None]:
        if self._sync is None:
            return defer.fail(NotLeaderError("the controller is stopping"))
        d: defer.Deferred[None] = defer.Deferred()
        self._consumer.apply_events([e.to_wire() for e in events], callback=self._callback(d))
        return d

    def _callback(self, d: defer.Deferred[None]) -> Callable[[Any, int], None]:
        def done(result: Any, error: int) -> None:  # in PySyncObj's thread
            self.reactor.callFromThread(self._fire, d, error)
        return done

    @staticmethod
    def _fire(d: defer.Deferred[None], error: int) -> None:
        if error == 0:
            d.callback(None)
        else:
            names = {v: k for k, v in vars(pysyncobj().FAIL_REASON).items() if isinstance(v, int)}
            d.errback(NotLeaderError(f"the replicated log refused the entry: {names.get(error, error)}"))

    def _state_changed(self, old: int, new: int) -> None:  # on PySyncObj's thread
        self.reactor.callFromThread(self._role_changed, new == RAFT_LEADER)

    def _role_changed(self, leader: bool) -> None:
        if self._sync is None:
            return
        if leader and not self._raft_leader:
            self._raft_leader = True
            self._claim()
        elif not leader and self._raft_leader:
            self._raft_leader = False
            if self.leader_ready:
                self.leader_ready = False
                self.log.info("controller {id} is no longer the leader", id=self.self_id)
                self._tell(False)

    def _claim(self) -> None:
        """Commit an empty entry, then act as the leader (if still the Raft leader)."""
        if self._claiming:
            return
        self._claiming = True
        started = self.reactor.seconds()
        d: defer.Deferred[None] = defer.Deferred()
        self._consumer.noop(callback=self._callback(d))

        def ok(_: None) -> None:
            self._claiming = False
            if self.append_observer is not None:
                self.append_observer("success", started)
            if self._raft_leader and self._sync is not None:
                self.leader_ready = True
                self.log.info("controller {id} is the leader (term {term})", id=self.self_id,
                              term=self._sync._getTerm())
                self._tell(True)

        def failed(f: Any) -> None:
            self._claiming = False
            if self.append_observer is not None:
                self.append_observer("failed", started)
            self.log.warn("controller leader's initial entry failed: {err}; retrying", err=f.getErrorMessage())
            if self._raft_leader:
                self.reactor.callLater(self.retry, self._claim)

        d.addCallbacks(ok, failed)

    def _tell(self, leader: bool) -> None:
        for listener in self.role_listeners:
            try:
                listener(leader)
            except Exception:
                self.log.failure("role listener failed")
