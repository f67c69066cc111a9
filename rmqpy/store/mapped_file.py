"""Memory-mapped fixed-size files named by their 20-digit starting offset
(RocketMQ ``MappedFile`` / ``MappedFileQueue``)."""

from __future__ import annotations

import logging
import mmap
import os
import re

from rmqpy.store import space

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^\d{20}$")


class StoreError(Exception):
    """The store cannot be opened or used as asked; the message says what and where."""


def offset_to_file_name(offset: int) -> str:
    return "%020d" % offset


class MappedFile:
    """One fixed-size file mapped into memory.

    ``wrote_position`` is the logical end of data (append point); ``flushed_position``
    what is known to be on disk.  A read-only file whose length on disk is shorter
    than ``file_size`` is mapped at its real length (reads past it see nothing).
    """

    __slots__ = ("path", "file_size", "file_from_offset", "fd", "mm", "wrote_position", "flushed_position",
                 "readonly", "mapped_len", "store_timestamp", "__weakref__")

    def __init__(self, path: str, file_size: int, *, readonly: bool = False, create: bool = True):
        self.path = path
        self.file_size = file_size
        self.readonly = readonly
        name = os.path.basename(path)
        self.file_from_offset = int(name) if _NAME_RE.match(name) else 0
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0
        if readonly:
            self.fd: int | None = os.open(path, os.O_RDONLY)
            length = os.fstat(self.fd).st_size
            self.mapped_len = min(length, file_size)
            self.mm = mmap.mmap(self.fd, self.mapped_len, access=mmap.ACCESS_READ) if self.mapped_len else None
        else:
            exists = os.path.exists(path)
            if not exists and not create:
                raise FileNotFoundError(path)
            if not exists:
                # Size the new file before it gets its name, so that a crash never leaves a
                # file of the wrong length under a store name.
                # Its blocks are reserved first: a write through the mapping into a hole of
                # a full disk is a SIGBUS, a failed reservation here only an OSError.
                tmp = path + ".creating"
                fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.ftruncate(fd, file_size)
                    space.allocate(fd, 0, file_size)
                except BaseException:
                    os.close(fd)
                    os.unlink(tmp)
                    raise
                os.close(fd)
                os.replace(tmp, path)
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            length = os.fstat(self.fd).st_size
            if length != file_size:
                if exists and length > 0:
                    os.close(self.fd)
                    raise StoreError(f"{path}: length {length} does not match the configured file size "
                                     f"{file_size}; check the store configuration")
                try:
                    os.ftruncate(self.fd, file_size)
                    space.allocate(self.fd, 0, file_size)
                except BaseException:
                    os.close(self.fd)
                    raise
            self.mapped_len = file_size
            self.mm = mmap.mmap(self.fd, file_size, access=mmap.ACCESS_WRITE)

    # ------------------------------------------------------------------
    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def append(self, data) -> bool:
        n = len(data)
        p = self.wrote_position
        if p + n > self.file_size:
            return False
        assert self.mm is not None  # a writable file stays mapped until close()
        self.mm[p:p + n] = data
        self.wrote_position = p + n
        return True

    def reserve_rest(self) -> None:
        """Reserve the blocks from the write position to the end (a file mapped at load may
        be sparse: written by Java, or by an rmqpy without reservation).  OSError(ENOSPC)
        when the disk cannot hold it."""
        if self.readonly or self.fd is None or self.wrote_position >= self.file_size:
            return
        start = self.wrote_position & ~4095
        space.allocate(self.fd, start, self.file_size - start)

    def read(self, pos: int, size: int) -> bytes | None:
        """Bytes [pos, pos+size) relative to the file start, only within written data."""
        if pos < 0 or size < 0 or pos + size > self.readable_position() or self.mm is None:
            return None
        return self.mm[pos:pos + size]

    def readable_position(self) -> int:
        return min(self.wrote_position, self.mapped_len)

    def release(self, start: int, end: int) -> int:
        """Take the whole pages of [start, end) out of this process' page tables (MADV_DONTNEED).

        The mapping is shared, so the pages and their data stay in the page cache (a dirty page
        stays dirty) and the next access maps them again: the bytes never change, only the
        process' RSS (rmqpy/store/resident.py). Returns the bytes advised (0: unmapped)."""
        mm = self.mm
        lo = -(-max(0, start) // mmap.PAGESIZE) * mmap.PAGESIZE
        hi = min(end, self.mapped_len) // mmap.PAGESIZE * mmap.PAGESIZE
        if mm is None or hi <= lo:
            return 0
        try:
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (ValueError, OSError):  # closed meanwhile (the file deleted): nothing to drop
            return 0
        return hi - lo

    def flush_sync(self) -> int:
        """fsync the file (blocking; call from a thread).  Returns the new flushed position."""
        target = self.wrote_position
        if self.fd is not None and not self.readonly and target > self.flushed_position:
            os.fsync(self.fd)  # persists MAP_SHARED writes on Linux; releases the GIL
        if target > self.flushed_position:
            self.flushed_position = target
        return self.flushed_position

    def close(self) -> None:
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # exported views still alive; the GC will unmap
                log.warning("mapped file %s still has live views", self.path)
            self.mm = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def zero(self, start: int, end: int) -> None:
        """Zero bytes [start, end) (only touching pages that are non-zero)."""
        if self.readonly or self.mm is None:
            return
        end = min(end, self.file_size)
        step = 1 << 16
        p = start
        while p < end:
            q = min(end, p + step)
            chunk = self.mm[p:q]
            if chunk.count(0) != len(chunk):
                self.mm[p:q] = bytes(q - p)
            p = q

    def __repr__(self) -> str:
        return f"<MappedFile {self.path} wrote={self.wrote_position} flushed={self.flushed_position}>"


class MappedFileQueue:
    """The ordered files of one directory (commitlog dir or one consume queue dir)."""

    def __init__(self, store_path: str, mapped_file_size: int, *, readonly: bool = False):
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.readonly = readonly
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        #: the next file, made ahead of need off the reactor thread (Java's
        #: AllocateMappedFileService): ``get_last_mapped_file`` takes it instead of creating one
        self.ready: MappedFile | None = None

    def load(self) -> None:
        """Map the existing files; files not named by 20 digits are ignored with a warning."""
        if not self.readonly:
            self._remove_stale_next()
        if not os.path.isdir(self.store_path):
            return
        names = []
        for name in sorted(os.listdir(self.store_path)):
            full = os.path.join(self.store_path, name)
            if not _NAME_RE.match(name) or not os.path.isfile(full):
                log.warning("ignoring foreign file %s in store directory", full)
                continue
            names.append(name)
        expected = None
        for name in names:
            full = os.path.join(self.store_path, name)
            off = int(name)
            if off % self.mapped_file_size:
                raise StoreError(f"{full}: offset {off} is not a multiple of the file size {self.mapped_file_size}")
            if expected is not None and off != expected:
                raise StoreError(f"{full}: files in {self.store_path} are not contiguous (expected "
                                 f"{offset_to_file_name(expected)})")
            size = os.path.getsize(full)
            if size == 0 and name == names[-1]:
                # A crash between creating the newest file and sizing it (kill -9) leaves it
                # empty: nothing can have been written to it, so it is simply not there yet.
                log.warning("%s: empty newest file left by an interrupted creation; %s", full,
                            "skipped" if self.readonly else "removed")
                if not self.readonly:
                    os.unlink(full)
                break
            if size != self.mapped_file_size and not self.readonly:
                raise StoreError(f"{full}: length {size} does not match the configured file size "
                                 f"{self.mapped_file_size}; check mappedFileSize settings")
            if size != self.mapped_file_size:
                log.warning("%s: length %d != configured %d (reading what is there)", full, size,
                            self.mapped_file_size)
            mf = MappedFile(full, self.mapped_file_size, readonly=self.readonly)
            mf.wrote_position = mf.flushed_position = self.mapped_file_size
            self.files.append(mf)
            expected = off + self.mapped_file_size

    # ------------------------------------------------------------------
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def get_last_mapped_file(self, start_offset: int = 0, need_create: bool = True) -> MappedFile | None:
        """The file to append to; creates the next one if the last is full."""
        last = self.last()
        create_offset = -1
        if last is None:
            create_offset = start_offset - start_offset % self.mapped_file_size
        elif last.is_full():
            create_offset = last.end_offset
        if create_offset >= 0 and need_create:
            if self.readonly:
                return None
            os.makedirs(self.store_path, exist_ok=True)
            path = os.path.join(self.store_path, offset_to_file_name(create_offset))
            mf_ready = self._take_ready(create_offset, path)
            if mf_ready is not None:
                mf = mf_ready
            else:
                if os.path.exists(path):
                    os.unlink(path)  # stale file beyond the recovered end
                mf = MappedFile(path, self.mapped_file_size)
            if not self.files:
                self.flushed_where = create_offset
            else:
                log.info("%s: rolled to a new file %s", self.store_path, offset_to_file_name(create_offset))
            self.files.append(mf)
            return mf
        return last

    # ------------------------------------------------------------------ the next file, ahead of need
    def _next_path(self, offset: int) -> str:
        # beside the store directory, not in it: no loader (rmqpy's or Java's) ever sees it
        parent, name = os.path.split(os.path.normpath(self.store_path))
        return os.path.join(parent, f".{name}.next.{offset_to_file_name(offset)}")

    def _remove_stale_next(self) -> None:
        """A next file made ahead by a process that then died never got its name: delete it."""
        parent, name = os.path.split(os.path.normpath(self.store_path))
        prefix = f".{name}.next."
        try:
            stale = [n for n in os.listdir(parent) if n.startswith(prefix)]
        except OSError:
            return
        for n in stale:
            try:
                os.unlink(os.path.join(parent, n))
            except OSError:
                pass

    def next_offset(self) -> int | None:
        """Where the file after the last one starts (None: no file yet, or one is ready)."""
        last = self.last()
        if last is None or self.readonly or self.ready is not None:
            return None
        return last.end_offset

    def make_next(self, offset: int) -> MappedFile:
        """Create, size, reserve and map the file for ``offset`` under a name outside the
        directory (blocking: run it in a thread); :meth:`adopt_next` gives it its name."""
        path = self._next_path(offset)
        if os.path.exists(path):
            os.unlink(path)
        mf = MappedFile(path, self.mapped_file_size)
        mf.file_from_offset = offset
        # The first write into a fresh mapping costs ~0.35 ms (measured: the fault that sets up
        # the mapping over blocks reserved but never written); a plain write of the first page
        # here, which releases the GIL, brings that to ~0.03 ms for the put that rolls.
        assert mf.fd is not None
        os.pwrite(mf.fd, bytes(4096), 0)
        return mf

    def adopt_next(self, mf: MappedFile) -> None:
        """Keep ``mf`` (from :meth:`make_next`) as the ready file if it is still the next one,
        else delete it."""
        last = self.last()
        if self.ready is None and last is not None and last.end_offset == mf.file_from_offset \
                and mf.mm is not None:
            self.ready = mf
        else:
            mf.destroy()

    def _take_ready(self, offset: int, path: str) -> MappedFile | None:
        mf, self.ready = self.ready, None
        if mf is None:
            return None
        if mf.file_from_offset != offset or os.path.exists(path):
            mf.destroy()
            return None
        os.rename(mf.path, path)
        mf.path = path
        return mf

    def drop_ready(self) -> None:
        mf, self.ready = self.ready, None
        if mf is not None:
            mf.destroy()

    def min_offset(self) -> int:
        f = self.first()
        return f.file_from_offset if f else -1

    def max_offset(self) -> int:
        f = self.last()
        return f.file_from_offset + f.readable_position() if f else 0

    def max_wrote_offset(self) -> int:
        f = self.last()
        return f.file_from_offset + f.wrote_position if f else 0

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        if not self.files:
            return None
        first = self.files[0].file_from_offset
        idx = (offset - first) // self.mapped_file_size if offset >= first else -1
        if 0 <= idx < len(self.files):
            f = self.files[idx]
            if f.file_from_offset <= offset < f.end_offset:
                return f
        return self.files[0] if return_first_on_not_found else None

    def truncate_dirty_files(self, offset: int, detach: list[MappedFile] | None = None) -> None:
        """Set the write point to ``offset``; delete files entirely after it (with ``detach``,
        they are only taken out of the queue and added to it, for the caller to destroy off
        the reactor)."""
        keep = []
        for f in self.files:
            if f.end_offset > offset:
                if offset >= f.file_from_offset:
                    pos = offset - f.file_from_offset
                    f.wrote_position = pos
                    f.flushed_position = min(f.flushed_position, pos)
                    keep.append(f)
                elif detach is not None:
                    detach.append(f)
                else:
                    if self.readonly:
                        f.close()
                    else:
                        f.destroy()
            else:
                keep.append(f)
        self.files = keep
        self.drop_ready()
        self.flushed_where = min(self.flushed_where, offset) if self.flushed_where else offset

    def flush_targets(self) -> list[MappedFile]:
        return [f for f in self.files if f.wrote_position > f.flushed_position]

    def destroy(self) -> None:
        self.drop_ready()
        for f in self.files:
            f.destroy()
        self.files = []
        self.flushed_where = 0
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass

    def close(self) -> None:
        self.drop_ready()  # its name is outside the directory: a later load would not see it
        for f in self.files:
            f.close()

    def delete_first_files(self, n: int) -> list[MappedFile]:
        gone = self.files[:n]
        self.files = self.files[n:]
        return gone
