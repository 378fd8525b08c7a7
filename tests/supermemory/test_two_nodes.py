"""Two nodes over one PostgreSQL store: what one node writes, the other's filtered reads see."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram_index.embed.hashing import HashingEmbedder
from tests.limits import PATIENCE_S
from tests.supermemory.conftest import Server, add_done, running

PETS: dict[str, Any] = {"query": "adopted", "search_mode": "memories", "threshold": 0,
                        "filter": {"field": "kind", "operator": "eq", "value": "pet"}}
EVERY_DOCUMENT = "SELECT id, metadata, grp FROM sm_documents WHERE ns=?"


@pytest.fixture
def nodes(tmp_path: Path, postgres_server: Any) -> Iterator[tuple[Server, Server]]:
    """Nodes A and B over one fresh PostgreSQL database."""
    url = str(postgres_server.database())
    with running(tmp_path / "a", HashingEmbedder(256), store=url) as a, \
            running(tmp_path / "b", HashingEmbedder(256), store=url) as b:
        yield a, b


def test_a_filtered_search_on_one_node_finds_a_document_another_node_added_after_its_first(
        nodes: tuple[Server, Server]) -> None:
    a, b = nodes
    add_done(a.client(), "n", "Cal adopted a teddy bear named Ted.", metadata={"kind": "toy"})
    add_done(a.client(), "n", "Ana adopted a puppy named Rex.", metadata={"kind": "pet"})
    on_b = b.client()
    deadline = time.monotonic() + PATIENCE_S
    while not on_b.search("n", **PETS).results:  # node B tails node A's writes
        assert time.monotonic() < deadline, "node B never found node A's first document"
        time.sleep(0.05)
    add_done(a.client(), "n", "Ben adopted a kitten named Tom.", metadata={"kind": "pet"})
    while "Ben adopted a kitten named Tom." not in {r.memory for r in on_b.search("n", **PETS).results}:
        assert time.monotonic() < deadline, "node B's filter never let node A's second document through"
        time.sleep(0.05)


def test_a_node_over_a_shared_store_reads_again_only_the_documents_another_node_changed(
        nodes: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = nodes
    add_done(a.client(), "n", "Ana adopted a puppy named Rex.", metadata={"kind": "pet"})
    on_b = b.client()
    on_b.search("n", **PETS)
    store = b.app.state.supermemory.store
    asked: list[str] = []
    query = store.query
    monkeypatch.setattr(store, "query", lambda sql, params=(): asked.append(sql) or query(sql, params))
    on_b.search("n", **PETS)
    assert not [sql for sql in asked if sql.startswith(EVERY_DOCUMENT) and "id IN" not in sql]
    add_done(a.client(), "n", "Ben adopted a kitten named Tom.", metadata={"kind": "pet"})
    # Node A changed the documents: node B reads again the one it added (the store's log of changes names it).
    assert "Ben adopted a kitten named Tom." in {r.memory for r in on_b.search("n", **PETS).results}
    assert not [sql for sql in asked if sql.startswith(EVERY_DOCUMENT) and "id IN" not in sql]
    assert [sql for sql in asked if sql.startswith(EVERY_DOCUMENT) and "id IN" in sql]
