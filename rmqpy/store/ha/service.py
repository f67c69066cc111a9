"""HAService: the master's listening side and what its slaves acknowledged (Java ``HAService``).

It owns the connections of the slaves (:class:`HAConnection`), the highest offset any of them
reported (``push2SlaveMaxOffset``) and the SYNC_MASTER waiters (:class:`GroupTransferService`).
:meth:`replica_wait` is what a SYNC_MASTER store calls after appending a record that asks to
wait: SLAVE_NOT_AVAILABLE when no slave has reported (a connection that said nothing yet is
no slave) or the slaves are ``haSlaveFallbehindMax`` behind, else a Deferred that fires PUT_OK
once a slave reported the record's end, or FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``. Who may
connect at all is its :class:`~rmqpy.store.ha.gate.ReplicaGate`'s call.
"""
from __future__ import annotations

from typing import Any, Generic, TypeVar

from twisted.internet import defer, protocol

from rmqpy.store.ha.connection import HAConnection, HATimings, MasterLog
from rmqpy.store.ha.gate import ReplicaGate
from rmqpy.store.ha.group_transfer import GroupTransferService

S = TypeVar("S")


class HAService(protocol.ServerFactory, Generic[S]):
    """``S`` is the store's put status type (PUT_OK, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT)."""

    def __init__(self, clock: Any, master_log: MasterLog, timings: HATimings, *, fallbehind_max: int,
                 slave_timeout_ms: int, ok: S, not_available: S, timeout: S, gate: ReplicaGate | None = None) -> None:
        """``gate`` decides who may connect (default: everyone, at most 64 at once, as before issue 31)."""
        self.clock = clock
        self.master_log = master_log
        self.timings = timings
        self.fallbehind_max = fallbehind_max
        self.slave_timeout_ms = slave_timeout_ms
        self.ok = ok
        self.not_available = not_available
        self.gate = gate if gate is not None else ReplicaGate(clock)
        self.connections: list[HAConnection] = []
        self.group_transfer: GroupTransferService[S] = GroupTransferService(clock, ok, timeout)

    # ------------------------------------------------------------------ factory
    def buildProtocol(self, addr: Any) -> HAConnection | None:  # noqa: N802 (Twisted's name)
        if not self.gate.admit(addr, len(self.connections)):
            return None
        conn = HAConnection(self.clock, self.master_log, self.timings, self._acked, self._lost)
        self.connections.append(conn)
        return conn

    def _lost(self, conn: HAConnection) -> None:
        if conn in self.connections:
            self.connections.remove(conn)

    def _acked(self, conn: HAConnection, offset: int) -> None:
        self.group_transfer.notify_transfer_some(offset)

    # ------------------------------------------------------------------ master side of puts
    @property
    def push2slave_max_offset(self) -> int:
        return self.group_transfer.acked

    def replicas(self) -> list[HAConnection]:
        """The connections that reported an offset: a slave, as far as the master can tell. One
        that connected and said nothing (a port scan, a stalled peer) is none (Java counts it)."""
        return [c for c in self.connections if c.slave_request_offset >= 0]

    def is_slave_ok(self, master_put_where: int) -> bool:
        return bool(self.replicas()) and master_put_where - self.push2slave_max_offset < self.fallbehind_max

    def replica_wait(self, end_offset: int) -> S | defer.Deferred[S]:
        if not self.is_slave_ok(end_offset):
            return self.not_available
        self.wakeup_all()
        return self.group_transfer.wait(end_offset, self.slave_timeout_ms)

    def wakeup_all(self, *_: Any) -> None:
        """Data was appended: connections idle at the end send it now rather than at their next poll."""
        for conn in self.connections:
            conn.wakeup()

    # ------------------------------------------------------------------ info
    def slave_ack_offset(self) -> int:
        """The highest offset a connected slave acknowledged; -1 with none."""
        return max((c.slave_ack_offset for c in self.replicas()), default=-1)

    def shutdown(self) -> None:
        self.group_transfer.shutdown()
        for conn in list(self.connections):
            conn.close("master shutting down")
