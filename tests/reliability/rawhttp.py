"""Raw HTTP/1.1 over a socket, for requests no client library would send (loopback only)."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class RawResponse:
    """What came back: the status (0 when none), the header fields, the body, how the connection ended."""

    status: int
    headers: dict[str, str]
    body: bytes
    reset: bool  # the connection was reset instead of closed

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)


def connect(url: str, timeout: float = 10.0) -> socket.socket:
    """A TCP connection to the loopback server at `url`."""
    parts = urlsplit(url)
    assert parts.hostname in ("127.0.0.1", "::1", "localhost"), "only loopback servers are targeted"
    sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout)
    return sock


def read_response(sock: socket.socket, timeout: float = 10.0) -> RawResponse:
    """Read one response (by Content-Length) or until the server closes; bounded by `timeout`."""
    data, reset = b"", False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = _content_length(head)
            if length is not None and len(rest) >= length:
                break
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            reset = True
            break
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return parse(data, reset)


def exchange(url: str, request: bytes, timeout: float = 10.0) -> RawResponse:
    """Send raw bytes on a fresh connection and read what comes back."""
    with connect(url, timeout) as sock:
        try:
            sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            return RawResponse(0, {}, b"", True)
        return read_response(sock, timeout)


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes the connection within `timeout` (reading and dropping what it sends)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
    return False


def parse(data: bytes, reset: bool = False) -> RawResponse:
    """Split raw response bytes into status, header fields and body."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split(b" ")[1])
    except (IndexError, ValueError):
        return RawResponse(0, {}, data, reset)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    length = _content_length(head)
    return RawResponse(status, headers, body[:length] if length is not None else body, reset)


def _content_length(head: bytes) -> int | None:
    """The Content-Length of a response head, if it has one."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None
