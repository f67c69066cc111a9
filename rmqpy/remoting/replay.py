"""Answers replayed by request frame: the same request bytes, the same answer bytes.

Clients ask the name server for the same route again and again (each client every 30 s, a
benchmark as fast as it can), and between two route changes the answer differs only in the
opaque it echoes. A processor that knows this of a request code (its answer depends on the
request's bytes and on state it can stamp, nothing else: not the connection) lets the
dispatcher keep the encoded answer, keyed by the request frame with its opaque digits cut
out. A later frame with that key, while the stamp holds, is answered with those bytes and its
own opaque, without being decoded or dispatched.

Only JSON headers are keyed (what clients send), and an answer is kept only when the cut
digits are shown to be the opaque and nothing else: the request decoded with other digits
there differs in its opaque alone, and the answer encoded with another opaque is what the
kept template gives.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Callable, Iterable

from rmqpy.protocol import command as codec
from rmqpy.protocol.command import RPC_ONEWAY, FrameError, RemotingCommand

if TYPE_CHECKING:
    from rmqpy.remoting.protocol import RemotingProtocol

_OPAQUE = b'"opaque":'
_PREFIX = struct.Struct(">II")
#: bytes of answers kept; past it the memo starts again (the topics clients ask for are unbounded)
MAX_BYTES = 8 * 1024 * 1024
#: larger request frames are not keyed (a key copies the frame; a route lookup is ~150 bytes, a
#: broker registration may be megabytes)
MAX_KEYED_FRAME = 4096
#: what an entry holds besides its bytes (the entry, its key tuple, the decoded request and answer),
#: counted against :data:`MAX_BYTES` so that many small answers cannot hold much more than it
ENTRY_OVERHEAD = 1024


class _Entry:
    """An answer frame cut around its opaque digits, valid while its code's stamp is ``stamp``."""

    __slots__ = ("stamp_of", "stamp", "head", "tail", "total", "word", "request", "response")

    def __init__(self, stamp_of: Callable[[], object], stamp: object, frame: bytes, j: int, k: int,
                 request: RemotingCommand, response: RemotingCommand) -> None:
        self.stamp_of, self.stamp = stamp_of, stamp
        self.head, self.tail = frame[8:j], frame[k:]  # the header up to the digits; its rest and the body
        (length, word) = _PREFIX.unpack_from(frame, 0)
        width = k - j
        self.total, self.word = length - width, word - width  # the length words without the digits
        self.request, self.response = request, response  # what an rpc observer is told of a replay

    def frame(self, digits: bytes) -> bytes:
        n = len(digits)
        return _PREFIX.pack(self.total + n, self.word + n) + self.head + digits + self.tail


class Miss:
    """A keyed request that was not answered from the memo: its answer may be kept."""

    __slots__ = ("key", "frame", "start", "end", "request")

    def __init__(self, key: tuple[int, bytes], frame: bytes, start: int, end: int) -> None:
        self.key, self.frame, self.start, self.end = key, frame, start, end  # frame[start:end]: the digits
        self.request: RemotingCommand | None = None  # set once decoded


def _cut(frame: bytes, start: int, end: int) -> tuple[int, int] | None:
    """Where the digits of the one ``"opaque":`` in ``frame[start:end]`` are (a comma after them)."""
    i = frame.find(_OPAQUE, start, end)
    if i < 0:
        return None
    j = i + len(_OPAQUE)
    k = frame.find(b",", j, end)
    if k < 0 or not 0 < k - j <= 10 or frame.find(_OPAQUE, k, end) >= 0:
        return None
    digits = frame[j:k]
    if not digits.isdigit() or (digits[0] == 0x30 and k - j > 1):  # as %d writes them: no leading zero
        return None
    return j, k


def _other(digits: bytes) -> bytes:
    """Other digits of the same width, so that a probe keeps every other byte where it was."""
    return (b"1" if digits[:1] != b"1" else b"2") + digits[1:]


def _same_but_opaque(a: RemotingCommand, b: RemotingCommand) -> bool:
    return (a.code, a.language, a.version, a.flag, a.remark, a.ext_fields, a.body, a.serialize_type) == (
        b.code, b.language, b.version, b.flag, b.remark, b.ext_fields, b.body, b.serialize_type)


class ReplayMemo:
    """The answers kept by one dispatcher, for the request codes :meth:`enable` names."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._stamps: dict[int, Callable[[], object]] = {}
        self._answers: dict[tuple[int, bytes], _Entry] = {}
        self._bytes = 0
        #: a code is enabled: connections ask the memo about their frames
        self.active = False
        #: the request being dispatched, when the memo missed it (set by the connection)
        self.pending: Miss | None = None
        self.observer: Any = None  # the dispatcher's rpc observer, told of replays as of answers
        self.replayed = 0

    def enable(self, codes: Iterable[int], stamp_of: Callable[[], object]) -> None:
        """Keep the answers of ``codes``: each depends only on its request's bytes (the opaque
        aside) and on what ``stamp_of()`` returns, which changes whenever such an answer may."""
        for code in codes:
            self._stamps[int(code)] = stamp_of
        self.active = bool(self._stamps)

    def disable(self) -> None:
        self._stamps.clear()
        self.clear()
        self.active = False

    def clear(self) -> None:
        self._answers.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._answers)

    def stamp_of(self, code: int) -> Callable[[], object] | None:
        return self._stamps.get(code)

    # ------------------------------------------------------------------ the connection's side
    def answer(self, channel: "RemotingProtocol", frame: bytes) -> Miss | bool:
        """For one whole frame, length prefix included: True when answered from the memo; else a
        :class:`Miss` when its answer may be kept, False when it cannot."""
        if not 9 <= len(frame) <= MAX_KEYED_FRAME or frame[4] != 0:  # small JSON-header frames only
            return False
        end = 8 + ((frame[5] << 16) | (frame[6] << 8) | frame[7])
        cut = _cut(frame, 8, end)
        if cut is None:
            return False
        j, k = cut
        key = (end - k, frame[8:j] + frame[k:])  # where the header ends, and every byte but the digits
        entry = self._answers.get(key)
        if entry is not None:
            if entry.stamp_of() == entry.stamp:
                self.replayed += 1
                channel.transport.write(entry.frame(frame[j:k]))
                if self.observer is not None:
                    self.observer.record(entry.request, entry.response, channel.read_at, False)
                return True
            del self._answers[key]
            self._bytes -= len(key[1]) + len(entry.head) + len(entry.tail) + ENTRY_OVERHEAD
        return Miss(key, frame, j, k)

    # ------------------------------------------------------------------ the dispatcher's side
    def keep(self, miss: Miss, request: RemotingCommand, response: RemotingCommand,
             stamp_of: Callable[[], object], stamp: object) -> None:
        """Keep ``response``, the synchronous answer to the request ``miss`` stood for, when its
        digits are its opaque alone and the answer's template is exact."""
        frame, j, k = miss.frame, miss.start, miss.end
        digits = frame[j:k]
        if request.flag & RPC_ONEWAY or response.body_parts is not None or request.opaque != int(digits):
            return
        other = _other(digits)
        try:
            probe = codec.decode(memoryview(frame[:j] + other + frame[k:])[4:])
        except FrameError:
            return
        if probe.opaque != int(other) or not _same_but_opaque(probe, request):
            return
        encoded = codec.encode(response)
        rcut = _cut(encoded, 8, 8 + ((encoded[5] << 16) | (encoded[6] << 8) | encoded[7]))
        if encoded[4] != 0 or rcut is None or encoded[rcut[0]:rcut[1]] != digits:
            return
        entry = _Entry(stamp_of, stamp, encoded, rcut[0], rcut[1], request, response)
        opaque = response.opaque
        response.opaque = int(other)
        try:
            exact = codec.encode(response) == entry.frame(other)
        finally:
            response.opaque = opaque
        if not exact:
            return
        size = len(miss.key[1]) + len(entry.head) + len(entry.tail) + ENTRY_OVERHEAD
        if self._bytes + size > self.max_bytes:
            self.clear()
        self._answers[miss.key] = entry
        self._bytes += size
