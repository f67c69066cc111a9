"""A consume queue's offset by store time, as Java 5.3.3 finds it (SEARCH_OFFSET_BY_TIMESTAMP's answer).

RocketMQ 5 replaced 4.9's "nearest message" with a boundary (``BoundaryType``): LOWER, the default and
what a request without ``boundaryType`` gets, is the first offset whose store time is at or after the
time (the queue's max offset past its last message); UPPER is the last offset at or before it (the
queue's min offset before its first). The steps, quirks included, are those of rocketmq-all-5.3.3
``MappedFileQueue.getConsumeQueueMappedFileByTime`` (which file), ``ConsumeQueue.binarySearchInQueueByTime``
(where in it) and ``ConsumeQueueStore.getOffsetInQueueByTime`` (clamped to [min, max] offset). One
difference: Java caches each file's first and last store time once read (in the file object, until a
restart); here they are read each time, which answers the same unless the commit log dropped a
record whose time was cached (then both answer the queue's min offset).
"""
from __future__ import annotations

import enum
import struct
from typing import TYPE_CHECKING, Callable

from rmqpy.store.config import CQ_STORE_UNIT_SIZE

if TYPE_CHECKING:
    from rmqpy.store.consume_queue import ConsumeQueue
    from rmqpy.store.mapped_file import MappedFile

_UNIT_HEAD = struct.Struct(">qi")  # a unit's commit log offset and size
U = CQ_STORE_UNIT_SIZE

#: ``(commit log offset, size) -> store time``, -1 when that record cannot be read
#: (Java ``CommitLog.pickupStoreTimestamp``)
StoreTime = Callable[[int, int], int]


class Boundary(enum.Enum):
    LOWER = "lower"
    UPPER = "upper"

    @classmethod
    def of(cls, name: str | None) -> "Boundary":
        """Java ``BoundaryType.getType``, how a request header's value is read: "upper" in any case is
        UPPER, anything else (and no value) LOWER."""
        return cls.UPPER if name is not None and name.lower() == "upper" else cls.LOWER


def _java_div(a: int) -> int:
    """``a / 20`` with Java's truncation toward zero (``a`` is -1 past a file's start at worst)."""
    return a // U if a >= 0 else -((-a) // U)


def offset_by_time(cq: ConsumeQueue, store_time: StoreTime, min_phy: int, timestamp: int,
                   boundary: Boundary = Boundary.LOWER) -> int:
    """The offset of ``cq`` for ``timestamp`` (ms), in [min offset, max offset]; ``min_phy`` is the
    commit log's min offset (units below it are treated as older than any time)."""
    mf = _file_by_time(cq, store_time, timestamp, boundary)
    found = _search_file(cq, mf, store_time, min_phy, timestamp, boundary) if mf is not None else 0
    return min(max(found, cq.get_min_offset_in_queue()), cq.get_max_offset_in_queue())


def _unit_time(mf: MappedFile, pos: int, store_time: StoreTime) -> int:
    """Store time of the unit at byte ``pos`` of ``mf``, -1 when not written or not readable."""
    if mf.mm is None or pos < 0 or pos + U > mf.readable_position():
        return -1
    phy, size = _UNIT_HEAD.unpack_from(mf.mm, pos)
    return store_time(phy, size)


def _file_by_time(cq: ConsumeQueue, store_time: StoreTime, timestamp: int,
                  boundary: Boundary) -> MappedFile | None:
    """``getConsumeQueueMappedFileByTime``: LOWER, the first file (but the last) whose last unit is at or
    after the time, else the last file; UPPER, the last file whose first unit is at or before it (an
    unreadable first unit counts as before), else none. A time Java could not read is -1."""
    files = list(cq.queue.files)
    if not files:
        return None
    if boundary is Boundary.LOWER:
        for mf in files[:-1]:
            if _unit_time(mf, cq.mapped_file_size - U, store_time) >= timestamp:
                return mf
        return files[-1]
    for mf in reversed(files):
        if _unit_time(mf, 0, store_time) <= timestamp:
            return mf
    return None


def _search_file(cq: ConsumeQueue, mf: MappedFile, store_time: StoreTime, min_phy: int, timestamp: int,
                 boundary: Boundary) -> int:
    """``binarySearchInQueueByTime`` in one file: byte positions, answered as a queue offset."""
    base = mf.file_from_offset
    low = max(cq.min_logic_offset - base, 0)
    wrote = mf.wrote_position
    limit = wrote if wrote not in (0, mf.file_size) else mf.file_size  # the last file: what is written
    if mf.mm is None or limit > mf.readable_position():
        return 0  # Java's selectMappedBuffer gives nothing (an empty last file)
    ceiling = limit - U
    floor = low
    lower = boundary is Boundary.LOWER

    def at(pos: int) -> tuple[int, int]:
        assert mf.mm is not None
        return _UNIT_HEAD.unpack_from(mf.mm, pos)

    if store_time(*at(ceiling)) < timestamp:  # the whole file is before the time
        return (base + ceiling + U) // U if lower else (base + ceiling) // U
    if floor <= ceiling and store_time(*at(floor)) > timestamp:  # the whole file is after it
        return base // U if lower else 0

    high = ceiling
    target = left = right = -1
    while high >= low:
        mid = (low + high) // (2 * U) * U
        phy, size = at(mid)
        if phy < min_phy:  # its record is gone: older than any time
            low, left = mid + U, mid
            continue
        t = store_time(phy, size)
        if t < 0:
            return 0  # Java logs "Failed to query store timestamp" and answers 0 (then the min offset)
        if t == timestamp:
            target = mid
            break
        if t > timestamp:
            high, right = mid - U, mid
        else:
            low, left = mid + U, mid

    if target == -1:
        # no unit has the time: LOWER the first after it, UPPER the last before it
        return _java_div(base + (right if lower else left))
    step = -U if lower else U  # several units of that time: the first (LOWER) or the last (UPPER)
    while floor <= target + step <= ceiling and store_time(*at(target + step)) == timestamp:
        target += step
    return (base + target) // U
