"""A process that does not make every write of its store (a `--workers` reader, a node over a shared
PostgreSQL store) learns which documents changed from the store's log of changes, and reads only those."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram_index.collections import Collections
from engram_index.embed.hashing import HashingEmbedder
from engram_index.keys import KeyStore
from engram_index.supermemory import documents, face as face_module
from engram_index.supermemory.face import Face

EVERY_DOCUMENT = "SELECT id, metadata, grp FROM sm_documents WHERE ns=?"


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Face, Face]]:
    """A writing face and a read-only face over one data directory."""
    spaces = Collections(tmp_path)
    writer = Face(spaces, KeyStore(tmp_path), HashingEmbedder())
    documents.add(writer, "n", {"content": "the first document", "metadata": {"i": 0}}, None)
    readers = Collections(tmp_path, read_only=True, lock=False)
    reader = Face(readers, KeyStore(tmp_path), HashingEmbedder(), read_only=True)
    try:
        yield writer, reader
    finally:
        reader.close()
        writer.close()
        readers.close()
        spaces.close()


def _stored(face: Face, ns: str) -> dict[str, dict[str, Any]]:
    """Every document's filterable metadata, read from the store's rows (the oracle)."""
    return {r[0]: {**json.loads(r[2]), **json.loads(r[1])}
            for r in face.store.query("SELECT id, metadata, grp FROM sm_documents WHERE ns=? ORDER BY id", (ns,))}


def _asked(face: Face, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL the face's store is asked from now on."""
    asked: list[str] = []
    query = face.store.query
    monkeypatch.setattr(face.store, "query", lambda sql, params=(): asked.append(sql) or query(sql, params))
    return asked


def test_a_reader_reads_again_only_the_documents_another_process_added_changed_or_removed(
        pair: tuple[Face, Face], monkeypatch: pytest.MonkeyPatch) -> None:
    writer, reader = pair
    first = next(iter(_stored(writer, "n")))
    documents.batch(writer, "n", {"documents": [{"content": f"doc {i}", "metadata": {"i": i}} for i in range(20, 40)]})
    assert reader.metadata("n") == _stored(writer, "n")
    second, _ = documents.add(writer, "n", {"content": "the second", "metadata": {"i": 1}}, None)
    documents.batch(writer, "n", {"documents": [{"content": "third", "metadata": {"i": 2}},
                                                {"content": "fourth", "metadata": {"i": 3}}]})
    asked = _asked(reader, monkeypatch)
    assert reader.metadata("n") == _stored(writer, "n")
    # (No pipeline here: the documents stand as processed, which a change of metadata waits for.)
    writer.store.execute([("UPDATE sm_documents SET status='done' WHERE ns=?", ("n",))])
    documents.patch(writer, "n", first, {"metadata": {"i": 10}})
    documents.remove(writer, "n", second)
    assert reader.metadata("n") == _stored(writer, "n")
    assert not [sql for sql in asked if sql.startswith(EVERY_DOCUMENT) and "id IN" not in sql]
    assert [sql for sql in asked if sql.startswith(EVERY_DOCUMENT) and "id IN" in sql]


def test_a_reader_reads_every_document_again_when_the_log_no_longer_holds_the_changes_since_its_read(
        pair: tuple[Face, Face], monkeypatch: pytest.MonkeyPatch) -> None:
    writer, reader = pair
    monkeypatch.setattr(face_module, "CHANGES_KEPT", 2)
    reader.metadata("n")
    for i in range(1, 5):
        documents.add(writer, "n", {"content": f"document {i}", "metadata": {"i": i}}, None)
    asked = _asked(reader, monkeypatch)
    assert reader.metadata("n") == _stored(writer, "n")
    assert [sql for sql in asked if sql.startswith(EVERY_DOCUMENT) and "id IN" not in sql]
    assert len(writer.store.query("SELECT seq FROM sm_doc_changes WHERE ns=?", ("n",))) <= 2


def test_a_reader_reads_every_document_again_after_a_change_that_names_none(
        pair: tuple[Face, Face], monkeypatch: pytest.MonkeyPatch) -> None:
    writer, reader = pair
    reader.metadata("n")
    writer.store.execute(writer.documents_changed("n"))  # (a change of unnamed documents: a namespace moved in)
    asked = _asked(reader, monkeypatch)
    assert reader.metadata("n") == _stored(writer, "n")
    assert [sql for sql in asked if sql.startswith(EVERY_DOCUMENT) and "id IN" not in sql]


def test_a_deleted_namespace_leaves_no_log_of_its_document_changes(pair: tuple[Face, Face]) -> None:
    from engram_index.supermemory import namespaces

    writer, reader = pair
    reader.metadata("n")
    namespaces.delete_namespace(writer, "n", None, lambda ns: True)
    assert writer.store.query("SELECT count(*) FROM sm_doc_changes WHERE ns=?", ("n",))[0][0] == 0
    assert reader.metadata("n") == {}
    documents.add(writer, "n", {"content": "a new namespace of the same name", "metadata": {"i": 7}}, None)
    assert reader.metadata("n") == _stored(writer, "n")


def test_a_reader_reads_every_document_again_when_the_changes_since_named_more_than_a_quarter_of_them(
        pair: tuple[Face, Face], monkeypatch: pytest.MonkeyPatch) -> None:
    writer, reader = pair
    reader.metadata("n")
    documents.add(writer, "n", {"content": "a second document", "metadata": {"i": 1}}, None)
    documents.add(writer, "n", {"content": "a third document", "metadata": {"i": 2}}, None)
    asked = _asked(reader, monkeypatch)
    assert reader.metadata("n") == _stored(writer, "n")
    assert [sql for sql in asked if sql.startswith(EVERY_DOCUMENT) and "id IN" not in sql]
