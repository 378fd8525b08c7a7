"""The garden face's admission comes before the work: a refusal is cheap and says when to retry."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.limits import roomy_app
from engram_index.collections import Collections
from engram_index.engine.types import Document, ModelIdentity
from engram_index.engram.api.limits import SpaceLimits
from engram_index.engram.auth import InsecureOpen
from engram_index.store.sqlite import StoredDocument

from .server import serving

SPACE = "at://did:plc:admit234admit234admit234ad/space/garden.engram.space/s"
SEARCH = "/xrpc/garden.engram.searchMemories"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    spaces = Collections(tmp_path)
    spaces.ensure_collection(SPACE, ModelIdentity("m", "d", 4))
    spaces.write(SPACE, [StoredDocument(Document(id=f"{SPACE}/did:plc:a/garden.engram.memory/x", author="did:plc:a",
                                                  text="hello world", created_ms=1))])
    spaces.close()
    return tmp_path


def _loaded(url: str) -> None:
    """Wait (spending no tokens: getSpaceStatus is not admitted) until the index is loaded."""
    while httpx.get(f"{url}/xrpc/garden.engram.getSpaceStatus", params={"space": SPACE}).json().get("building"):
        time.sleep(0.05)


def test_a_refused_search_says_when_to_retry_in_whole_seconds(data: Path) -> None:
    app = roomy_app(data, "did:web:x", authenticator=InsecureOpen(), limits=SpaceLimits(rate=0.1, burst=1))
    with serving(app) as url:
        _loaded(url)
        answers = [httpx.get(url + SEARCH, params={"space": SPACE, "q": "hello", "mode": "keyword"})
                   for _ in range(3)]
    assert [a.status_code for a in answers[1:]] == [429, 429]
    refused = answers[2]
    assert refused.json()["error"] == "RateLimitExceeded"
    assert refused.headers["Retry-After"].isdigit() and 1 <= int(refused.headers["Retry-After"]) <= 10


def test_a_search_past_the_rate_is_refused_before_its_parameters_are_parsed(data: Path) -> None:
    app = roomy_app(data, "did:web:x", authenticator=InsecureOpen(), limits=SpaceLimits(rate=0.1, burst=1))
    with serving(app) as url:
        _loaded(url)
        bad = {"space": SPACE, "q": "hello", "vector": "!!not base64!!", "model": "m", "modelDigest": "d"}
        first = httpx.get(url + SEARCH, params=bad)
        second = httpx.get(url + SEARCH, params=bad)
    assert first.status_code == 400  # the token was there: the vector was decoded, and refused
    assert second.status_code == 429 and second.json()["error"] == "RateLimitExceeded"  # no decode at all
