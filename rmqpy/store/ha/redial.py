"""A replica's one connection to its master's HA port, dialled again while it is started.

Both sides of replication a replica can run, classic HA (:mod:`rmqpy.store.ha.client`) and
controller mode's AutoSwitch (:mod:`rmqpy.store.ha.autoswitch.client`), keep one connection to an
address that can change at run time and try again every :data:`RECONNECT_S` when it fails or
closes; only what is dialled, and what must happen before a dial, differ.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Generic, TypeVar

from twisted.internet import defer, protocol
from twisted.internet.endpoints import HostnameEndpoint, connectProtocol

from rmqpy.remoting.ratelimit import limiter_for
from rmqpy.store.ha.flow import ByteRate

log = logging.getLogger(__name__)

RECONNECT_S = 5.0

P = TypeVar("P", bound=protocol.Protocol)


def is_host_port(address: str) -> bool:
    host, _, port = address.rpartition(":")
    return bool(host) and port.isdigit()


class Redialer(Generic[P]):
    """Keeps ``connection`` open to :attr:`dial_address` while started.

    Subclasses say what a connection is (:meth:`new_protocol`), may run a step before each dial
    (:meth:`before_dial`: False or a failure skips this dial and waits), and name themselves in
    the log (``log_name``) and in the reason given when they stop (``stop_reason``)."""

    log_name = "HA"
    stop_reason = "shutting down"

    def __init__(self, clock: Any, connect: Callable[[str, protocol.Protocol], Any] | None = None) -> None:
        self.clock = clock
        self.dial_address = ""
        self.connection: P | None = None
        #: bytes the connections read from the master (haStatus's TransferSpeed, Java's client FlowMonitor)
        self.flow = ByteRate(clock)
        self._connecting = False
        self._stopped = True
        self._timer: Any = None
        self._connect = connect or self._tcp_connect

    # ------------------------------------------------------------------ what subclasses say
    def new_protocol(self) -> P:
        raise NotImplementedError

    def before_dial(self) -> defer.Deferred[bool]:
        return defer.succeed(True)

    def connected_line(self, address: str, proto: P) -> str:
        return f"{self.log_name}: connected to master {address}"

    # ------------------------------------------------------------------ the connection
    def _tcp_connect(self, address: str, proto: protocol.Protocol) -> Any:
        host, _, port = address.rpartition(":")
        return connectProtocol(HostnameEndpoint(self.clock, host, int(port), timeout=3), proto)

    def redial_to(self, address: str | None) -> None:
        """A changed address drops the old connection and dials the new one (Java ``updateMasterAddress``)."""
        if not address or address == self.dial_address:
            return
        if not is_host_port(address):
            log.warning("%s: %r is no host:port", self.log_name, address)
            return
        log.info("%s: master HA address %s (was %s)", self.log_name, address, self.dial_address or "none")
        self.dial_address = address
        if self.connection is not None:
            self.connection.close("master address changed")  # type: ignore[attr-defined]
        self._try_connect()

    def start(self) -> None:
        self._stopped = False
        self._try_connect()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if self.connection is not None:
            self.connection.close(self.stop_reason)  # type: ignore[attr-defined]

    def is_connected(self) -> bool:
        return self.connection is not None

    def _try_connect(self) -> None:
        if self._stopped or self.connection is not None or self._connecting:
            return
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if not self.dial_address:
            self._schedule()
            return
        self._connecting = True
        address = self.dial_address

        def dial(ok: bool) -> Any:
            if not ok or self._stopped or address != self.dial_address:
                self._connecting = False
                self._schedule()
                return None
            proto = self.new_protocol()

            def connected(_: Any) -> None:
                self._connecting = False
                self.connection = proto
                log.info("%s", self.connected_line(address, proto))

            def failed(f: Any) -> None:
                self._connecting = False
                if limiter_for(self.clock).allow(f"{self.log_name}-connect"):
                    log.warning("%s: cannot connect to master %s: %s", self.log_name, address, f.getErrorMessage())
                self._schedule()

            return self._connect(address, proto).addCallbacks(connected, failed)

        def broken(f: Any) -> None:
            self._connecting = False
            log.error("%s: before connecting to %s: %s", self.log_name, address, f.getErrorMessage())
            self._schedule()

        self.before_dial().addCallback(dial).addErrback(broken)

    def _schedule(self) -> None:
        if not self._stopped and (self._timer is None or not self._timer.active()):
            self._timer = self.clock.callLater(RECONNECT_S, self._try_connect)

    def lost(self, proto: P) -> None:
        if self.connection is proto:
            self.connection = None
        self._schedule()
