"""HAClient: a slave's side of classic HA (Java ``HAService.HAClient``).

Connects to the master's HA address (``haMasterAddress``, or the one the name server answers a
registration with), reports its commit log's end at once, after every block it appended and at
least every ``haSendHeartbeatInterval``, and appends the master's blocks verbatim through the
injected ``append(offset, bytes)``. A block that does not start at the slave's end (unless the
slave is empty), one larger than :data:`~rmqpy.store.ha.wire.MAX_BLOCK`, or a failed append
closes the connection; so does a master silent for ``haHousekeepingInterval``. It tries to
(re)connect every 5 s while it has an address.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import protocol

from rmqpy.remoting.ratelimit import limiter_for
from rmqpy.store.ha.connection import HATimings
from rmqpy.store.ha.redial import Redialer
from rmqpy.store.ha.wire import HEADER, MAX_BLOCK, REPORT

log = logging.getLogger(__name__)



class HAClientProtocol(protocol.Protocol):
    transport: Any  # a TCP transport (ITCPTransport + IConsumer) once connected

    def __init__(self, client: "HAClient") -> None:
        self.client = client
        self._buf = bytearray()
        self._closed = False
        self.reported = -1
        #: clock seconds of the last report written and the last bytes read (haStatus shows them)
        self.last_write = 0.0
        self.last_read = 0.0
        self._timer: Any = None

    def connectionMade(self) -> None:  # noqa: N802 (Twisted's name)
        now = self.client.clock.seconds()
        self.last_read = now
        self.report(self.client.max_offset())
        self._timer = self.client.clock.callLater(1.0, self._tick)

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self._closed = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self.client.lost(self)

    def close(self, why: str) -> None:
        if self._closed:
            return
        self._closed = True
        if limiter_for(self.client.clock).allow("ha-client-close"):
            log.warning("HA: closing the connection to master %s: %s", self.client.master_address, why)
        self.transport.loseConnection()

    def report(self, offset: int) -> None:
        self.reported = offset
        self.last_write = self.client.clock.seconds()
        self.transport.write(REPORT.pack(offset))

    def _tick(self) -> None:
        self._timer = None
        if self._closed:
            return
        now = self.client.clock.seconds()
        t = self.client.timings
        if now - self.last_read > t.housekeeping_ms / 1000.0:
            self.close(f"master silent for {t.housekeeping_ms} ms")
            return
        if now - self.last_write >= t.heartbeat_ms / 1000.0:
            self.report(self.client.max_offset())
        self._timer = self.client.clock.callLater(1.0, self._tick)

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self._closed:
            return
        self.last_read = self.client.clock.seconds()
        self.client.flow.add(len(data))
        buf = self._buf
        buf += data
        pos = 0
        appended = False
        while len(buf) - pos >= HEADER.size:
            start, size = HEADER.unpack_from(buf, pos)
            if size < 0 or size > MAX_BLOCK or start < 0:
                self.close(f"bad block header: offset {start}, size {size}")
                return
            mine = self.client.max_offset()
            if mine != 0 and mine != start:
                self.close(f"master pushed offset {start}, not this slave's end {mine}")
                return
            if len(buf) - pos < HEADER.size + size:
                break
            if size:
                body = bytes(buf[pos + HEADER.size:pos + HEADER.size + size])
                if not self.client.append(start, body):
                    self.close(f"appending {size} bytes at {start} failed")
                    return
                appended = True
            pos += HEADER.size + size
        del buf[:pos]
        if appended:
            end = self.client.max_offset()
            if end > self.reported:
                self.report(end)


class HAClient(Redialer[HAClientProtocol]):
    log_name = "HA"
    stop_reason = "slave shutting down"

    def __init__(self, clock: Any, max_offset: Callable[[], int], append: Callable[[int, bytes], bool],
                 timings: HATimings, master_address: str = "",
                 connect: Callable[[str, protocol.Protocol], Any] | None = None) -> None:
        super().__init__(clock, connect)
        self.max_offset = max_offset
        self.append = append
        self.timings = timings
        self.dial_address = master_address

    @property
    def master_address(self) -> str:
        return self.dial_address

    def update_master_address(self, address: str | None) -> None:
        """Java ``updateMasterAddress``: a changed address drops the old connection."""
        self.redial_to(address)

    def new_protocol(self) -> HAClientProtocol:
        return HAClientProtocol(self)

    def connected_line(self, address: str, proto: HAClientProtocol) -> str:
        return f"HA: connected to master {address}, reported offset {proto.reported}"
