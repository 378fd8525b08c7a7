"""A malformed request head under the v5 prefixes is answered in v5's ErrorResponse (found by the fuzzer)."""

from __future__ import annotations

import pytest

from tests.reliability.rawhttp import exchange
from tests.supermemory.conftest import Server


@pytest.mark.parametrize("path", ["/ns/notes/search", "/namespaces", "/organization", "/feedback"])
def test_a_malformed_head_under_a_v5_path_gets_an_error_response_not_an_xrpc_envelope(server: Server,
                                                                                    path: str) -> None:
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\nContent-Length: x\r\n\r\n".encode()
    response = exchange(server.url, head)
    assert response.status == 400 and not response.reset
    body = response.json()
    assert set(body) <= {"error", "details"} and isinstance(body["error"], str), body
