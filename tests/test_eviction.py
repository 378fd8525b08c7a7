"""A node keeps at most `max_loaded` collections loaded: the least recently used idle one is closed and
loads again, with every write it missed, on its next request; on each store."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from engram_index.cli.serving import serve
from engram_index.collections import Collections
from engram_index.eviction import MAX_LOADED
from engram_index.engine.types import Document, SearchRequest
from engram_index.errors import StorageError
from engram_index.store.base import StoredDocument
from tests.kindgi.server import kindgi_server

SPACES = [f"at://did:plc:evict234evict234evict234ev/space/garden.engram.space/{name}" for name in "abc"]


def doc(doc_id: str, text: str) -> StoredDocument:
    return StoredDocument(Document(id=doc_id, author="did:plc:a", text=text, created_ms=1))


def found(spaces: Collections, uri: str, word: str) -> list[str]:
    return sorted(h.document.id for h in spaces.search(uri, SearchRequest(q=word, mode="keyword", limit=10)).hits)


def filled(data: Path, store: str | None, max_loaded: int) -> Collections:
    spaces = Collections(data, store=store, max_loaded=max_loaded)
    for n, uri in enumerate(SPACES):
        spaces.ensure_collection(uri)
        spaces.write(uri, [doc(f"d{n}", f"walrus number {n}")])
    return spaces


def test_beyond_its_limit_a_node_closes_the_least_recently_used_collection(
        tmp_path: Path, store_url: str | None) -> None:
    spaces = filled(tmp_path / "data", store_url, max_loaded=2)
    try:
        a, b, c = SPACES
        assert found(spaces, a, "walrus") == ["d0"] and found(spaces, b, "walrus") == ["d1"]
        assert found(spaces, a, "walrus") == ["d0"]  # a is now the most recently used
        assert found(spaces, c, "walrus") == ["d2"]
        assert spaces.loaded(b) is None
        assert spaces.loaded(a) is not None and spaces.loaded(c) is not None
    finally:
        spaces.close()


def test_an_evicted_collection_loads_again_on_its_next_request_with_the_writes_it_missed(
        tmp_path: Path, store_url: str | None) -> None:
    spaces = filled(tmp_path / "data", store_url, max_loaded=1)
    try:
        a, b, _ = SPACES
        assert found(spaces, a, "walrus") == ["d0"]
        assert found(spaces, b, "walrus") == ["d1"]
        assert spaces.loaded(a) is None
        spaces.write(a, [doc("late", "walrus arriving late")], deletes=["d0"])  # to the store alone
        assert found(spaces, a, "walrus") == ["late"]
        assert spaces.loaded(b) is None and spaces.loaded(a) is not None
    finally:
        spaces.close()


def test_a_collection_that_is_being_written_is_not_evicted_the_next_idle_one_is(tmp_path: Path) -> None:
    spaces = filled(tmp_path / "data", None, max_loaded=2)
    a, b, c = SPACES
    held, release = threading.Event(), threading.Event()

    def writing() -> None:  # a write of `a` in progress holds its lock, as from its commit to its apply
        with spaces._collection_lock(a):
            held.set()
            release.wait()

    try:
        found(spaces, a, "walrus"), found(spaces, b, "walrus")
        writer = threading.Thread(target=writing)
        writer.start()
        held.wait()
        assert found(spaces, c, "walrus") == ["d2"]
        assert spaces.loaded(a) is not None and spaces.loaded(b) is None
        release.set()
        writer.join()
    finally:
        release.set()
        spaces.close()


def test_a_node_must_keep_at_least_one_collection(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        Collections(tmp_path / "data", max_loaded=0)


def test_serve_takes_max_collections_with_the_nodes_default() -> None:
    option = next(p for p in serve.params if p.name == "max_collections")
    assert option.default == MAX_LOADED


def test_a_kindgi_node_limited_to_one_collection_answers_each_tenant_from_its_own_facts(tmp_path: Path) -> None:
    scope = {"tenantId": "acme", "projectId": "web"}
    with kindgi_server(tmp_path / "data", max_collections=1) as server:
        clients = {t: server.client(t, user="alice", projects=["web"]) for t in ("acme", "globex")}
        for tenant, client in clients.items():
            client.memory.write_fact(type="note", scope={**scope, "tenantId": tenant}, content=f"numbat of {tenant}")
        for _ in range(2):  # each request loads its tenant again, the other one evicted
            for tenant, client in clients.items():
                answer = client.memory.retrieve(mode="keyword", query="numbat")
                assert [r.fact.content for r in answer.results] == [f"numbat of {tenant}"]
        assert sum(server.app.state.spaces.loaded(uri) is not None for uri in server.app.state.spaces.store.collections()) == 1
