"""An answer given before the body is read reaches clients that send the whole body first (a lingering close).

Python's urllib, like many simple clients, writes its whole request before it reads a byte of the
answer. When the server answers early (413 for a body over the limit, 401 before the body, 431 for a
head too large) and closes at once, the unread bytes make the kernel send a reset, and such a client
sees ConnectionResetError instead of the answer. Each face's answer must reach it, in its envelope.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.limits import KeyedServer, keyed_server

BIG_BODY = b"[" + b"1," * (10 * 1024 * 1024) + b"1]"  # 20 MiB of valid JSON, over every face's body limit


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedServer]:
    with keyed_server(tmp_path_factory.mktemp("early")) as running:
        yield running


def body_first(url: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """Send a request the urllib way (the whole body, then read) and return the status and JSON answer."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_body_first_client_reads_kindgis_413_for_a_20_mib_retrieve(served: KeyedServer) -> None:
    status, answer = body_first(f"{served.url}/v1/memory/retrieve", BIG_BODY, {
        "authorization": f"Bearer {served.kindgi_key}", "content-type": "application/json"})
    assert status == 413
    assert answer["error"]["code"] == "request-too-large" and answer["error"]["requestId"]


def test_a_body_first_client_reads_v5s_413_for_a_20_mib_search(served: KeyedServer) -> None:
    status, answer = body_first(f"{served.url}/ns/notes/search", BIG_BODY, {
        "authorization": f"Bearer {served.v5_key}", "content-type": "application/json"})
    assert status == 400  # v5 answers a body over its limit as its other bad requests
    assert answer["success"] is False and "16 MB" in answer["error"][0]["message"]


def test_a_body_first_client_reads_kindgis_401_sent_before_the_body(served: KeyedServer) -> None:
    status, answer = body_first(f"{served.url}/v1/memory/retrieve", BIG_BODY[: 4 * 1024 * 1024] + b"]", {
        "authorization": "Bearer not-a-key", "content-type": "application/json"})
    assert status == 401
    assert answer["error"]["code"] == "auth-missing"


def test_a_body_first_client_reads_the_431_for_a_300_kib_header_on_xrpc(served: KeyedServer) -> None:
    status, answer = body_first(f"{served.url}/xrpc/garden.engram.searchMemories?space=x&q=y", None,
                                {"x-padding": "p" * (300 * 1024)})
    assert status == 431
    assert answer["error"] == "PayloadTooLarge" and "request head" in answer["message"]
