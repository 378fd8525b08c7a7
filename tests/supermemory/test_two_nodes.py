"""Two nodes over one PostgreSQL store: what one node writes, the other's filtered reads see."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engram_index.embed.hashing import HashingEmbedder
from tests.limits import PATIENCE_S
from tests.supermemory.conftest import add_done, running


def test_a_filtered_search_on_one_node_finds_a_document_another_node_added_after_its_first(
        tmp_path: Path, postgres_server: Any) -> None:
    url = str(postgres_server.database())
    with running(tmp_path / "a", HashingEmbedder(256), store=url) as a, \
            running(tmp_path / "b", HashingEmbedder(256), store=url) as b:
        body: dict[str, Any] = {"query": "adopted", "search_mode": "memories", "threshold": 0,
                                "filter": {"field": "kind", "operator": "eq", "value": "pet"}}
        add_done(a.client(), "n", "Cal adopted a teddy bear named Ted.", metadata={"kind": "toy"})
        add_done(a.client(), "n", "Ana adopted a puppy named Rex.", metadata={"kind": "pet"})
        on_b = b.client()
        deadline = time.monotonic() + PATIENCE_S
        while not on_b.search("n", **body).results:  # node B tails node A's writes
            assert time.monotonic() < deadline, "node B never found node A's first document"
            time.sleep(0.05)
        add_done(a.client(), "n", "Ben adopted a kitten named Tom.", metadata={"kind": "pet"})
        while "Ben adopted a kitten named Tom." not in {r.memory for r in on_b.search("n", **body).results}:
            assert time.monotonic() < deadline, "node B's filter never let node A's second document through"
            time.sleep(0.05)


def test_a_node_over_a_shared_store_reads_the_documents_metadata_again_only_after_a_change(
        tmp_path: Path, postgres_server: Any, monkeypatch: Any) -> None:
    url = str(postgres_server.database())
    with running(tmp_path / "a", HashingEmbedder(256), store=url) as a, \
            running(tmp_path / "b", HashingEmbedder(256), store=url) as b:
        body: dict[str, Any] = {"query": "adopted", "search_mode": "memories", "threshold": 0,
                                "filter": {"field": "kind", "operator": "eq", "value": "pet"}}
        add_done(a.client(), "n", "Ana adopted a puppy named Rex.", metadata={"kind": "pet"})
        on_b = b.client()
        on_b.search("n", **body)
        store = b.app.state.supermemory.store
        asked: list[str] = []
        query = store.query
        monkeypatch.setattr(store, "query", lambda sql, params=(): asked.append(sql) or query(sql, params))
        on_b.search("n", **body)
        assert not [sql for sql in asked if sql.startswith("SELECT id, metadata, grp FROM sm_documents WHERE ns=?")
                    and "id IN" not in sql]
        add_done(a.client(), "n", "Ben adopted a kitten named Tom.", metadata={"kind": "pet"})
        on_b.search("n", **body)  # node A changed the documents: node B reads them again
        assert [sql for sql in asked if sql.startswith("SELECT id, metadata, grp FROM sm_documents WHERE ns=?")]
