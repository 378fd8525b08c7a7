"""A v5 search answering fewer results than its limit says why (whyFewer), and the official SDK keeps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from supermemory import Supermemory

from engram_index.embed.hashing import HashingEmbedder

from .conftest import Server, add_done, running

TEA = "Alice drinks green tea every morning."


def why(response: Any) -> dict[str, Any]:
    """The explanation, as the SDK's response model keeps an extra field."""
    extra = response.model_extra or {}
    assert "whyFewer" in extra, extra
    found: dict[str, Any] = extra["whyFewer"]
    return found


def test_a_full_answer_carries_no_explanation(client: Supermemory, ns: str) -> None:
    add_done(client, ns, TEA)
    response = client.search(ns, query="green tea", threshold=0, limit=1)
    assert len(response.results) == 1
    assert "whyFewer" not in (response.model_extra or {})


def test_an_empty_namespace_says_it_holds_nothing(client: Supermemory, ns: str) -> None:
    response = client.search(ns, query="green tea")
    assert response.results == []
    assert why(response) == {"collection": ns, "items": 0, "filters": [], "thresholdCut": 0, "loading": False,
                             "message": f"{ns} holds nothing yet"}


def test_a_filter_that_removes_all_is_named(client: Supermemory, ns: str) -> None:
    add_done(client, ns, TEA, metadata={"team": "a"})
    response = client.search(ns, query="green tea", threshold=0,
                             filter={"field": "team", "operator": "eq", "value": "b"})
    assert response.results == []
    found = why(response)
    assert found["items"] >= 2  # the document's memory and its chunk
    assert found["filters"] == [{"filter": 'filter={"field":"team","operator":"eq","value":"b"}', "left": 0}]
    assert found["message"].startswith('the filter filter={"field":"team"')


def test_a_filter_some_pass_counts_what_it_left(client: Supermemory, ns: str) -> None:
    add_done(client, ns, TEA, metadata={"team": "a"})
    add_done(client, ns, "Bob prefers coffee.", metadata={"team": "b"})
    response = client.search(ns, query="green tea", threshold=0, search_mode="chunks",
                             filter={"field": "team", "operator": "eq", "value": "a"})
    found = why(response)
    assert found["items"] == 2 and found["filters"][0]["left"] == 1


def test_a_threshold_that_cuts_all_says_how_many_it_cut(client: Supermemory, ns: str) -> None:
    add_done(client, ns, TEA)
    response = client.search(ns, query="green tea and coffee", threshold=1)
    assert response.results == []
    found = why(response)
    assert found["thresholdCut"] >= 1
    assert found["message"] == f"the score threshold cut all {found['thresholdCut']} results that matched"


def test_documents_still_processing_are_reported_as_loading(tmp_path: Path) -> None:
    with running(tmp_path, HashingEmbedder(64)) as server:
        srv: Server = server
        srv.app.state.supermemory_pipeline.stop()  # nothing is processed: the document stays queued
        client = srv.client()
        client.add("late", content=TEA)
        found = why(client.search("late", query="green tea"))
        assert found["loading"] is True
        assert found["message"].endswith("1 acknowledged writes are still being processed: retry shortly")
