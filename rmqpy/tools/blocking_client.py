"""A small blocking remoting client for scripts, benchmarks and tests (not for servers)."""
from __future__ import annotations

import socket
import struct

from rmqpy.protocol import command as codec
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.protocol import next_opaque


class BlockingClient:
    def __init__(self, addr: str, timeout: float = 5.0) -> None:
        host, _, port = addr.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def invoke(self, request: RemotingCommand) -> RemotingCommand:
        request.opaque = next_opaque()
        self.sock.sendall(codec.encode(request))
        while True:
            response = self.read()
            if response.is_response and response.opaque == request.opaque:
                return response

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> RemotingCommand:
        (length,) = struct.unpack(">I", self._exactly(4))
        return codec.decode(self._exactly(length))

    def _exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the server")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "BlockingClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
