"""POST /v1/memory/retrieve in its four modes, through the official SDK."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import httpx
import numpy as np
import pytest
from kindgi.client import InvalidRequestError, Kindgi, ServerError

from engram_index.embed.hashing import HashingEmbedder
from engram_index.embed.text import embed_text
from tests.kindgi.server import DIMS, NO_EMBEDDER, Server, kindgi_server
from tests.limits import PATIENCE_S

SCOPE = {"tenantId": "acme", "projectId": "web"}
TEXTS = ["green tea in the morning", "black coffee at night", "tea ceremony in kyoto", "morning run by the river",
         "herbal tea before sleep", "coffee beans from brazil", "the river is cold in the morning"]


def _seed(client: Kindgi) -> dict[str, str]:
    return {client.memory.write_fact(type="note", scope=SCOPE, content=t).id: t for t in TEXTS}


def embedded(text: str, type_: str = "note", subjects: tuple[str, ...] = ()) -> str:
    """The text a fact is embedded as: its words, then its type and subjects as tags."""
    return embed_text("", text, [f"type:{type_}", *subjects])


def test_a_fact_is_embedded_with_its_type_and_whom_it_is_about(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact(type="turn", scope=SCOPE, content="I did, it was lovely",
                                    subjects=[{"kind": "participant", "id": "Ana"}])
    client.memory.write_fact(type="note", scope=SCOPE, content="unrelated words about rivers")
    embedder = HashingEmbedder(DIMS)
    query = embedder.embed_queries(["Ana lovely"])[0]
    results = client.memory.retrieve(mode="semantic", query="Ana lovely", limit=5).results
    got = {r.fact.id: r.score for r in results}
    doc = embedder.embed_documents([embedded("I did, it was lovely", "turn", ("participant:Ana",))])[0]
    plain = embedder.embed_documents(["I did, it was lovely"])[0]
    assert got[fact.id] == pytest.approx(float(doc.astype(np.float16).astype(np.float32) @ query), abs=2e-3)
    assert float(doc @ query) > float(plain @ query)  # whom it is about is part of what it says


def test_list_is_newest_first_without_scores(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    ids = list(_seed(client))
    results = client.memory.retrieve(mode="list", query=None, limit=5).results
    assert [r.fact.id for r in results] == ids[::-1][:5] and all(r.score is None for r in results)


def test_keyword_scores_are_bm25_values_best_first(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    texts = _seed(client)
    results = client.memory.retrieve(mode="keyword", query="morning tea").results
    assert results and all("tea" in texts[r.fact.id] or "morning" in texts[r.fact.id] for r in results)
    scores = [r.score for r in results]
    assert all(s is not None and s > 0 for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert texts[results[0].fact.id] == "green tea in the morning"


def test_semantic_scores_are_the_cosine_of_the_embeddings(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    texts = _seed(client)
    embedder = HashingEmbedder(DIMS)
    query = embedder.embed_queries(["tea in the morning"])[0]
    results = client.memory.retrieve(mode="semantic", query="tea in the morning", limit=len(TEXTS)).results
    assert len(results) == len(TEXTS)
    for r in results:
        doc = embedder.embed_documents([embedded(texts[r.fact.id])])[0].astype(np.float16).astype(np.float32)
        assert r.score is not None and -1 <= r.score <= 1
        assert r.score == pytest.approx(float(doc @ query), abs=2e-3)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)  # type: ignore[type-var]


def test_both_fuses_the_keyword_and_semantic_legs_by_reciprocal_rank(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    _seed(client)
    query = "tea morning river"
    keyword = [r.fact.id for r in client.memory.retrieve(mode="keyword", query=query, limit=20).results]
    semantic = [r.fact.id for r in client.memory.retrieve(mode="semantic", query=query, limit=20).results]
    fused = client.memory.retrieve(mode="both", query=query, limit=5).results
    expected: dict[str, float] = {}
    for leg in (keyword, semantic):
        for rank, fid in enumerate(leg, 1):
            expected[fid] = expected.get(fid, 0.0) + 1 / (60 + rank)
    first_seen = {fid: i for i, fid in enumerate(dict.fromkeys(keyword + semantic))}
    best = sorted(expected, key=lambda f: (-expected[f], first_seen[f]))[:5]
    assert [r.fact.id for r in fused] == best
    assert [r.score for r in fused] == pytest.approx([expected[f] for f in best])


def test_only_current_revisions_are_retrieved(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="walrus moustache")
    client.memory.supersede_fact(fact.id, content="penguin tuxedo")
    assert client.memory.retrieve(mode="keyword", query="walrus").results == []
    for mode in ("semantic", "both"):  # by meaning the one fact is always nearest: its current revision
        assert [r.fact.content for r in client.memory.retrieve(mode=mode, query="walrus").results] == ["penguin tuxedo"]
    for mode in ("keyword", "both"):
        found = client.memory.retrieve(mode=mode, query="penguin").results
        assert [(r.fact.id, r.fact.version) for r in found] == [(fact.id, 2)]
    assert [(r.fact.version) for r in client.memory.retrieve(mode="list").results] == [2]


def test_type_and_limit_are_honoured_in_every_mode(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    for i in range(6):
        client.memory.write_fact(type="note" if i % 2 else "task", scope=SCOPE, content=f"tea number {i}")
    for mode in ("list", "keyword", "semantic", "both"):
        query = None if mode == "list" else "tea"
        results = client.memory.retrieve(mode=mode, query=query, type="task", limit=2).results
        assert len(results) == 2 and {r.fact.type for r in results} == {"task"}


def test_a_fact_is_retrievable_by_keyword_as_soon_as_its_write_is_answered(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    for i in range(15):
        word = f"zebra{i}quux"
        fact = client.memory.write_fact(type="note", scope=SCOPE, content=f"a {word} here")
        assert [r.fact.id for r in client.memory.retrieve(mode="keyword", query=word).results] == [fact.id]
        assert [r.fact.id for r in client.memory.retrieve(mode="both", query=word, limit=1).results] == [fact.id]


def test_the_embedding_model_is_checked_against_the_deployments(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    _seed(client)
    assert client.memory.retrieve(mode="semantic", query="tea", embedding_model="hashing-v1").results
    with pytest.raises(ServerError) as err:
        client.memory.retrieve(mode="both", query="tea", embedding_model="text-embedding-3-large")
    assert err.value.status == 422 and err.value.server_code == "semantic-unavailable"
    assert err.value.details == {"embeddingModel": "hashing-v1"}


def test_without_embeddings_semantic_and_both_are_422_and_keyword_and_list_still_work(tmp_path: Path) -> None:
    with kindgi_server(tmp_path / "data", NO_EMBEDDER) as server:
        client = server.client(user="alice", projects=["web"])
        fact = client.memory.write_fact(type="note", scope=SCOPE, content="oolong tea")
        assert fact.embedding_model is None
        for mode in ("semantic", "both"):
            with pytest.raises(ServerError) as err:
                client.memory.retrieve(mode=mode, query="tea")
            assert err.value.status == 422 and err.value.server_code == "semantic-unavailable"
        assert [r.fact.id for r in client.memory.retrieve(mode="keyword", query="oolong").results] == [fact.id]
        assert [r.fact.id for r in client.memory.retrieve(mode="list").results] == [fact.id]


@pytest.mark.parametrize("body, code", [
    ({"mode": "keyword"}, "bad-input"),
    ({"mode": "nearest", "query": "x"}, "bad-input"),
    ({"mode": "keyword", "query": 5}, "bad-input"),
    ({"mode": "list", "limit": 0}, "validation-failed"),
    ({"mode": "list", "limit": "ten"}, "bad-input"),
    ({"mode": "list", "type": ""}, "bad-input"),
    ({"mode": "list", "embeddingModel": ""}, "bad-input"),
    ({"mode": "keyword", "query": "x" * 4001}, "validation-failed"),
    ({"mode": "list", "scope": "acme"}, "bad-input"),
    ({"mode": "list", "scope": {"tenantId": "acme", "participantId": ""}}, "bad-input"),
    ({"mode": "list", "limt": 3}, "unknown-field"),
])
def test_a_malformed_intent_is_400_with_its_code(server: Server, body: dict[str, object], code: str) -> None:
    token = server.token(user="alice", projects=["web"])
    import httpx

    answer = httpx.post(f"{server.url}/v1/memory/retrieve", json=body, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == code


def test_a_limit_is_floored_and_a_query_is_required_but_for_list(server: Server) -> None:
    import httpx

    token = server.token(user="alice", projects=["web"])
    client = Kindgi(base_url=server.url, token=token)
    _seed(client)
    answer = httpx.post(f"{server.url}/v1/memory/retrieve", json={"mode": "list", "limit": 2.9},
                        headers={"Authorization": f"Bearer {token}"})
    assert len(answer.json()["results"]) == 2
    with pytest.raises(InvalidRequestError) as err:
        client.memory.retrieve(mode="semantic", query=None)
    assert err.value.server_code == "bad-input"


def test_on_request_each_result_says_why_it_matched(server: Server) -> None:
    token = server.token(user="alice", projects=["web"])
    client = Kindgi(base_url=server.url, token=token, default_headers={"X-Kindgi-Explain": "true"})
    _seed(client)
    hit = client.memory.retrieve(mode="both", query="green tea", limit=1).results[0]
    why = (hit.model_extra or {})["explanation"]
    assert why["keyword"]["rank"] == 1 and {t["term"] for t in why["keyword"]["terms"]} >= {"green", "tea"}
    assert why["semantic"]["rank"] >= 1 and -1 <= why["semantic"]["similarity"] <= 1
    assert why["fusion"] == {"method": "rrf", "k": 60, "ranks": {"keyword": 1, "semantic": why["semantic"]["rank"]}}
    snippet = why["snippet"]
    text = snippet["text"].encode()
    assert [text[h["byteStart"]:h["byteEnd"]].decode().lower() for h in snippet["highlights"]] == ["green", "tea"]
    plain = server.client(user="alice", projects=["web"]).memory.retrieve(mode="both", query="green tea", limit=1)
    assert "explanation" not in (plain.results[0].model_extra or {})


def test_a_tenant_whose_facts_hold_another_models_vectors_is_refused_semantic_naming_both(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    _seed(client)
    spaces = server.app.state.spaces
    spaces.ensure_collection("kindgi:acme", HashingEmbedder(DIMS * 2).identity)  # as if written by another model
    with pytest.raises(ServerError) as err:
        client.memory.retrieve(mode="semantic", query="tea")
    assert err.value.status == 422 and err.value.server_code == "semantic-unavailable"
    assert f"{DIMS * 2} dimensions" in str(err.value) and "re-embedded with hashing-v1" in str(err.value)
    assert client.memory.retrieve(mode="keyword", query="tea").results  # keyword still answers


def test_a_tenant_written_with_another_model_is_re_embedded_when_the_face_opens(tmp_path: Path) -> None:
    with kindgi_server(tmp_path / "data", HashingEmbedder(DIMS)) as server:
        texts = _seed(server.client(user="alice", projects=["web"]))
    wider = HashingEmbedder(DIMS * 2)
    with kindgi_server(tmp_path / "data", wider) as server:
        moving = server.app.state.kindgi.facts.reembedding
        assert moving is not None
        moving.join()
        assert server.app.state.spaces.info("kindgi:acme").model == wider.identity
        client = server.client(user="alice", projects=["web"])
        results = client.memory.retrieve(mode="semantic", query="tea in the morning", limit=len(TEXTS)).results
        query = wider.embed_queries(["tea in the morning"])[0]
        assert len(results) == len(TEXTS)
        for r in results:  # scored with the new model's vectors of every fact
            doc = wider.embed_documents([embedded(texts[r.fact.id])])[0].astype(np.float16).astype(np.float32)
            assert r.score == pytest.approx(float(doc @ query), abs=2e-3)


def test_both_ranks_the_facts_found_by_meaning_among_the_keyword_hits_too(server: Server,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from engram_index.kindgi import retrieve

    monkeypatch.setattr(retrieve, "MIN_LEG_DEPTH", 2)  # legs two deep: the semantic leg finds what keyword's misses
    monkeypatch.setattr(retrieve, "LEG_DEPTH_PER_LIMIT", 0.0)
    client = server.client(user="alice", projects=["web"])
    texts = _seed(client)
    answer = httpx.post(f"{server.url}/v1/memory/retrieve", headers={
        "Authorization": f"Bearer {server.token(user='alice', projects=['web'])}", "X-Kindgi-Explain": "true"},
        json={"mode": "both", "query": "tea in the morning", "limit": 7}).json()["results"]
    keyword = [r.fact.id for r in client.memory.retrieve(mode="keyword", query="tea in the morning", limit=2).results]
    assert answer
    for r in answer:
        words = set(texts[r["fact"]["id"]].split())
        ranks = r["explanation"]["fusion"]["ranks"]
        assert "semantic" in ranks and ("keyword" in ranks) == bool(words & {"tea", "morning"})
    assert any(r["fact"]["id"] not in keyword and "keyword" in r["explanation"]["fusion"]["ranks"] for r in answer)


def test_a_retrieve_body_too_large_to_check_on_the_event_loop_answers_as_a_small_one(server: Server) -> None:
    # A body past PREPARE_MAX_BYTES (whitespace is valid JSON) is checked on the worker thread instead:
    # the same answers, scores and errors either way.
    from engram_index.kindgi.routes import PREPARE_MAX_BYTES

    token = server.token(user="alice", projects=["web"])
    _seed(Kindgi(base_url=server.url, token=token))
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    pad = b" " * (PREPARE_MAX_BYTES + 1)

    def both(raw: bytes) -> tuple[httpx.Response, httpx.Response]:
        small = httpx.post(f"{server.url}/v1/memory/retrieve", content=raw, headers=headers)
        large = httpx.post(f"{server.url}/v1/memory/retrieve", content=raw[:1] + pad + raw[1:], headers=headers)
        return small, large

    for mode in ("list", "keyword", "semantic", "both"):
        small, large = both(b'{"mode": "%s", "query": "morning tea", "limit": 3}' % mode.encode())
        assert small.status_code == large.status_code == 200 and small.json()["results"]
        assert small.json()["results"] == large.json()["results"]
    for raw in (b'{"mode": "both", "query": "tea", "bogus": 1}', b'{"mode": "both"}',
                b'{"mode": "both", "query": "tea", "embeddingModel": "another-model"}'):
        small, large = both(raw)
        assert small.status_code == large.status_code >= 400
        assert small.json()["error"]["code"] == large.json()["error"]["code"]


def test_a_retrieve_starts_on_the_event_loop_only_once_declared_and_never_over_a_shared_store() -> None:
    # The event loop must not write (a tenant's first retrieve declares its model) nor wait on a
    # PostgreSQL round trip: in those cases the route's prepare step leaves the whole retrieve to
    # the worker thread (call.started stays None); a retrieve that is none of these starts at once.
    from types import SimpleNamespace

    from engram_index.kindgi.routes import start_retrieve

    def call(declared: bool, shared: bool) -> SimpleNamespace:
        collections = SimpleNamespace(shared_store=lambda: object() if shared else None)
        facts = SimpleNamespace(collections=collections, declared=lambda tenant: declared)
        retriever = SimpleNamespace(start=lambda principal, intent, explain, pooled: ("started", intent.mode))
        principal = SimpleNamespace(tenant="t1")
        return SimpleNamespace(body=b'{"mode": "keyword", "query": "tea"}', principal=principal,
                               face=SimpleNamespace(facts=facts, retriever=retriever),
                               request=SimpleNamespace(headers={}), started=None)

    for declared, shared in ((False, False), (False, True), (True, True)):
        waiting = call(declared, shared)
        start_retrieve(waiting)  # type: ignore[arg-type]
        assert waiting.started is None
    ready = call(True, False)
    start_retrieve(ready)  # type: ignore[arg-type]
    assert ready.started == ("started", "keyword")


class HeldEmbedder(HashingEmbedder):
    """The hashing embedder whose query embeddings wait until `go` is set (documents embed at once)."""

    def __init__(self) -> None:
        super().__init__(DIMS)
        self.go = threading.Event()
        self.go.set()

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        assert self.go.wait(PATIENCE_S), "the test never let the embedding go"
        return super().embed_queries(texts)


def test_a_retrieve_past_the_search_deadline_answers_503_and_leaves_the_next_one_its_slot(tmp_path: Path) -> None:
    # A retrieve's legs run on their own threads (the keyword leg on the search pool); the request
    # waits for its answer until the search pool's deadline, counted from its arrival, as any search.
    embedder = HeldEmbedder()
    with kindgi_server(tmp_path / "data", embedder) as server:
        client = server.client(user="alice", projects=["web"])
        _seed(client)
        server.app.state.spaces.searches.deadline_s = 0.5
        embedder.go.clear()
        try:
            for mode in ("semantic", "both"):
                with pytest.raises(ServerError) as err:
                    client.memory.retrieve(mode=mode, query=f"tea at {mode} o'clock")
                assert err.value.status == 503 and err.value.server_code == "service-unavailable"
            assert client.memory.retrieve(mode="keyword", query="tea").results  # no slot was kept
        finally:
            embedder.go.set()
        assert client.memory.retrieve(mode="both", query="tea").results
