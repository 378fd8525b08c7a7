"""Nothing acknowledged is lost and nothing is left half done: kill -9 or a death right after a commit, then look."""

from __future__ import annotations

import sqlite3
from contextlib import closing
import time
from pathlib import Path
from typing import Any

import pytest
from supermemory import Supermemory
from supermemory.core.api_error import ApiError

from engram_index.embed.hashing import HashingEmbedder
from engram_index.keys import KeyStore
from engram_index.store.sqlite import Store
from engram_index.supermemory.tables import chunks_collection, memories_collection

from .conftest import add_done, running
from tests.limits import PATIENCE_S, ServeProcess

def test_documents_acknowledged_before_a_kill_9_are_processed_after_the_restart(tmp_path: Path) -> None:
    token, _ = KeyStore(tmp_path).create("supermemory", {"namespaces": None})
    server = ServeProcess(tmp_path, "--embedder", "hashing:64")
    ns = "crash"
    texts = [f"Document {i} records the unique marker zeta{i} for recall." for i in range(300)]
    server.start()
    try:
        client = Supermemory(api_key=token, base_url=server.url, max_retries=0)
        accepted = [r.id for r in client.documents.batch_add(ns, documents=[{"content": t} for t in texts]).results]
        server.kill()
        # What every document's status was at the kill, read from the dead server's store (a listing before
        # the kill left processing time to finish the documents it showed).
        with closing(sqlite3.connect(f"file:{tmp_path / 'records.sqlite'}?mode=ro", uri=True)) as records:
            statuses = [status for (status,) in records.execute("SELECT status FROM sm_documents WHERE ns=?", (ns,))]
        assert len(statuses) == len(texts)  # (every acknowledged document is in the store)
        assert set(statuses) != {"done"}, "processing finished before the kill: the test proves nothing"
        server.start()  # on the same port
        client = Supermemory(api_key=token, base_url=server.url, max_retries=0)
        deadline = time.monotonic() + PATIENCE_S
        while True:
            docs = [client.list(ns, "documents", limit=100, page=p).documents for p in (1, 2, 3)]
            status = [d.system.status for page in docs for d in page]
            if status.count("done") == len(texts):
                break
            assert "failed" not in status and time.monotonic() < deadline
            time.sleep(0.2)
        assert sorted(d.id for page in docs for d in page) == sorted(accepted)
        assert client.list(ns, "memories").pagination.total_items == len(texts)
        assert client.list(ns, "chunks").pagination.total_items == len(texts)
        time.sleep(1)  # keyword commits land within a second
        hit = client.search(ns, query="zeta137", search_mode="memories").results
        assert [r.memory for r in hit] == [texts[137]]
    finally:
        server.stop()


class _Died(Exception):
    """The process dying right after a commit: nothing after it runs and no answer is sent."""


def _die_after_next_commit(monkeypatch: pytest.MonkeyPatch, store: Store,
                           names: tuple[str, ...] = ("write", "write_many", "execute")) -> list[bool]:
    """Make the store's next committed write (of these methods) the process's last once armed.

    The list it returns arms it when a False is appended, and holds True once the process "died".
    """
    state: list[bool] = []

    for name in names:
        real = getattr(store, name, None)
        if real is None:
            continue

        def dies(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            out = _real(*args, **kwargs)
            if state == [False]:
                state[0] = True
                raise _Died()
            return out

        monkeypatch.setattr(store, name, dies)
    return state


def _stored(data: Path, ns: str, doc_id: str) -> dict[str, int]:
    """How much of a document the store holds: its row, chunk and memory rows and their index records."""
    with sqlite3.connect(f"file:{data / 'records.sqlite'}?mode=ro", uri=True) as db:
        def one(sql: str, *params: Any) -> int:
            return int(db.execute(sql, params).fetchone()[0])

        records = ("SELECT count(*) FROM documents d JOIN spaces s ON s.id=d.space_id WHERE s.uri=? AND d.deleted=0"
                   " AND json_extract(d.metadata, '$.doc')=?")
        return {"row": one("SELECT count(*) FROM sm_documents WHERE ns=? AND id=?", ns, doc_id),
                "chunks": one("SELECT count(*) FROM sm_chunks WHERE ns=? AND doc_id=?", ns, doc_id),
                "memories": one("SELECT count(*) FROM sm_memories WHERE ns=? AND doc_id=?", ns, doc_id),
                "chunk records": one(records, chunks_collection(ns), doc_id),
                "memory records": one(records, memories_collection(ns), doc_id)}


def test_a_delete_cut_off_after_its_first_commit_leaves_the_document_whole_or_gone_never_half(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = "cut"
    with running(tmp_path, HashingEmbedder(64)) as srv:
        client = srv.client()
        doc_id = add_done(client, ns, "Entry zorblat keeps the green bike notes. Its bell rings twice a day.")
        before = _stored(tmp_path, ns, doc_id)
        assert before["row"] == 1 and before["chunks"] >= 1 and before["memories"] == 2
        state = _die_after_next_commit(monkeypatch, srv.app.state.supermemory.store)
        state.append(False)
        with pytest.raises(ApiError):  # the 500 stands for the answer that never left
            client.documents.delete(ns, ids=[doc_id])
        assert state == [True], "the delete committed nothing"
        after = _stored(tmp_path, ns, doc_id)
    assert after in (before, dict.fromkeys(before, 0)), f"half deleted: {before} before, {after} after"


def test_a_revision_cut_off_at_its_first_index_commit_never_leaves_new_chunks_beside_old_memories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = "rev"
    old = "Entry plimzot keeps the green bike notes"
    new = old + " and more kettle pages"
    with running(tmp_path, HashingEmbedder(64)) as srv:
        client = srv.client()
        doc_id = add_done(client, ns, old, id="r1")
        state = _die_after_next_commit(monkeypatch, srv.app.state.supermemory.store, ("write", "write_many"))
        state.append(False)  # armed: the resubmission's own commit is `execute`, the pipeline's are writes
        assert client.add(ns, content=new, id="r1").id == doc_id
        deadline = time.monotonic() + PATIENCE_S
        while state != [True]:
            assert time.monotonic() < deadline, "processing never committed"
            time.sleep(0.02)
    with sqlite3.connect(f"file:{tmp_path / 'records.sqlite'}?mode=ro", uri=True) as db:
        chunks = [r[0] for r in db.execute("SELECT content FROM sm_chunks WHERE ns=? AND doc_id=?", (ns, doc_id))]
        latest = [r[0] for r in db.execute(
            "SELECT memory FROM sm_memories WHERE ns=? AND doc_id=? AND is_latest=1", (ns, doc_id))]
    assert (chunks, latest) in (([old], [old]), ([new], [new])), f"chunks {chunks} beside latest memories {latest}"
