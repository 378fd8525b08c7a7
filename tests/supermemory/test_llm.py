"""The LLM path through the official SDK, against a fake OpenAI-compatible server over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from supermemory import Supermemory

from engram_index.embed.hashing import HashingEmbedder
from engram_index.llm.openai_compat import llm_from_spec
from engram_index.rerank import reranker_from_spec
from engram_index.testkit.fake_llm import FakeLLM, fake_llm_server
from tests.supermemory.conftest import Server, add_done, running, wait_done


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    """One fake LLM (with /rerank) per module."""
    with fake_llm_server() as served:
        yield served


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM) -> Iterator[Server]:
    """A server with --llm and --rerank pointing at the fake."""
    llm = llm_from_spec(f"fake-model@{fake.url}")
    with running(tmp_path_factory.mktemp("v5llm"), HashingEmbedder(256), llm=llm,
                 reranker=reranker_from_spec(f"url:{fake.rerank_url}")) as srv:
        yield srv


@pytest.fixture(scope="module")
def llm_only_server(tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM) -> Iterator[Server]:
    """A server with --llm and no reranker (rerank order falls back to the LLM)."""
    with running(tmp_path_factory.mktemp("v5llmonly"), HashingEmbedder(256),
                 llm=llm_from_spec(f"fake-model@{fake.url}")) as srv:
        yield srv


@pytest.fixture
def llm_client(llm_server: Server) -> Supermemory:
    return llm_server.client()


def _memories(client: Supermemory, ns: str) -> dict[str, Any]:
    """Every memory of the namespace by its text."""
    return {m.memory: m for m in client.list(ns, "memories", limit=100, include={"forgotten": True}).memories}


def test_the_llm_forms_memories_and_judges_updates_across_documents(llm_client: Supermemory, ns: str,
                                                                   fake: FakeLLM) -> None:
    add_done(llm_client, ns, "My car is red. I was born in Lyon.")
    first = _memories(llm_client, ns)
    assert set(first) == {"My car is red.", "I was born in Lyon."}
    assert first["I was born in Lyon."].is_static and not first["My car is red."].is_static
    add_done(llm_client, ns, "My car is blue.")
    now = _memories(llm_client, ns)
    assert now["My car is blue."].version == 2 and now["My car is blue."].is_latest
    assert not now["My car is red."].is_latest and now["I was born in Lyon."].is_latest
    blue = llm_client.memories.get(ns, now["My car is blue."].id, include="related")
    assert [(p.memory, p.relation) for p in blue.included.related.parents] == [("My car is red.", "updates")]
    found = llm_client.search(ns, query="car colour red blue", search_mode="memories", threshold=0).results
    assert "My car is red." not in [r.memory for r in found]
    assert any("Known memories" in str(r) for r in fake.requests)


def test_extends_and_derives_become_siblings_and_inferences(llm_client: Supermemory, ns: str) -> None:
    add_done(llm_client, ns, "The garden has tomatoes.")
    add_done(llm_client, ns, "Also the garden has basil. Therefore the garden needs water.")
    rows = _memories(llm_client, ns)
    assert rows["Therefore the garden needs water."].is_inference
    assert not rows["Also the garden has basil."].is_inference
    tomatoes = llm_client.memories.get(ns, rows["The garden has tomatoes."].id, include="related")
    assert {(s.memory, s.relation) for s in tomatoes.included.related.siblings} == {
        ("Also the garden has basil.", "extends"), ("Therefore the garden needs water.", "derives")}
    result = llm_client.search(ns, query="garden water", search_mode="memories", threshold=0).results
    assert any(r.is_inference for r in result if r.memory == "Therefore the garden needs water.")


def test_related_memories_must_match_the_search_filter(llm_client: Supermemory, ns: str) -> None:
    add_done(llm_client, ns, "My phone is old.", metadata={"source": "a"})
    add_done(llm_client, ns, "My phone is new.", metadata={"source": "b"})
    flt = {"field": "source", "operator": "eq", "value": "b"}
    hit = llm_client.search(ns, query="phone", search_mode="memories", threshold=0, filter=flt,
                            include={"related": True}).results
    assert [r.memory for r in hit] == ["My phone is new."] and hit[0].included.related.parents == []
    unfiltered = llm_client.search(ns, query="phone", search_mode="memories", threshold=0,
                                   include={"related": True}).results
    assert [p.memory for p in unfiltered[0].included.related.parents] == ["My phone is old."]


def test_rewrite_query_runs_the_rewrites_and_merges_their_results(llm_client: Supermemory, ns: str,
                                                                 fake: FakeLLM) -> None:
    add_done(llm_client, ns, "Penguins live in Antarctica. Camels cross deserts.")
    fake.requests.clear()
    plain = llm_client.search(ns, query="where do penguins live", search_mode="memories").results
    rewritten = llm_client.search(ns, query="where do penguins live", search_mode="memories",
                                  rewrite_query=True).results
    assert rewritten[0].memory == "Penguins live in Antarctica." == plain[0].memory
    assert sum("rewrite-query" in str(r) for r in fake.requests) == 1


def test_rerank_order_uses_the_rerank_endpoint_and_says_so(llm_server: Server, ns: str, fake: FakeLLM) -> None:
    client = llm_server.client()
    add_done(client, ns, "Blue whales are the largest animals. Whales sing songs. Songs can be long.")
    fake.requests.clear()
    response = httpx.post(f"{llm_server.url}/ns/{ns}/search", json={"query": "whales songs", "rerank": "order",
                                                                     "searchMode": "memories", "threshold": 0},
                          headers={"Authorization": f"Bearer {llm_server.key}", "X-Engram-Explain": "true"})
    results = response.json()["results"]
    assert results[0]["memory"] == "Whales sing songs."
    scores = [r["explanation"]["rerankScore"] for r in results]
    assert scores == sorted(scores, reverse=True) and scores[0] == 1.0
    assert any("/rerank" in str(r) for r in fake.requests)


def test_rerank_order_without_a_reranker_asks_the_llm(llm_only_server: Server, ns: str) -> None:
    client = llm_only_server.client()
    add_done(client, ns, "Owls hunt at night. Larks sing at dawn.")
    results = client.search(ns, query="owls night", rerank="order", search_mode="memories", threshold=0).results
    assert results[0].memory == "Owls hunt at night."


def test_rerank_aggregate_adds_one_merged_answer_first(llm_client: Supermemory, ns: str) -> None:
    add_done(llm_client, ns, "The library opens at nine. The library closes at five. Parking is free.")
    results = llm_client.search(ns, query="library hours", rerank="aggregate", search_mode="memories").results
    assert results[0].id.startswith("aggregated_") and results[0].is_inference
    assert "nine" in results[0].memory and "five" in results[0].memory
    assert results[0].metadata["aggregatedFrom"] == [r.id for r in results[1:]]


def test_an_unavailable_llm_fails_the_document_with_the_reason(llm_client: Supermemory, ns: str,
                                                               fake: FakeLLM) -> None:
    fake.fail(20, 503)
    try:
        ref = llm_client.add(ns, content="This will not be formed.")
        doc = wait_done(llm_client, ns, ref.id)
    finally:
        fake.reset()
    assert doc.system.status == "failed"
    retry = llm_client.documents.update(ns, ref.id, content="This will be formed now.")
    assert retry.status == "queued" and wait_done(llm_client, ns, ref.id).system.status == "done"
