"""How the connection reads requests (llhttp) and frames answers, driven over an in-memory transport.

Where llhttp and h11 (the parser before it) differ, the connection keeps h11's answers: a value's
surrounding whitespace dropped, trailers not taken as header fields, a transfer coding other than
chunked refused, pipelined requests answered in order.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.server import ServerState

from engram_index.protocol import JsonHttpProtocol, ServeConfig
from tests.test_http_internals import _Transport



class _Closable(_Transport):
    """A connection that says whether the server closed it."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


async def _echo(scope: Any, receive: Any, send: Any) -> None:
    """An app answering with what it read: its path, query, header fields and body."""
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    answer = json.dumps({"path": scope["path"], "query": scope["query_string"].decode(),
                         "headers": [[n.decode(), v.decode("latin-1")] for n, v in scope["headers"]],
                         "body": body.decode("latin-1")}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]})
    await send({"type": "http.response.body", "body": answer})


async def _stream(scope: Any, receive: Any, send: Any) -> None:
    """An app streaming its answer (no declared length)."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"part", "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _exchange(app: Any, *pieces: bytes) -> tuple[bytes, bool]:
    """Feed the pieces to a connection serving `app`; what it wrote, and whether it began to close."""

    async def run() -> tuple[bytes, bool]:
        config = ServeConfig(app, lifespan="off", log_level="warning")
        config.load()
        conn = JsonHttpProtocol(config, ServerState(), {}, asyncio.get_running_loop())
        transport = _Closable()
        conn.connection_made(transport)
        for piece in pieces:
            conn.data_received(piece)
            for _ in range(20):
                await asyncio.sleep(0)
        closing = conn.closing()
        conn.connection_lost(None)
        return transport.written, closing

    return asyncio.run(run())


def _answers(written: bytes) -> list[tuple[bytes, Any]]:
    """Each response's head and JSON body, in order."""
    out = []
    while written:
        head, _, rest = written.partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
        out.append((head, json.loads(rest[:length])))
        written = rest[length:]
    return out


def test_a_header_value_reaches_the_app_without_the_whitespace_around_it() -> None:
    written, _ = _exchange(_echo, b"GET /x HTTP/1.1\r\nHost: a\r\nX-Key:  value \t \r\n\r\n")
    [(_, answer)] = _answers(written)
    assert ["x-key", "value"] in answer["headers"] and ["host", "a"] in answer["headers"]


def test_a_long_target_reaches_the_app_whole_with_its_query_string() -> None:
    query = "vector=" + "A" * 100_000 + "&q=a%20b"
    written, _ = _exchange(_echo, f"GET /xrpc/x%2Dy?{query} HTTP/1.1\r\nHost: a\r\n\r\n".encode())
    [(head, answer)] = _answers(written)
    assert head.startswith(b"HTTP/1.1 200 ") and answer["path"] == "/xrpc/x-y" and answer["query"] == query


def test_a_target_and_a_head_split_across_many_reads_are_read_whole() -> None:
    request = b"POST /a/b?c=d HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX-Long: " + b"v" * 3000 + b"\r\n\r\nhello"
    written, _ = _exchange(_echo, *[request[i:i + 7] for i in range(0, len(request), 7)])
    [(_, answer)] = _answers(written)
    assert answer["path"] == "/a/b" and answer["query"] == "c=d" and answer["body"] == "hello"
    assert ["x-long", "v" * 3000] in answer["headers"]


def test_a_chunked_body_is_read_and_its_trailer_fields_are_not_taken_as_header_fields() -> None:
    written, _ = _exchange(_echo, b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  b"3\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n")
    [(_, answer)] = _answers(written)
    assert answer["body"] == "abcde" and not [h for h in answer["headers"] if h[0] == "x-trailer"]


def test_a_transfer_coding_ending_in_chunked_is_refused_as_h11_refused_it() -> None:
    written, closing = _exchange(_echo, b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                                        b"0\r\n\r\n")
    assert written.startswith(b"HTTP/1.1 400 ") and b"Transfer-Encoding" in written and closing


def test_pipelined_requests_are_answered_in_order_on_one_connection() -> None:
    one = b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
    two = b"POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
    written, closing = _exchange(_echo, one + two + b"GET /3 HTTP/1.1\r\nHost: a\r\n\r\n")
    answers = _answers(written)
    assert [a["path"] for _, a in answers] == ["/1", "/2", "/3"] and answers[1][1]["body"] == "abc"
    assert not closing


def test_a_malformed_request_pipelined_behind_a_good_one_is_refused_after_the_good_ones_answer() -> None:
    written, closing = _exchange(_echo, b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\n\r\n")
    head, _, rest = written.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b'"/1"' in rest
    assert b"HTTP/1.1 400 " in rest and b"Host" in rest and closing


def test_a_request_that_asks_to_close_is_answered_with_connection_close_and_closed() -> None:
    written, closing = _exchange(_echo, b"GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    [(head, _)] = _answers(written)
    assert head.endswith(b"\r\nConnection: close") and closing  # as h11 wrote it


def test_an_upgrade_request_is_answered_as_plain_http_and_the_connection_then_closes() -> None:
    written, closing = _exchange(_echo, b"GET /x HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n")
    [(head, answer)] = _answers(written)
    assert head.startswith(b"HTTP/1.1 200 ") and answer["path"] == "/x" and closing


def test_a_streamed_answer_is_chunked_for_http_1_1_and_read_to_the_close_for_http_1_0() -> None:
    written, _ = _exchange(_stream, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    assert b"Transfer-Encoding: chunked\r\n\r\n4\r\npart\r\n0\r\n\r\n" in written  # as h11 wrote it
    written, closing = _exchange(_stream, b"GET / HTTP/1.0\r\n\r\n")
    assert written.endswith(b"Connection: close\r\n\r\npart") and b"chunked" not in written and closing


def test_any_token_is_a_method_as_h11_took_it_even_one_that_arrives_in_pieces() -> None:
    async def method(scope: Any, receive: Any, send: Any) -> None:
        body = scope["method"].encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})

    for request in (b"FOO /x HTTP/1.1\r\nHost: a\r\n\r\n", b"get /x HTTP/1.1\r\nHost: a\r\n\r\n",
                    b"CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n", b"M-SEARCH /x HTTP/1.1\r\nHost: a\r\n\r\n"):
        written, closing = _exchange(method, request[:2], request[2:5], request[5:])
        assert written.startswith(b"HTTP/1.1 200 ") and written.endswith(b"\r\n\r\n" + request.split(b" ")[0])
        assert not closing
    written, _ = _exchange(method, b"G\x00T /x HTTP/1.1\r\nHost: a\r\n\r\n")
    assert written.startswith(b"HTTP/1.1 400 ")


def test_a_body_still_coming_after_an_early_answer_is_read_and_dropped_and_the_next_request_is_served() -> None:
    async def early(scope: Any, receive: Any, send: Any) -> None:  # answers without reading the body (a 413)
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    state: dict[str, Any] = {}

    async def run() -> bytes:
        config = ServeConfig(early, lifespan="off", log_level="warning")
        config.load()
        conn = JsonHttpProtocol(config, ServerState(), {}, asyncio.get_running_loop())
        transport = state["transport"] = _Closable()
        conn.connection_made(transport)
        head = b"POST /big HTTP/1.1\r\nHost: a\r\nContent-Length: 300000\r\n\r\n"
        for piece in (head + b"x" * 100_000, b"x" * 100_000, b"x" * 100_000, b"GET /next HTTP/1.1\r\nHost: a\r\n\r\n"):
            assert transport.is_reading(), "the connection stopped reading a body nobody will read"
            conn.data_received(piece)
            for _ in range(20):
                await asyncio.sleep(0)
        conn.connection_lost(None)
        return transport.written

    written = asyncio.run(run())
    assert written.count(b"HTTP/1.1 413 ") == 2 and state["transport"].is_reading()


def test_an_app_that_fails_or_gives_no_answer_gets_a_500_in_the_envelope_and_the_connection_closes() -> None:
    async def silent(scope: Any, receive: Any, send: Any) -> None:
        return None

    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("boom")

    for app in (silent, broken):
        written, closing = _exchange(app, b"GET /xrpc/x HTTP/1.1\r\nHost: a\r\n\r\n")
        head, _, body = written.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 500 ") and b"content-type: application/json" in head, written
        assert json.loads(body)["error"] == "internal" and closing
