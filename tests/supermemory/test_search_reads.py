"""What a v5 search knows without reading its candidates' records: a chunk's document from its id, the
documents' dates kept until a write, the texts read where ranking and the page need them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import httpx
import pytest
from supermemory import Supermemory

from engram_index.collections import Collections
from engram_index.engine.types import Document, ModelIdentity
from engram_index.errors import UnknownSpace
from engram_index.store.base import StoredDocument
from engram_index.supermemory.pipeline import Pipeline
from engram_index.supermemory.tables import chunk_document, chunk_id
from tests.supermemory.conftest import Server, add_done, wait_done

A = "supermemory:t:memories"


@pytest.mark.parametrize("doc_id", ["d0123abcdef", "c", "cc9", "abc5c0", "x c12", "dc", ""])
@pytest.mark.parametrize("position", [0, 7, 123])
def test_a_chunks_document_is_known_from_its_id_whatever_the_document_id_holds(doc_id: str, position: int) -> None:
    assert chunk_document(chunk_id(doc_id, position)) == doc_id


def _search(server: Server, ns: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The results of a raw, explained search."""
    response = httpx.post(f"{server.url}/ns/{ns}/search", json=body,
                          headers={"Authorization": f"Bearer {server.key}", "X-Engram-Explain": "true"})
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def _add_dated(server: Server, client: Supermemory, ns: str, content: str, date: str) -> str:
    """Add a document with a date and wait until it is processed; its id."""
    response = httpx.post(f"{server.url}/ns/{ns}/document", json={"content": content, "date": date},
                          headers={"Authorization": f"Bearer {server.key}"})
    assert response.status_code == 200, response.text
    doc_id = str(response.json()["id"])
    assert wait_done(client, ns, doc_id).system.status == "done"
    return doc_id


def _coverage(results: list[dict[str, Any]], chunk: str) -> float:
    """The keyword coverage of the result whose chunk is `chunk`."""
    found = [r for r in results if r.get("chunk") == chunk]
    assert found, results
    coverage: float = found[0]["explanation"]["keywordCoverage"]
    return coverage


def test_a_chunk_holds_the_words_of_the_chunk_before_it_until_a_new_date_parts_them(server: Server,
                                                                                      client: Supermemory,
                                                                                      ns: str) -> None:
    _add_dated(server, client, ns, "Ana adopted a puppy named Rex.", "2023-05-01")
    later = _add_dated(server, client, ns, "That is wonderful news for the family.", "2023-05-01")
    body = {"query": "puppy wonderful", "searchMode": "chunks", "threshold": 0, "limit": 10}
    # One session (one date): the second turn holds "puppy" through the turn before it.
    assert _coverage(_search(server, ns, body), "That is wonderful news for the family.") == 1.0
    assert _coverage(_search(server, ns, body), "That is wonderful news for the family.") == 1.0  # dates kept
    patched = httpx.patch(f"{server.url}/ns/{ns}/document/{later}", json={"date": "2023-06-09"},
                          headers={"Authorization": f"Bearer {server.key}"})
    assert patched.status_code == 200, patched.text
    # Another date: another session, and the next search sees it (the kept dates were dropped).
    assert _coverage(_search(server, ns, body), "That is wonderful news for the family.") < 1.0


def test_a_memory_found_with_the_chunk_it_came_from_takes_one_place_and_explains_its_own_text(
        server: Server, client: Supermemory, ns: str) -> None:
    add_done(client, ns, "The observatory opens at dusk. Telescopes are lent free of charge.")
    add_done(client, ns, "The bakery sells rye bread.")
    results = _search(server, ns, {"query": "observatory telescopes dusk", "threshold": 0, "limit": 10})
    texts = [r.get("memory") or r.get("chunk") or "" for r in results]
    # The chunk holds both statements: neither memory takes a place beside it, whichever leads.
    observatory = [t for t in texts if "observatory" in t.lower() or "telescopes" in t.lower()]
    assert len(observatory) == 1, texts
    first = results[0]
    snippet = first["explanation"]["snippet"]["text"]
    assert snippet and snippet in (first.get("memory") or first.get("chunk"))
    assert first["metadata"] == {} and first["explanation"].get("backedBy") is not None


def test_a_search_asks_no_date_of_a_namespace_without_dated_documents_until_one_arrives(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    add_done(client, ns, "Ana adopted a puppy named Rex.")
    add_done(client, ns, "That is wonderful news for the family.")
    store = server.app.state.supermemory.store
    asked: list[str] = []
    query = store.query
    monkeypatch.setattr(store, "query", lambda sql, params=(): asked.append(sql) or query(sql, params))
    body = {"query": "puppy wonderful", "searchMode": "chunks", "threshold": 0, "limit": 10}
    assert _coverage(_search(server, ns, body), "That is wonderful news for the family.") < 1.0
    _search(server, ns, body)
    assert not [sql for sql in asked if "id, date" in sql]  # no document's date was read
    # Whether any has one: asked once, kept until a write (each search over a shared store, which another
    # node may write to).
    probes = len([sql for sql in asked if "date IS NOT NULL" in sql])
    assert probes <= (1 if server.app.state.spaces.shared_store() is None else 2)
    # Two turns of one session (one date) arrive: the write drops what was known, the next search reads dates.
    _add_dated(server, client, ns, "Ben adopted a kitten named Tom.", "2023-05-01")
    _add_dated(server, client, ns, "What a lovely surprise that is.", "2023-05-01")
    body = {"query": "kitten lovely", "searchMode": "chunks", "threshold": 0, "limit": 10}
    assert _coverage(_search(server, ns, body), "What a lovely surprise that is.") == 1.0
    # Now dated: a search asks it once (over a shared store, each asking is a round trip), or not at all.
    asked.clear()
    _search(server, ns, body)
    probes = len([sql for sql in asked if "date IS NOT NULL" in sql])
    assert probes <= (0 if server.app.state.spaces.shared_store() is None else 1)


def test_a_collections_declaration_is_read_once_until_it_changes(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    spaces = Collections(tmp_path)
    try:
        spaces.ensure_collection(A, ModelIdentity("m1", "d1", 8))
        reads: list[str] = []
        collection = spaces.store.collection
        monkeypatch.setattr(spaces.store, "collection", lambda uri: reads.append(uri) or collection(uri))
        assert spaces.info(A).model == ModelIdentity("m1", "d1", 8)
        assert spaces.info(A).model == ModelIdentity("m1", "d1", 8)
        assert reads == [A]
        spaces.set_next_model(A, ModelIdentity("m2", "d2", 8))
        assert spaces.info(A).next_model == ModelIdentity("m2", "d2", 8)
        spaces.switch_model(A)
        assert spaces.info(A).model == ModelIdentity("m2", "d2", 8) and spaces.info(A).next_model is None
        spaces.ensure_collection(A, ModelIdentity("m3", "d3", 4))
        assert spaces.info(A).model == ModelIdentity("m3", "d3", 4)
        before = spaces.info(A).seq
        spaces.write(A, [StoredDocument(Document("a1", "", "one", (), None, 1))])
        assert spaces.info(A).seq == before + 1 == spaces.current([A])[A].seq
        spaces.drop(A)
        with pytest.raises(UnknownSpace):
            spaces.info(A)
        assert spaces.current([A]) == {}
    finally:
        spaces.close()


def test_a_read_only_opening_reads_the_declaration_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = Collections(tmp_path)
    writer.ensure_collection(A, ModelIdentity("m1", "d1", 8))
    writer.catch_up()
    reader = Collections(tmp_path, read_only=True, lock=False)
    try:
        assert reader.info(A).model == ModelIdentity("m1", "d1", 8)
        # Another process (the writer) moves the collection to another model: the reader sees it at once.
        writer.set_next_model(A, ModelIdentity("m2", "d2", 8))
        writer.switch_model(A)
        assert reader.info(A).model == ModelIdentity("m2", "d2", 8)
    finally:
        reader.close()
        writer.close()


def _memory_coverage(results: list[dict[str, Any]], memory: str) -> float:
    """The keyword coverage of the result whose memory is `memory`."""
    found = [r for r in results if r.get("memory") == memory]
    assert found, results
    coverage: float = found[0]["explanation"]["keywordCoverage"]
    return coverage


def test_a_memory_holds_the_words_of_the_memory_before_it_until_a_new_date_parts_them(
        server: Server, client: Supermemory, ns: str) -> None:
    _add_dated(server, client, ns, "Ana adopted a puppy named Rex.", "2023-05-01")
    later = _add_dated(server, client, ns, "That is wonderful news for the family.", "2023-05-01")
    body = {"query": "puppy wonderful", "searchMode": "memories", "threshold": 0, "limit": 10}
    # One session (one date): the second turn's memory holds "puppy" through the memory before it.
    assert _memory_coverage(_search(server, ns, body), "That is wonderful news for the family.") == 1.0
    patched = httpx.patch(f"{server.url}/ns/{ns}/document/{later}", json={"date": "2023-06-09"},
                          headers={"Authorization": f"Bearer {server.key}"})
    assert patched.status_code == 200, patched.text
    wait_done(client, ns, later)
    # Another date: another session, and the next search sees it.
    assert _memory_coverage(_search(server, ns, body), "That is wonderful news for the family.") < 1.0


def test_memories_in_context_are_judged_without_reading_a_record_of_the_index(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _add_dated(server, client, ns, "Ana adopted a puppy named Rex.", "2023-05-01")
    _add_dated(server, client, ns, "That is wonderful news for the family.", "2023-05-01")
    face = server.app.state.supermemory
    index = face.collections.index(f"supermemory:{ns}:memories")

    def no_fetch(ords: Any) -> Any:
        raise AssertionError(f"read the records of {ords}")

    monkeypatch.setattr(index, "fetch", no_fetch)
    body = {"query": "puppy wonderful", "searchMode": "memories", "threshold": 0, "limit": 10}
    assert _memory_coverage(_search(server, ns, body), "That is wonderful news for the family.") == 1.0


def test_memories_written_before_records_named_their_document_have_no_neighbours(
        server: Server, client: Supermemory, ns: str) -> None:
    _add_dated(server, client, ns, "Ana adopted a puppy named Rex.", "2023-05-01")
    _add_dated(server, client, ns, "That is wonderful news for the family.", "2023-05-01")
    face = server.app.state.supermemory
    name = f"supermemory:{ns}:memories"
    info = face.collections.info(name)
    ids = [row[0] for row in face.store.query("SELECT id FROM sm_memories WHERE ns=?", (ns,))]
    older = []
    for memory_id in ids:  # the records as an older version wrote them: no author
        found = face.store.document_by_id(info.id, memory_id)
        assert found is not None and found[1].author
        older.append(StoredDocument(dataclasses.replace(found[1], author="")))
    face.collections.write(name, older)
    body = {"query": "puppy wonderful", "searchMode": "memories", "threshold": 0, "limit": 10}
    assert _memory_coverage(_search(server, ns, body), "That is wonderful news for the family.") < 1.0


def test_a_chunk_holds_the_words_of_the_chunk_before_it_in_its_own_document_without_any_date(
        server: Server, client: Supermemory, ns: str) -> None:
    # Three chunks: the first holds the puppy, the second and third only the neighbours' words.
    first = "Ana adopted a puppy named Rex at the shelter on the hill. " * 24
    second = "The neighbours thought it was wonderful news for the whole street. " * 24
    add_done(client, ns, first + "\n\n" + second)
    add_done(client, ns, "The bakery sells rye bread and wonderful cakes.")
    body = {"query": "puppy wonderful", "searchMode": "chunks", "threshold": 0, "limit": 10}
    results = _search(server, ns, body)
    chunks = [r for r in results if "neighbours" in r["chunk"] and "puppy" not in r["chunk"].lower()]
    assert chunks, [r["chunk"][:40] for r in results]
    # The document's later chunk holds "puppy" through the chunk before it; the bakery's, of another
    # document with no date, holds "wonderful" alone.
    assert max(c["explanation"]["keywordCoverage"] for c in chunks) == 1.0
    assert _coverage(results, "The bakery sells rye bread and wonderful cakes.") < 1.0


def test_a_documents_processing_keeps_what_filters_know_of_the_namespaces_documents(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Filters read every document's metadata once per change of the documents: forming a document's
    # chunks and memories (or failing to) changes none of it, so it must not make a filter read them all.
    add_done(client, ns, "Ana adopted a puppy named Rex.", metadata={"kind": "pet"})
    pipeline = server.app.state.supermemory_pipeline
    pipeline.stop()
    late = client.add(ns, content="Ben adopted a kitten named Tom.", metadata={"kind": "pet"}).id
    body: dict[str, Any] = {"query": "adopted", "search_mode": "memories", "threshold": 0,
                            "filter": {"field": "kind", "operator": "eq", "value": "pet"}}
    client.search(ns, **body)  # the added document is known to filters, though not yet processed
    store = server.app.state.supermemory.store
    asked: list[str] = []
    query = store.query
    monkeypatch.setattr(store, "query", lambda sql, params=(): asked.append(sql) or query(sql, params))
    # A new pipeline, as a restart makes: it takes up the queued document.
    server.app.state.supermemory_pipeline = restarted = Pipeline(server.app.state.supermemory)
    restarted.start()
    wait_done(client, ns, late)
    assert "Ben adopted a kitten named Tom." in {r.memory for r in client.search(ns, **body).results}
    assert not [sql for sql in asked if sql.startswith("SELECT id, metadata, grp")]


def test_a_write_of_a_document_updates_what_filters_know_of_it_alone(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # What filters test is every document's metadata, read once; a document added, changed or removed
    # afterwards is read (or dropped) alone, not the namespace again.
    first = add_done(client, ns, "Ana adopted a puppy named Rex.", metadata={"kind": "pet"})
    body: dict[str, Any] = {"query": "adopted", "search_mode": "memories", "threshold": 0,
                            "filter": {"field": "kind", "operator": "eq", "value": "pet"}}
    client.search(ns, **body)
    store = server.app.state.supermemory.store
    asked: list[str] = []
    query = store.query
    monkeypatch.setattr(store, "query", lambda sql, params=(): asked.append(sql) or query(sql, params))
    second = add_done(client, ns, "Ben adopted a kitten named Tom.", metadata={"kind": "pet"})
    assert {r.memory for r in client.search(ns, **body).results} == {
        "Ana adopted a puppy named Rex.", "Ben adopted a kitten named Tom."}
    client.documents.update(ns, first, metadata={"kind": "toy"})
    wait_done(client, ns, first)
    assert {r.memory for r in client.search(ns, **body).results} == {"Ben adopted a kitten named Tom."}
    client.documents.delete(ns, ids=[second])
    assert client.search(ns, **body).results == []
    assert not [sql for sql in asked if sql.startswith("SELECT id, metadata, grp FROM sm_documents WHERE ns=?")
                and "id IN" not in sql]
