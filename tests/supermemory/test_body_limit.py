"""v5 refuses a JSON body over its limit without holding it all in memory first (found beside the body deadline)."""

from __future__ import annotations

import json
import socket
from typing import Any

from engram_index.supermemory.http import MAX_JSON_BYTES, MAX_MULTIPART_BYTES
from tests.reliability.rawhttp import connect, read_response
from tests.supermemory.conftest import Server


def post_head(server: Server, length: int, extra: str = "") -> bytes:
    """A search POST head under the server's key, announcing `length` body bytes (or chunked)."""
    framing = f"content-length: {length}" if length >= 0 else "transfer-encoding: chunked"
    return (f"POST /ns/notes/search HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {server.key}\r\n"
            f"content-type: application/json\r\n{framing}\r\n{extra}\r\n").encode()


def send_chunks_past(sock: socket.socket, limit: int) -> None:
    """Send 1 MiB chunks of a chunked body until just past `limit` bytes (or the server closes)."""
    piece = b" " * (1024 * 1024)
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    sent = 0
    try:
        while sent <= limit + len(piece):  # the body never ends
            sock.sendall(chunk)
            sent += len(piece)
    except (BrokenPipeError, ConnectionResetError):
        pass


def message(body: Any) -> str:
    """The message of either of v5's 400 bodies (ValidationErrorResponse or ErrorResponse)."""
    if body.get("success") is False:
        return " ".join(item["message"] for item in body["error"])
    return str(body["error"])


def test_a_json_body_declared_over_the_limit_is_refused_before_it_is_read(server: Server) -> None:
    with connect(server.url) as sock:
        sock.sendall(post_head(server, MAX_JSON_BYTES + 1) + b'{"query": "x"')  # the rest never comes
        response = read_response(sock, timeout=10)
    assert response.status == 400, response
    assert "16 MB" in message(response.json())


def test_a_chunked_json_body_is_refused_once_it_passes_the_limit(server: Server) -> None:
    with connect(server.url) as sock:
        sock.sendall(post_head(server, -1) + b'7\r\n{"a": 1\r\n')
        send_chunks_past(sock, MAX_JSON_BYTES)
        response = read_response(sock, timeout=10)
    assert response.status == 400, response
    assert "16 MB" in message(response.json())


def test_a_json_body_at_the_limit_is_still_read(server: Server) -> None:
    body = json.dumps({"query": "bike", "limit": 5}).encode()
    body += b" " * (MAX_JSON_BYTES - len(body))
    with connect(server.url) as sock:
        sock.sendall(post_head(server, len(body)) + body)
        response = read_response(sock, timeout=60)
    assert response.status == 200, response


def test_a_chunked_upload_is_refused_once_it_passes_the_upload_limit_instead_of_filling_the_disk(
        server: Server) -> None:
    boundary = "engramlimit"
    head = (f"POST /ns/notes/document/file HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {server.key}\r\n"
            f"content-type: multipart/form-data; boundary={boundary}\r\ntransfer-encoding: chunked\r\n\r\n").encode()
    start = (f"--{boundary}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"big.txt\"\r\n"
             "content-type: text/plain\r\n\r\n").encode()
    with connect(server.url) as sock:
        sock.sendall(head + f"{len(start):x}\r\n".encode() + start + b"\r\n")
        send_chunks_past(sock, MAX_MULTIPART_BYTES)  # the file's bytes; the form never ends
        response = read_response(sock, timeout=30)
    assert response.status == 400, response
    assert "60 MB" in message(response.json())
