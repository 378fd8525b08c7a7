"""The fuzzer's own reading of malformed heads: which target (and so which face's envelope) it demands."""

from __future__ import annotations

import pytest

from engram_index.protocol import _REQUEST_LINE

from .fuzzkit import readable_target


@pytest.mark.parametrize(("head", "target"), [
    (b"GET /ns/a/search HTTP/2\r\n\r\n", "/ns/a/search"),
    (b"POST /v1/memory/facts\xff\x00junk HTTP/1.1\r\n\r\n", "/v1/memory/facts"),
    (b"get /ns?x=1 HTTP/1.1\n\n", "/ns?x=1"),
    (b"G\x00T /ns/a/search HTTP/1.1\r\n\r\n", ""),  # no method token: nothing to read
    (b" /ns/a/search HTTP/1.1\r\n\r\n", ""),
    (b"GET ns/a HTTP/1.1\r\n\r\n", ""),  # not origin-form
    (b"GET  /ns/a HTTP/1.1\r\n\r\n", ""),
    (b"", ""),
])
def test_a_malformed_heads_target_is_read_as_the_server_reads_it(head: bytes, target: str) -> None:
    assert readable_target(head) == target
    served = _REQUEST_LINE.match(head)
    assert (served.group(1).decode() if served else "") == target
