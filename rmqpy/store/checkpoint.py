"""StoreCheckpoint: the 4096-byte ``checkpoint`` file (facts §7.5)."""

from __future__ import annotations

import mmap
import os
import struct

from rmqpy.store import space

CHECKPOINT_SIZE = 4096
_LAYOUT = struct.Struct(">qqqqq")  # physic, logics, index, masterFlushedOffset, confirmPhyOffset


class StoreCheckpoint:
    def __init__(self, path: str, *, readonly: bool = False):
        self.path = path
        self.readonly = readonly
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        self.fd = None
        self.mm = None
        exists = os.path.exists(path)
        if readonly:
            if exists:
                with open(path, "rb") as f:
                    data = f.read(_LAYOUT.size)
                self._load(data)
            return
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size < CHECKPOINT_SIZE:
            os.ftruncate(self.fd, CHECKPOINT_SIZE)
        space.allocate(self.fd, 0, CHECKPOINT_SIZE)  # a mapped write into a hole of a full disk is SIGBUS
        self.mm = mmap.mmap(self.fd, CHECKPOINT_SIZE)
        if exists:
            self._load(self.mm[:_LAYOUT.size])

    def _load(self, data: bytes) -> None:
        data = data + bytes(_LAYOUT.size - len(data))
        (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
         self.master_flushed_offset, self.confirm_phy_offset) = _LAYOUT.unpack(data)

    def write(self) -> None:
        """Write the fields into the mapping (no fsync)."""
        if self.mm is not None:
            _LAYOUT.pack_into(self.mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                              self.index_msg_timestamp, self.master_flushed_offset, self.confirm_phy_offset)

    def flush(self) -> None:
        """Write and fsync (blocking)."""
        self.write()
        if self.fd is not None:
            os.fsync(self.fd)

    def get_min_timestamp(self) -> int:
        m = min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000
        return max(m, 0)

    def get_min_timestamp_index(self) -> int:
        return min(self.get_min_timestamp(), self.index_msg_timestamp)

    def close(self) -> None:
        if self.mm is not None:
            self.mm.close()
            self.mm = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
