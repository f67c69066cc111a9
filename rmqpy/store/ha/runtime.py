"""GET_BROKER_HA_STATUS's ``HARuntimeInfo`` from either HA mode (Java ``DefaultHAService
.getRuntimeInfo`` and ``AutoSwitchHAService.getRuntimeInfo``, which differ only in who is in sync).

A master lists every connection of its HA port (one that has not reported yet too, acknowledged
-1, as Java's ``connectionList``): the slave's address, what it acknowledged, the master's end
minus that, whether it is in sync (the mode's rule), the bytes written to it in the last whole
second and where the next transfer starts. A slave tells its master's HA address, its commit
log's end, the bytes read in the last whole second, when its connection last read and wrote (ms;
0 without a connection, as Java after it closes one) and the master's flushed offset its store
holds.
"""
from __future__ import annotations

from typing import Callable, Iterable, Protocol, TypeVar

from rmqpy.protocol.bodies.ha import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo
from rmqpy.store.ha.flow import ByteRate


class SlaveLink(Protocol):
    """A master's connection to one slave (classic ``HAConnection``, ``AutoSwitchHAConnection``)."""
    client_addr: str
    slave_ack_offset: int
    next_transfer_from: int
    flow: ByteRate


class LinkTimes(Protocol):
    """A slave's open connection: clock seconds of its last read and last write."""
    last_read: float
    last_write: float


class MasterClient(Protocol):
    """A slave's client (a :class:`~rmqpy.store.ha.redial.Redialer`)."""
    dial_address: str
    flow: ByteRate

    @property
    def connection(self) -> LinkTimes | None: ...


L = TypeVar("L", bound=SlaveLink)


def master_info(master_put_where: int, links: Iterable[L], in_sync: Callable[[L], bool],
                in_sync_nums: int | None = None) -> HARuntimeInfo:
    """``in_sync_nums``: the count the mode reports (AutoSwitch: its in-sync set's size - 1);
    None: the connections ``in_sync`` holds for (classic)."""
    conns = []
    for link in links:
        ack = link.slave_ack_offset
        conns.append(HAConnectionRuntimeInfo(link.client_addr, ack, master_put_where - ack, in_sync(link),
                                             link.flow.per_second(), link.next_transfer_from))
    nums = sum(1 for c in conns if c.inSync) if in_sync_nums is None else in_sync_nums
    return HARuntimeInfo(True, master_put_where, nums, conns)


def slave_info(client: MasterClient | None, max_offset: int, master_flush_offset: int) -> HARuntimeInfo:
    conn = client.connection if client is not None else None
    read, write = (int(conn.last_read * 1000), int(conn.last_write * 1000)) if conn is not None else (0, 0)
    return HARuntimeInfo(False, haClientRuntimeInfo=HAClientRuntimeInfo(
        (client.dial_address or None) if client is not None else None,
        client.flow.per_second() if client is not None else 0,
        max_offset, read, write, master_flush_offset))
