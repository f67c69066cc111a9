"""Disk space: Java's used-space ratio, free bytes, and block reservation for mapped files.

A page of a sparse file that is first written through a mapping needs a free block at
that moment; when the disk has none the kernel answers the write with SIGBUS and the
process dies.  Every mapped store file therefore has its blocks reserved
(``posix_fallocate``) before a byte of it is mapped for writing: an ``ENOSPC`` then
arrives as an ``OSError`` at the roll, where the store can refuse the put cleanly.
"""

from __future__ import annotations

import errno
import logging
import os
from typing import Any, Callable

log = logging.getLogger(__name__)

#: bytes a roll leaves free besides the new file: room for the small non-mapped writes
#: (config json, offsets, checkpoint, logs) that must keep working while the store is full
FREE_SPACE_HEADROOM = 4 << 20

_ZEROS = bytes(1 << 20)


def _zero_fill(fd: int, offset: int, length: int) -> None:
    """Reserve by writing zeros: for file systems without fallocate (what Java's
    ``warmMapedFileEnable`` does through the mapping, here without the SIGBUS risk)."""
    end = offset + length
    p = offset
    while p < end:
        n = min(len(_ZEROS), end - p)
        written = os.pwrite(fd, _ZEROS[:n], p)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        p += written


def posix_allocate(fd: int, offset: int, length: int) -> None:
    """Reserve blocks for [offset, offset+length) of ``fd``; OSError(ENOSPC) when the disk is full."""
    if length <= 0:
        return
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            _zero_fill(fd, offset, length)
        else:
            raise


Allocator = Callable[[int, int, int], None]
_allocator: Allocator = posix_allocate


def allocate(fd: int, offset: int, length: int) -> None:
    """Reserve file blocks with the current allocator (tests inject a failing one)."""
    _allocator(fd, offset, length)


def set_allocator(fn: Allocator | None) -> Allocator:
    """Replace the allocator (None restores ``posix_fallocate``); returns the previous one."""
    global _allocator
    prev = _allocator
    _allocator = fn if fn is not None else posix_allocate
    return prev


def is_disk_full_error(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)


def free_bytes(path: str) -> int:
    """Bytes an unprivileged writer may still use on the partition of ``path`` (-1 if unknown):
    Java's ``File.getUsableSpace``."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1
    return st.f_bavail * st.f_frsize


def disk_used_ratio(path: str) -> float:
    """Java ``UtilAll.getDiskPartitionSpaceUsedPercent`` (4.9.7 and 5.x alike), -1 if unknown.

    used = total - free (``f_bfree``, root's reserve counted as free); the ratio is
    used / (used + usable), usable = ``f_bavail``, so the blocks reserved for root count as
    neither; rounded *up* to whole percent and returned as a fraction (0.16, not 0.1534)."""
    if not path:
        return -1.0
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    entire = used + usable
    if entire <= 0:
        return -1.0
    result = used * 100 // entire + (1 if used * 100 % entire else 0)
    return result / 100.0


def disk_util(store_config: Any) -> str:
    """Java ``SendMessageProcessor.diskUtil``: each store directory's partition, -1 where it does not exist."""
    cl = min(100.0, disk_used_ratio(store_config.commitlog_dir))
    return (f"CL: {cl:5.2f} CQ: {disk_used_ratio(store_config.consume_queue_dir):5.2f} "
            f"INDEX: {disk_used_ratio(store_config.index_dir):5.2f}")
