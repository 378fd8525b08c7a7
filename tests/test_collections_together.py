"""Writes to several collections commit together: all of them, or (when any part fails) none."""

import sqlite3
from pathlib import Path

import pytest

from engram_index.collections import Collections
from engram_index.engine.types import Document, ModelIdentity, SearchRequest
from engram_index.store.sqlite import StoredDocument

A, B = "supermemory:t:chunks", "supermemory:t:memories"


def put(doc_id: str, text: str) -> StoredDocument:
    """A document without a vector."""
    return StoredDocument(Document(doc_id, "", text, (), None, 1))


def found(spaces: Collections, uri: str, word: str) -> list[str]:
    """The ids a keyword search finds."""
    return [h.document.id for h in spaces.search(uri, SearchRequest(mode="keyword", q=word, limit=5,
                                                                      explain=False)).hits]


def test_writes_to_two_collections_in_one_call_are_both_stored_and_searchable(tmp_path: Path) -> None:
    spaces = Collections(tmp_path)
    try:
        for uri in (A, B):
            spaces.ensure_collection(uri, ModelIdentity("m", "d", 8))
        spaces.write_many([(A, [put("a1", "the qubblefit chunk")], []), (B, [put("b1", "the qubblefit memory")], [])])
        assert found(spaces, A, "qubblefit") == ["a1"] and found(spaces, B, "qubblefit") == ["b1"]
        results = spaces.write_many([(A, [], ["a1"]), (B, [], ["b1"])])
        assert [len(r.changes) for r in results] == [1, 1]
        assert found(spaces, A, "qubblefit") == [] and found(spaces, B, "qubblefit") == []
    finally:
        spaces.close()


def test_a_write_to_two_collections_whose_last_statement_fails_leaves_both_as_they_were(tmp_path: Path) -> None:
    spaces = Collections(tmp_path)
    try:
        for uri in (A, B):
            spaces.ensure_collection(uri, ModelIdentity("m", "d", 8))
        spaces.write_many([(A, [put("a1", "the zimbrox chunk")], []), (B, [put("b1", "the zimbrox memory")], [])])
        with pytest.raises(sqlite3.OperationalError):
            spaces.write_many([(A, [], ["a1"]), (B, [], ["b1"])], also=[("DELETE FROM no_such_table", ())])
        assert found(spaces, A, "zimbrox") == ["a1"] and found(spaces, B, "zimbrox") == ["b1"]
    finally:
        spaces.close()
