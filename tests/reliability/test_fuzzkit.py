"""The fuzzer's own rules: which target a malformed head demands (and so which face's envelope), and
which answers need not be JSON (the web page's own files)."""

from __future__ import annotations

import httpx
import pytest

from engram_index.protocol import _REQUEST_LINE

from .faces import ENGRAM
from .faces_v5 import V5
from .fuzzkit import Call, Tally, judge, readable_target


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


def test_the_web_pages_own_files_are_not_taken_for_answers_that_should_be_json() -> None:
    page = b'<!doctype html>\n<html lang="en"><title>engram-index</title></html>'
    for face in (V5, ENGRAM):
        tally = Tally()
        assert judge(face, Call("GET", "/"), 200, page, tally, httpx.Headers({"content-type": "text/html"})) == []
        assert judge(face, Call("GET", "/console/app.css"), 200, b"body{}", tally,
                     httpx.Headers({"content-type": "text/css; charset=utf-8"})) == []
        assert tally.violations == []


def test_html_is_still_a_violation_anywhere_but_the_web_pages_files() -> None:
    page = b"<!doctype html><html></html>"
    html = httpx.Headers({"content-type": "text/html"})
    # A route of a face, and the page's own path answered as something that is not a page.
    assert "body is not JSON" in judge(V5, Call("GET", "/ns/a/search"), 200, page, Tally(), html)
    assert "body is not JSON" in judge(V5, Call("GET", "/"), 200, page, Tally(),
                                       httpx.Headers({"content-type": "application/json"}))
    assert "body is not JSON" in judge(V5, Call("POST", "/"), 405, page, Tally(), html)
