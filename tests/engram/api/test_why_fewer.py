"""garden.engram.searchMemories says why it returned fewer memories than its limit (whyFewer)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engram_index.collections import Collections
from engram_index.engine.types import Document
from engram_index.engram.api.lexicon import Lexicons
from engram_index.engram.auth import InsecureOpen
from engram_index.store.sqlite import StoredDocument

from tests.limits import roomy_app

from .server import serving, wait_until_loaded

AUTHORITY = "did:plc:whyfewer2whyfewer2whyfew"
SPACE = f"at://{AUTHORITY}/space/garden.engram.space/full"
EMPTY = f"at://{AUTHORITY}/space/garden.engram.space/empty"
LEXICONS = Lexicons.bundled()


def doc(i: int, space: str = SPACE) -> StoredDocument:
    """A memory about tea, by alice, tagged drinks (and morning for even ones)."""
    return StoredDocument(Document(
        id=f"{space}/did:plc:alice/garden.engram.memory/r{i:03d}", author="did:plc:alice",
        text=f"alice drinks green tea {i}", tags=("drinks",) + (("morning",) if i % 2 == 0 else ()),
        created_ms=1_700_000_000_000 + i, metadata={"cid": "bafyreiexample"}))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    data = tmp_path_factory.mktemp("data")
    spaces = Collections(data)
    spaces.ensure_collection(SPACE)
    spaces.ensure_collection(EMPTY)
    spaces.write(SPACE, [doc(i) for i in range(6)])
    spaces.close()
    app = roomy_app(data, "did:web:index.example", authenticator=InsecureOpen())
    with serving(app) as base:
        wait_until_loaded(base, SPACE, EMPTY)
        yield base, app


def search(base: str, **params: Any) -> dict[str, Any]:
    """A keyword search's answer, checked against the lexicon's output schema."""
    answer = httpx.get(f"{base}/xrpc/garden.engram.searchMemories", params={"mode": "keyword", **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert LEXICONS.output_errors("garden.engram.searchMemories", body) == []  # an open object: extras allowed
    return body


def test_a_full_answer_carries_no_explanation(served: tuple[str, Any]) -> None:
    body = search(served[0], space=SPACE, q="tea", limit=3)
    assert len(body["memories"]) == 3 and "whyFewer" not in body


def test_an_empty_space_says_it_holds_nothing(served: tuple[str, Any]) -> None:
    why = search(served[0], space=EMPTY, q="tea")["whyFewer"]
    assert why == {"collection": EMPTY, "items": 0, "filters": [], "thresholdCut": 0, "loading": False,
                   "message": f"{EMPTY} holds nothing yet"}


def test_a_filter_that_removes_all_is_named_with_what_each_filter_left(served: tuple[str, Any]) -> None:
    body = search(served[0], space=SPACE, q="tea", tags=["morning", "evening"], author="did:plc:alice")
    assert body["memories"] == []
    why = body["whyFewer"]
    assert why["items"] == 6
    assert why["filters"] == [{"filter": "author=did:plc:alice", "left": 6}, {"filter": "tags=morning", "left": 3},
                              {"filter": "tags=evening", "left": 0}]
    assert why["message"] == "the filter tags=evening left none of the 6 items"


def test_a_query_matching_few_says_how_many_passed_the_filters(served: tuple[str, Any]) -> None:
    body = search(served[0], space=SPACE, q="tea", tags=["morning"], since="2023-11-14T22:13:20.002Z", limit=10)
    assert len(body["memories"]) == 2  # r002 and r004
    why = body["whyFewer"]
    assert why["filters"] == [{"filter": "tags=morning", "left": 3},
                              {"filter": "since=2023-11-14T22:13:20.002Z", "left": 2}]
    assert why["message"] == "only 2 of the 2 items that pass the filters matched the query"


def test_an_index_behind_its_acknowledged_writes_says_it_is_loading(served: tuple[str, Any],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    base, app = served
    spaces = app.state.spaces
    # Over PostgreSQL the node tails the store's writes: hold that off, as for another node's write in flight.
    monkeypatch.setattr(spaces, "refresh", lambda uri: 0)
    late = f"at://{AUTHORITY}/space/garden.engram.space/late"
    spaces.ensure_collection(late)
    spaces.index(late)
    # Written to the store alone, as by the writer beside a reader: acknowledged, not yet in this index.
    spaces.store.write(spaces.info(late).id, [doc(0, late)])
    why = search(base, space=late, q="tea")["whyFewer"]
    assert why["loading"] is True and why["items"] == 0
    assert why["message"].endswith("the index is still catching up with acknowledged writes: retry shortly")
