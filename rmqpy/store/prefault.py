"""The commit log's next pages faulted in ahead of the writer, by a thread without the GIL (issue 29 item 2).

A put's first write into a page of the commit log's mapping takes the page fault: the page
cache page allocated and zeroed, the file's reserved extent marked written. In process that is
13-66 us of CPU per 37 KiB batch (42-220 us of wall time, the reactor blocked in the kernel)
against 4 us once the pages are in (bench/report/issue29/README.md, fourth session). Under the
send load it is the largest single line of the reactor thread (the copy into the mapped file).
This thread takes those faults :data:`LEAD` bytes ahead of the writer, ``madvise
(MADV_POPULATE_WRITE)`` through ``rmqpy._speedups.populate_write`` with the GIL released, so the
reactor thread no longer takes them. Java's counterpart is ``MappedFile.warmMappedFile``
(``warmMapedFileEnable``, off by default), which touches a whole new file in its allocation thread.

No byte of a file changes (the kernel faults the pages in "as if written, without the write";
the pages past the write position stay zeros, as the reserved extent reads), so recovery and
the wire are as before; the pure-Python path (``RMQPY_PURE_PYTHON=1`` or no extension) does not
start it. Only the last file is populated, never past its end, never behind the write position.

Off unless ``RMQPY_PREFAULT=1``: in process it takes 17-25 % of the reactor thread's CPU per
message off, but the end-to-end bench on the shared 2-core machine showed no gain (no idle core
for the thread to use, and CPU per message within the rounds' noise); see the fourth session.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import Any, Callable

from rmqpy.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

#: populated ahead of the write position. Not more: a populated page is dirty, and the commit
#: log's flush (an fsync every 500 ms) writes it out as zeros and cleans it, so the write into it
#: takes a fault again (and the page goes to disk twice); not less: the thread needs the GIL for a
#: moment between two populates, which a busy reactor thread may hold for a switch interval (5 ms,
#: 1.3 MiB of puts in process). Measured with an fsync per 17 MiB written (500 ms at 35 MB/s), the
#: writer's CPU per 37 KiB batch: none 16-48 us, 8 MiB ahead 10 us (and more CPU in all than none),
#: 2 MiB 6.4-7.1, 1 MiB 5.3-5.5 (bench/report/issue29/README.md, fourth session)
LEAD = 2 << 20
#: the writer asks again each time it has written this much past its last request
CHUNK = 512 << 10

#: set to 1 to run the thread (a broker on the compiled path, with a reactor that has threads)
ENABLE_ENV = "RMQPY_PREFAULT"


def prefault_enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "") not in ("", "0")


#: ``populate(buffer, offset, length)``: the pages of ``buffer[offset:offset + length]`` faulted in
Populate = Callable[[Any, int, int], int]


class Prefaulter:
    """The thread and the one request it works on: (file, populate up to)."""

    def __init__(self, populate: Populate, lead: int = LEAD, chunk: int = CHUNK):
        self._populate = populate
        self.lead = lead
        self.chunk = chunk
        self._cond = threading.Condition()
        self._want: tuple[MappedFile, int] | None = None
        self._busy: MappedFile | None = None  # the file a populate runs on now (its buffer exported)
        self._file = -1  # the file_from_offset of the file populated last, up to _done
        self._done = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: why it stopped for good (the kernel refused), or None
        self.disabled: str | None = None
        #: bytes populated so far (tests, the runtime info)
        self.populated = 0

    def start(self) -> None:
        if self._thread is not None or self.disabled is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="rmqpy-commitlog-prefault", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop and wait for the thread (a populate in progress ends first): before the files close."""
        thread = self._thread
        if thread is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        thread.join()
        self._thread = None

    def ahead(self, mf: MappedFile, wrote: int) -> int:
        """On the writer's thread, after a write that ends at ``wrote`` in ``mf``: have the
        pages up to :attr:`lead` bytes past it populated. The commit log offset past which the
        writer calls again (:attr:`chunk` further, or the file's end)."""
        with self._cond:
            self._want = (mf, min(mf.file_size, wrote + self.lead))
            self._cond.notify_all()
        return mf.file_from_offset + min(mf.file_size, wrote + self.chunk)

    def release(self, mf: MappedFile) -> None:
        """Before ``mf`` is closed off the writer's thread (a replica's truncation deletes the
        files past the cut): a request for it is dropped and a populate of it in progress ends
        first, since closing a mapping whose buffer the populate holds raises BufferError."""
        with self._cond:
            if self._want is not None and self._want[0] is mf:
                self._want = None
            while self._busy is mf:
                self._cond.wait()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._want is None and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                assert self._want is not None
                mf, want = self._want
                self._want = None
                self._busy = mf
            try:
                if not self._populate_file(mf, want):
                    return
            finally:
                with self._cond:
                    self._busy = None
                    self._cond.notify_all()

    def _populate_file(self, mf: MappedFile, want: int) -> bool:
        """One request; False when the kernel refuses for good."""
        if mf.file_from_offset != self._file:
            self._file, self._done = mf.file_from_offset, 0
        start = max(self._done, mf.wrote_position)
        mm = mf.mm
        if mm is None or want <= start:
            return True
        try:
            self.populated += self._populate(mm, start, want - start)
        except ValueError:  # the file was closed meanwhile (a closed mmap exports no buffer)
            return True
        except OSError as e:
            if e.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # not on this kernel / file system
                self.disabled = f"{e.strerror} ({errno.errorcode.get(e.errno or 0, e.errno)})"
                log.info("commit log pages not faulted in ahead of the writer: %s", self.disabled)
                return False
            # e.g. EFAULT or ENOMEM: the writer takes the faults itself, as without this thread
            log.warning("faulting in commit log pages of %s failed: %s", mf.path, e)
            return True
        self._done = want
        return True
