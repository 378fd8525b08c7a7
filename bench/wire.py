"""A lean HTTP/1.1 client for the benches: prepared requests over one keep-alive socket.

A served request's latency as a client sees it includes the client's own work. httpx spends
about half a millisecond of Python a request on building it and reading the answer (`python
bench/client_cost.py` on an AVX2 AMD EPYC, two runs: p50 0.775 and 0.705 ms through httpx against
0.218 and 0.189 through this, one trivial local route), and on a two-core machine that work also
competes with the server's threads. The benches that time a face's served
requests send bytes built beforehand and read the answer whole, so that what they time is the
server's, and parse the answer afterwards if they need it.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from urllib.parse import urlsplit


class Connection:
    """One keep-alive HTTP/1.1 connection that sends prepared requests and reads whole responses."""

    def __init__(self, port: int) -> None:
        """Connect to the server on the loopback port."""
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def get(self, request: bytes) -> int:
        """Send one request and read its response; returns the status code."""
        return self.send(request)[0]

    def send(self, request: bytes) -> tuple[int, bytes]:
        """Send one request and read its response (a Content-Length body): its status code and body."""
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buffer:
            self._read()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length:"))
        while len(self.buffer) < length:
            self._read()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split(b" ", 2)[1]), body

    def _read(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def post(path: str, body: bytes, headers: Mapping[str, str]) -> bytes:
    """The bytes of a POST of `body` (JSON) to `path` with these headers."""
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n{head}"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


def port_of(url: str) -> int:
    """The port of a loopback base URL (http://127.0.0.1:PORT)."""
    port = urlsplit(url).port
    if port is None:
        raise ValueError(f"no port in {url}")
    return port
