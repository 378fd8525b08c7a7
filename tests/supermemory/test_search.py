"""v5 search through the official SDK: modes, thresholds, limits, includes, filters, bad input, explanations."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import supermemory
from supermemory import Supermemory

from engram_index.embed.hashing import HashingEmbedder
from engram_index.embed.text import embed_text
from tests.supermemory.conftest import Server, add_done

FACTS = [
    ("The cafeteria serves pasta on Mondays. The gym opens at six.", {"kind": "office", "floor": 2, "open": True,
                                                                          "tags": ["Food", "daily"]}),
    ("Our search engine ranks results with BM25 and vectors.", {"kind": "tech", "floor": 5, "open": False,
                                                                   "tags": ["search"]}),
    ("The parking garage closes at midnight.", {"kind": "office", "floor": 0, "open": True, "title": "Parking Rules"}),
]


@pytest.fixture
def filled(client: Supermemory, ns: str) -> str:
    """A namespace holding three documents with metadata."""
    for text, metadata in FACTS:
        add_done(client, ns, text, metadata=metadata)
    return ns


def _post(server: Server, ns: str, body: Any, **kwargs: Any) -> httpx.Response:
    """A raw search request."""
    return httpx.post(f"{server.url}/ns/{ns}/search", json=body,
                      headers={"Authorization": f"Bearer {server.key}", **kwargs.pop("headers", {})}, **kwargs)


def test_the_three_modes_return_memories_chunks_or_both_in_one_list(client: Supermemory, filled: str) -> None:
    memories = client.search(filled, query="pasta cafeteria", search_mode="memories").results
    chunks = client.search(filled, query="pasta cafeteria", search_mode="chunks").results
    hybrid = client.search(filled, query="pasta cafeteria").results
    assert memories and all(r.memory is not None and r.chunk is None for r in memories)
    assert chunks and all(r.chunk is not None and r.memory is None for r in chunks)
    assert hybrid and all((r.memory is None) != (r.chunk is None) for r in hybrid)
    sims = [r.similarity for r in hybrid]
    assert sims == sorted(sims, reverse=True) and all(0 <= s <= 1 for s in sims)
    assert memories[0].memory == "The cafeteria serves pasta on Mondays."
    for r in hybrid:
        assert r.metadata["kind"] == "office" or r.similarity < 0.5
        assert r.is_latest and not r.is_inference and r.system.updated_at and r.system.created_at


def test_hybrid_spends_one_place_on_a_memory_and_the_chunk_it_came_from(client: Supermemory, filled: str) -> None:
    hybrid = client.search(filled, query="pasta cafeteria gym parking", threshold=0, limit=100).results
    memories = [r.memory for r in hybrid if r.memory is not None]
    chunks = [r.chunk for r in hybrid if r.chunk is not None]
    assert not [m for m in memories for c in chunks if m in c]  # never a memory beside its own chunk
    assert len(hybrid) == len(FACTS)  # each document here is one chunk: one place each
    everything = (client.search(filled, query="pasta cafeteria gym parking", threshold=0, limit=100,
                                search_mode=mode).results for mode in ("memories", "chunks"))
    sources = {r.memory or r.chunk for results in everything for r in results}
    assert len(hybrid) < len(sources)


def test_threshold_zero_keeps_every_candidate_and_one_keeps_none(client: Supermemory, filled: str) -> None:
    everything = client.search(filled, query="parking", threshold=0, limit=100).results
    assert len(everything) > len(client.search(filled, query="parking").results)
    assert client.search(filled, query="parking", threshold=1).results == []


def test_limit_is_between_1_and_100(client: Supermemory, filled: str) -> None:
    assert len(client.search(filled, query="the", threshold=0, limit=1).results) == 1
    for bad in (0, 101, 2.5):
        with pytest.raises(supermemory.BadRequestError):
            client.search(filled, query="the", limit=bad)  # type: ignore[arg-type]


def test_a_namespace_with_nothing_matching_answers_an_empty_list(client: Supermemory, ns: str, filled: str) -> None:
    empty = client.search("never_written_" + ns, query="anything", threshold=0)
    assert empty.results == []
    assert client.search(filled, query="xylophone quasar").results == []


@pytest.mark.parametrize("include", [{"documents": True}, {"related": True}, {"forgotten": True},
                                     {"documents": True, "related": True, "forgotten": True}, {}])
def test_every_include_alone_and_together(client: Supermemory, filled: str, include: dict[str, bool]) -> None:
    results = client.search(filled, query="gym opens", include=include).results
    assert results
    for r in results:
        inc = r.included
        if not include.get("documents") and not include.get("related"):
            assert inc is None
            continue
        if include.get("documents"):
            assert inc.document.id and inc.document.metadata == r.metadata and inc.document.system.created_at
        else:
            assert inc.document is None
        if include.get("related"):
            assert inc.related.parents == [] and inc.related.children == [] and inc.related.siblings == []
        else:
            assert inc.related is None
    assert client.search(filled, query="xylophone quasar", include=include).results == []


def test_forgotten_memories_return_only_with_include_forgotten_and_not_as_latest(client: Supermemory, filled: str) -> None:
    gym = [r for r in client.search(filled, query="gym", search_mode="memories").results if "gym" in r.memory]
    client.memories.forget(filled, ids=[gym[0].id])
    plain = client.search(filled, query="gym", search_mode="memories").results
    assert gym[0].id not in [r.id for r in plain]
    recalled = client.search(filled, query="gym", search_mode="memories", include={"forgotten": True}).results
    hit = [r for r in recalled if r.id == gym[0].id]
    assert hit and hit[0].is_latest is False


@pytest.mark.parametrize("flt, expected", [
    ({"field": "kind", "operator": "eq", "value": "tech"}, {"tech"}),
    ({"field": "kind", "operator": "eq", "value": "TECH", "caseSensitive": False}, {"tech"}),
    ({"field": "kind", "operator": "eq", "value": "TECH"}, set()),
    ({"field": "kind", "operator": "neq", "value": "tech"}, {"office"}),
    ({"field": "floor", "operator": "gte", "value": 2}, {"office", "tech"}),
    ({"field": "floor", "operator": "lt", "value": 1}, {"office"}),
    ({"field": "open", "operator": "eq", "value": False}, {"tech"}),
    ({"field": "floor", "operator": "eq", "value": 5}, {"tech"}),
    ({"field": "title", "operator": "contains", "value": "Rules"}, {"office"}),
    ({"field": "title", "operator": "notContains", "value": "rules", "caseSensitive": False}, {"office", "tech"}),
    ({"field": "tags", "operator": "arrayContains", "value": "food"}, {"office"}),
    ({"field": "tags", "operator": "arrayNotContains", "value": "search"}, {"office"}),
    ({"operator": "or", "operands": [{"field": "floor", "operator": "eq", "value": 5},
                                     {"field": "floor", "operator": "eq", "value": 0}]}, {"office", "tech"}),
    ({"operator": "and", "operands": [{"field": "kind", "operator": "eq", "value": "office"},
                                      {"operator": "or", "operands": [
                                          {"field": "floor", "operator": "gt", "value": 1}]}]}, {"office"}),
])
def test_filters_apply_before_ranking(client: Supermemory, filled: str, flt: dict[str, Any], expected: set[str]) -> None:
    results = client.search(filled, query="the", threshold=0, limit=100, filter=flt).results
    assert {r.metadata["kind"] for r in results} == expected
    if flt.get("field") == "floor" and flt.get("operator") == "lt":
        assert {r.metadata["floor"] for r in results} == {0}


def _nest(depth: int) -> dict[str, Any]:
    """A filter nested `depth` levels deep."""
    expr: dict[str, Any] = {"field": "kind", "operator": "eq", "value": "office"}
    for _ in range(depth - 1):
        expr = {"operator": "and", "operands": [expr]}
    return expr


def test_filters_nest_five_levels_and_no_more(client: Supermemory, filled: str) -> None:
    assert client.search(filled, query="the", threshold=0, filter=_nest(5)).results
    with pytest.raises(supermemory.BadRequestError):
        client.search(filled, query="the", filter=_nest(6))


@pytest.mark.parametrize("flt", [
    {"AND": [{"key": "kind", "value": "x"}]},
    {"OR": []},
    {"key": "kind", "value": "office"},
    {"field": "kind", "operator": "eq", "value": "office", "negate": True},
    {"field": "kind", "operator": "eq", "value": "office", "ignoreCase": True},
    {"field": "floor", "filterType": "numeric", "numericOperator": ">", "value": 1},
    {"operator": "and", "operands": []},
    {"operator": "and", "operands": [{"field": "kind", "operator": "eq", "value": "a"}] * 201},
    {"operator": "xor", "operands": [{"field": "kind", "operator": "eq", "value": "a"}]},
    {"field": "floor", "operator": "gt", "value": "1"},
    {"field": "kind", "operator": "contains", "value": 3},
    {"field": "tags", "operator": "arrayContains", "value": ["a"]},
    {"field": "floor", "operator": "gt", "value": 1, "caseSensitive": True},
    {"field": "kind", "operator": "eq", "value": "a", "extra": 1},
    {"field": "kind", "operator": "like", "value": "a"},
    {"field": "a b", "operator": "eq", "value": "a"},
    {"field": "", "operator": "eq", "value": "a"},
    {"field": "kind", "operator": "eq"},
    {"operator": "and", "operands": [{"field": "k", "operator": "eq", "value": "a"}], "extra": True},
    "kind = office",
])
def test_every_bad_filter_is_a_400(client: Supermemory, filled: str, flt: Any) -> None:
    with pytest.raises(supermemory.BadRequestError) as err:
        client.search(filled, query="the", filter=flt)
    assert err.value.body["success"] is False and err.value.body["error"][0]["path"][0] == "filter"


def test_a_dotted_field_names_a_key_literally(client: Supermemory, ns: str) -> None:
    add_done(client, ns, "Dotted keys are plain keys.", metadata={"a.b": "x"})
    hit = client.search(ns, query="dotted", threshold=0, filter={"field": "a.b", "operator": "eq", "value": "x"})
    assert hit.results


@pytest.mark.parametrize("body", [
    {"query": "x", "q": "x"}, {"query": "x", "filters": {}}, {"query": "x", "containerTag": "a"},
    {"query": "x", "include": {"chunks": True}}, {"query": "x", "include": {"relatedMemories": True}},
    {"query": "x", "rerank": True}, {"query": "x", "searchMode": "documents"}, {"query": ""}, {},
    {"query": 3}, {"query": "x", "threshold": 1.5}, {"query": "x", "threshold": -0.1}, {"query": "x", "limit": "5"},
    {"query": "x", "include": {"documents": "yes"}}, {"query": "x", "rewriteQuery": "false"}, [], "query",
])
def test_bodies_are_closed_and_typed(server: Server, filled: str, body: Any) -> None:
    response = _post(server, filled, body)
    assert response.status_code == 400
    assert response.json()["success"] is False and response.json()["error"][0]["message"]


def test_null_means_absent_for_optional_fields(server: Server, filled: str) -> None:
    body = {"query": "parking", "searchMode": None, "limit": None, "threshold": None, "rerank": None,
            "rewriteQuery": None, "filter": None, "include": {"documents": None}}
    response = _post(server, filled, body)
    assert response.status_code == 200 and response.json()["results"]


def test_search_takes_no_query_string(server: Server, filled: str) -> None:
    response = _post(server, filled, {"query": "parking"}, params={"limit": "5"})
    assert response.status_code == 400 and response.json()["error"][0]["path"] == ["query", "limit"]
    with pytest.raises(supermemory.BadRequestError):
        server.client().search(filled, query="parking", extra_query={"q": "parking"})


@pytest.mark.parametrize("body, setting", [
    ({"rerank": "order"}, "--rerank"), ({"rerank": "aggregate"}, "--llm"), ({"rewriteQuery": True}, "--llm"),
])
def test_features_without_their_setting_answer_400_naming_it(client: Supermemory, filled: str, body: dict[str, Any],
                                                              setting: str) -> None:
    with pytest.raises(supermemory.BadRequestError) as err:
        client.search(filled, query="parking", **{"rerank": body.get("rerank"), "rewrite_query": body.get("rewriteQuery")})
    assert setting in err.value.body["details"]
    assert client.search(filled, query="parking", rerank="none", rewrite_query=False).results


def test_the_explain_header_says_why_each_result_matched(server: Server, filled: str) -> None:
    response = _post(server, filled, {"query": "parking garage"}, headers={"X-Engram-Explain": "true"})
    first = response.json()["results"][0]
    why = first["explanation"]
    assert {t["term"] for t in why["matchedTerms"]} >= {"parking", "garage"}
    assert why["keywordCoverage"] == 1.0 and why["vectorSimilarity"] > 0 and why["bm25"] > 0
    text = why["snippet"]["text"].encode()
    assert [text[h["byteStart"]:h["byteEnd"]].decode().lower() for h in why["snippet"]["highlights"]][:2] == [
        "parking", "garage"]
    own = 0.7 * why["vectorSimilarity"] + 0.3 * why["keywordCoverage"]
    assert why["similarity"] == "1 - (1 - (0.7 * max(cosine, 0) + 0.3 * keywordCoverage)) * (1 - backedBy)"
    assert abs(first["similarity"] - (1 - (1 - own) * (1 - why["backedBy"]))) < 1e-5  # its memory and chunk
    assert "explanation" not in _post(server, filled, {"query": "parking garage"}).json()["results"][0]


def test_keyword_only_servers_search_and_scale_similarity_by_coverage(keyword_server: Server, ns: str) -> None:
    client = keyword_server.client()
    add_done(client, ns, "The parking garage closes at midnight.")
    results = client.search(ns, query="parking garage hours", search_mode="memories").results
    assert [round(r.similarity, 4) for r in results] == [0.6667]
    assert client.search(ns, query="parking", search_mode="chunks").results[0].similarity == 1.0


@pytest.mark.parametrize("query", ["???", "the", "a" * 10000, "naïve café ünïcode", "日本語のテキスト", "x\u0000y"])
def test_odd_queries_answer_a_list(server: Server, keyword_server: Server, filled: str, query: str) -> None:
    for srv in (server, keyword_server):
        response = _post(srv, filled, {"query": query, "threshold": 0})
        assert response.status_code == 200, response.text
        assert isinstance(response.json()["results"], list)


def test_a_filter_repeated_after_a_write_sees_the_new_document(client: Supermemory, filled: str) -> None:
    flt = {"field": "kind", "operator": "eq", "value": "garage"}
    assert client.search(filled, query="the", threshold=0, limit=100, filter=flt).results == []
    add_done(client, filled, "The garage opens at seven.", metadata={"kind": "garage", "floor": -1})
    again = client.search(filled, query="the", threshold=0, limit=100, filter=flt).results
    assert again and {r.metadata["kind"] for r in again} == {"garage"}


def test_a_memory_is_embedded_with_its_documents_metadata_as_tags(server: Server, client: Supermemory, ns: str) -> None:
    add_done(client, ns, "I did, it was lovely.", metadata={"speaker": "Ana", "session": 3, "open": True})
    response = _post(server, ns, {"query": "Ana lovely", "searchMode": "memories", "threshold": 0},
                     headers={"X-Engram-Explain": "true"})
    first = response.json()["results"][0]
    assert first["memory"] == "I did, it was lovely."
    embedder = HashingEmbedder(256)
    query = embedder.embed_queries(["Ana lovely"])[0]
    # its words (a number, an identifier or a boolean says nothing the model can read)
    doc = embedder.embed_documents([embed_text("", "I did, it was lovely.", ["speaker:Ana"])])[0]
    plain = embedder.embed_documents(["I did, it was lovely."])[0]
    assert first["explanation"]["vectorSimilarity"] == pytest.approx(float(doc @ query), abs=2e-3)
    assert float(doc @ query) > float(plain @ query)  # who said it is part of what it says


def test_hybrid_scores_a_memory_and_the_chunk_that_backs_it_as_one_result_with_both(client: Supermemory,
                                                                                      filled: str) -> None:
    query = "parking garage midnight"
    memory = client.search(filled, query=query, search_mode="memories", threshold=0).results[0]
    chunk = client.search(filled, query=query, search_mode="chunks", threshold=0).results[0]
    hybrid = client.search(filled, query=query, threshold=0).results
    assert memory.memory == chunk.chunk == "The parking garage closes at midnight."
    turn = [r for r in hybrid if "parking" in (r.memory or r.chunk or "")]
    assert len(turn) == 1  # one place
    assert turn[0].similarity == pytest.approx(1 - (1 - memory.similarity) * (1 - chunk.similarity), abs=1e-5)
    assert turn[0].similarity >= max(memory.similarity, chunk.similarity)
    sims = [r.similarity for r in hybrid]
    assert sims == sorted(sims, reverse=True) and all(0 <= s <= 1 for s in sims)
