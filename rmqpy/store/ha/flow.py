"""Bytes an HA link moved in the last whole second (Java ``FlowMonitor``'s ``transferredByteInSecond``).

Java's FlowMonitor is a thread that, every second, moves the bytes counted so far into
``transferredByteInSecond`` and starts counting again. :class:`ByteRate` does the same without a
timer: the count rolls over lazily, on the next :meth:`add` or :meth:`per_second`, by the
injected clock. Windows are whole seconds from the rate's creation; the rate is the count of the
window that ended last, 0 when that window saw nothing or ended more than a second ago. Both
sides of both HA modes use it: a master's connection counts the bytes it writes, a slave's client
the bytes it reads (what ``mqadmin haStatus`` prints as TransferSpeed).
"""
from __future__ import annotations

import math
from typing import Any


class ByteRate:
    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self._window_start = clock.seconds()
        self._count = 0
        self._last = 0

    def _roll(self) -> None:
        elapsed = self.clock.seconds() - self._window_start
        if elapsed < 1.0:
            return
        whole = math.floor(elapsed)
        self._last = self._count if whole == 1 else 0  # a window with nothing in between: 0 bytes
        self._count = 0
        self._window_start += whole

    def add(self, count: int) -> None:
        self._roll()
        self._count += count

    def per_second(self) -> int:
        """The bytes counted in the last whole second."""
        self._roll()
        return self._last
