"""A recording TCP proxy for remoting traffic: splits both directions into frames.

Used once to capture golden frames from the real Java broker, clients and mqadmin
(``tests/interop/capture_golden.py``); the frames are kept under ``tests/data/golden``.
"""
from __future__ import annotations

import socket
import struct
import threading

TO_SERVER, TO_CLIENT = 0, 1


class RecordingProxy:
    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int], tag: str) -> None:
        self.upstream, self.tag = upstream, tag
        self.frames: list[tuple[str, int, int, bytes]] = []  # tag, connection, direction, frame
        self._lock = threading.Lock()
        self._server = socket.create_server(listen)
        self._conns = 0
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            self._conns += 1
            conn = self._conns
            for src, dst, direction in ((client, upstream, TO_SERVER), (upstream, client, TO_CLIENT)):
                threading.Thread(target=self._pump, args=(src, dst, conn, direction), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, conn: int, direction: int) -> None:
        buf = bytearray()
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                buf += data
                while len(buf) >= 4:
                    (n,) = struct.unpack_from(">I", buf)
                    if len(buf) < 4 + n:
                        break
                    with self._lock:
                        self.frames.append((self.tag, conn, direction, bytes(buf[:4 + n])))
                    del buf[:4 + n]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closing = True
        self._server.close()


def write_frames(path, frames) -> None:
    """Records: u8 tag length, tag, u32 connection, u8 direction, then the frame (length-prefixed)."""
    with open(path, "wb") as fh:
        for tag, conn, direction, frame in frames:
            t = tag.encode()
            fh.write(struct.pack(">B", len(t)) + t + struct.pack(">IB", conn, direction) + frame)


def read_frames(path):
    data = open(path, "rb").read()
    pos, out = 0, []
    while pos < len(data):
        tlen = data[pos]
        tag = data[pos + 1:pos + 1 + tlen].decode()
        pos += 1 + tlen
        conn, direction = struct.unpack_from(">IB", data, pos)
        pos += 5
        (n,) = struct.unpack_from(">I", data, pos)
        out.append((tag, conn, direction, data[pos:pos + 4 + n]))
        pos += 4 + n
    return out
