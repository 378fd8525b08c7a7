"""The SQLite record store: writes, the change log, and idempotent re-writes."""

import sqlite3
from pathlib import Path

import pytest

from engram_index.engine.types import Document, ModelIdentity
from engram_index.errors import UnknownSpace
from engram_index.store.sqlite import Store, StoredDocument

URI = "at://did:plc:abc/space/garden.engram.space/s"


def put(i: int, text: str = "t", **kw: object) -> StoredDocument:
    return StoredDocument(Document(id=f"d{i}", author="did:plc:a", text=text, **kw))  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "records.sqlite")
    s.ensure_collection(URI, ModelIdentity("m", "d", 4), "doc: ", "query: ")
    return s


def test_unknown_space_is_an_error(store: Store) -> None:
    with pytest.raises(UnknownSpace):
        store.collection("at://did:plc:zzz/space/garden.engram.space/none")


def test_space_declaration_round_trips(store: Store) -> None:
    info = store.collection(URI)
    assert info.model == ModelIdentity("m", "d", 4)
    assert (info.document_prefix, info.query_prefix) == ("doc: ", "query: ")


def test_writes_assign_dense_ordinals_and_one_sequence_per_batch(store: Store) -> None:
    sid = store.collection(URI).id
    first = store.write(sid, [put(0), put(1)])
    second = store.write(sid, [put(2)])
    assert [c.ord for c in first.changes] == [0, 1] and first.seq == 1
    assert [c.ord for c in second.changes] == [2] and second.seq == 2


def test_rewriting_the_same_content_changes_nothing(store: Store) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(0, tags=("a",))])
    again = store.write(sid, [put(0, tags=("a",), indexed_ms=99)])
    assert again.changes == [] and again.unchanged == 1
    assert store.collection(URI).seq == 1


def test_replacing_keeps_the_ordinal_and_deleting_leaves_a_tombstone_in_the_log(store: Store) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(0), put(1)])
    store.write(sid, [put(0, "new")], deletes=["d1"])
    changes = [c for batch in store.changes_since(sid, 1) for c in batch]
    assert [(c.ord, c.document.text if c.document else None) for c in changes] == [(0, "new"), (1, None)]
    assert store.count(sid) == 1
    assert store.documents(sid, [0, 1]).keys() == {0}


def test_changes_since_pages_through_everything_after_a_sequence(store: Store) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(i) for i in range(5)])
    store.write(sid, [put(i) for i in range(5, 9)])
    pages = list(store.changes_since(sid, 0, batch=3))
    assert [len(p) for p in pages] == [3, 3, 3]
    assert [c.ord for c in sum(pages, [])] == list(range(9))
    assert [c.ord for p in store.changes_since(sid, 1) for c in p] == list(range(5, 9))


def test_documents_round_trip_every_field(store: Store) -> None:
    sid = store.collection(URI).id
    doc = Document(id="x", author="did:plc:q", text="héllo", tags=("a", "b"), source="src",
                   created_ms=5, indexed_ms=6, metadata={"cid": "bafy"}, vector=b"\x00\x3c" * 4)
    store.write(sid, [StoredDocument(doc)])
    assert store.documents(sid, [0])[0] == doc
    assert store.document_by_id(sid, "x") == (0, doc)


def test_metadata_reads_back_exactly_as_written_even_where_a_fast_parser_would_not(store: Store) -> None:
    sid = store.collection(URI).id
    metadata = {"big": 2**70 + 1, "negative": -(2**63) - 1, "edge": 2**64 - 1, "nan_free": 0.1, "text": "1" * 25,
                "nested": [{"x": 1e308, "y": -0.0}], "é": "ü"}
    doc = Document(id="m", author="did:plc:q", text="t", tags=("1" * 30, "x" * 40), source=None,
                   created_ms=1, indexed_ms=2, metadata=metadata)
    store.write(sid, [StoredDocument(doc)])
    got = store.documents(sid, [0])[0]
    assert got.metadata == metadata and got.tags == doc.tags
    assert type(got.metadata["big"]) is int and got.metadata["big"] == 2**70 + 1


def test_a_reopened_store_keeps_everything(store: Store, tmp_path: Path) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(0)])
    store.close()
    again = Store(tmp_path / "records.sqlite")
    assert again.count(sid) == 1 and again.collection(URI).seq == 1


def test_paging_the_change_log_seeks_the_index_instead_of_scanning(store: Store) -> None:
    from engram_index.store.sqlite import _CHANGES_SQL

    plan = store._reader().execute("EXPLAIN QUERY PLAN " + _CHANGES_SQL, (1, 0, 0, 10)).fetchall()
    assert "(seq,ord)>(?,?)" in plan[0][3].replace(" ", "")


def listed(store: Store, sid: int, limit: int = 100, **kw: object) -> list[str]:
    return [d.id for _, d in store.recent(sid, limit, **kw)]  # type: ignore[arg-type]


def test_recent_lists_live_documents_newest_first_then_by_id_descending(store: Store) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(0, created_ms=5), put(1, created_ms=7), put(2, created_ms=7), put(3, created_ms=1)])
    store.write(sid, [], deletes=["d3"])
    assert listed(store, sid) == ["d2", "d1", "d0"]
    assert listed(store, sid, before=(7, "d2")) == ["d1", "d0"]
    assert listed(store, sid, before=(7, "d1")) == ["d0"]
    assert listed(store, sid, 1) == ["d2"]
    assert all(d.vector is None for _, d in store.recent(sid, 10))


def test_recent_filters_by_author_every_tag_and_having_a_vector(store: Store) -> None:
    sid = store.collection(URI).id
    store.write(sid, [
        put(0, tags=("a", "b"), created_ms=1, vector=b"\0" * 8),
        put(1, tags=("a",), created_ms=2),
        StoredDocument(Document(id="d2", author="did:plc:b", text="t", tags=("a", "b"), created_ms=3)),
        put(3, tags=('say "a"', "a\\b"), created_ms=4),
    ])
    assert listed(store, sid, tags=["a"]) == ["d2", "d1", "d0"]
    assert listed(store, sid, tags=["a", "b"]) == ["d2", "d0"]
    assert listed(store, sid, tags=["a", "b", "a"]) == ["d2", "d0"]
    assert listed(store, sid, tags=["a", "b"], author="did:plc:a") == ["d0"]
    assert listed(store, sid, tags=['say "a"', "a\\b"]) == ["d3"]
    assert listed(store, sid, tags=["say"]) == []
    assert listed(store, sid, with_vector=True) == ["d0"]


def test_listing_pages_seek_the_creation_time_index(store: Store) -> None:
    sid = store.collection(URI).id
    seen: list[str] = []
    conn = store._reader()
    conn.set_trace_callback(seen.append)
    store.recent(sid, 10, before=(5, "x"), author="did:plc:a", tags=["a"])
    conn.set_trace_callback(None)
    sql = next(s for s in seen if s.startswith("SELECT"))
    plan = " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert "USING INDEX documents_by_created" in plan and "created_ms<" in plan.replace(" ", "")


def test_skipped_counts_live_documents_by_author_and_reason(store: Store) -> None:
    sid = store.collection(URI).id
    other = Document(id="d9", author="did:plc:b", text="t")
    store.write(sid, [
        StoredDocument(put(0).document, skip_reason="model mismatch"),
        StoredDocument(put(1).document, skip_reason="model mismatch"),
        StoredDocument(put(2).document, skip_reason="bad vector"),
        StoredDocument(other, skip_reason="model mismatch"),
        put(3),
    ])
    store.write(sid, [], deletes=["d1"])
    assert store.skipped(sid) == [
        ("did:plc:a", "bad vector", 1), ("did:plc:a", "model mismatch", 1), ("did:plc:b", "model mismatch", 1),
    ]


def _page_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def test_a_new_store_uses_pages_large_enough_for_a_memory_with_its_vector(tmp_path: Path) -> None:
    # A 384-dimension float16 vector alone is 768 bytes: with 4 KB pages a row of this
    # WITHOUT ROWID table spills past ~1 KB into an overflow page of its own.
    Store(tmp_path / "records.sqlite").close()
    assert _page_size(tmp_path / "records.sqlite") == 16384


def test_a_store_made_with_small_pages_still_opens_and_keeps_its_pages(old_data_dir: Path) -> None:
    path = old_data_dir / "records.sqlite"
    store = Store(path)
    store.ensure_collection(URI, ModelIdentity("m", "d", 4))
    sid = store.collection(URI).id
    store.write(sid, [put(0, "kept")])
    assert store.documents(sid, [0])[0].text == "kept"
    store.close()
    assert _page_size(path) == 4096


def test_repacking_a_store_with_small_pages_moves_it_to_large_pages_and_keeps_everything(old_data_dir: Path) -> None:
    path = old_data_dir / "records.sqlite"
    store = Store(path)
    store.ensure_collection(URI, ModelIdentity("m", "d", 4))
    sid = store.collection(URI).id
    store.write(sid, [put(i, f"memory {i} " * 40, vector=bytes(768)) for i in range(300)])
    assert store.page_size() == 4096
    before, after = store.repack()
    assert store.page_size() == 16384 and after < before
    assert store.documents(sid, [0, 299])[299].text == "memory 299 " * 40
    store.write(sid, [put(300, "written after")])  # still a working WAL store
    store.close()
    reopened = Store(path)
    assert reopened.count(sid) == 301 and reopened.page_size() == 16384
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_repacking_a_store_that_already_has_large_pages_changes_nothing(store: Store) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(0, "kept")])
    assert store.repack() is None
    assert store.documents(sid, [0])[0].text == "kept"


def test_opening_a_data_directory_whose_store_has_small_pages_says_how_to_repack_it(
    old_data_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from engram_index.collections import Collections

    with caplog.at_level("WARNING"):
        Collections(old_data_dir).close()
    assert f"engram-index repack --data {old_data_dir}" in caplog.text
    caplog.clear()
    fresh = tmp_path / "fresh"
    with caplog.at_level("WARNING"):
        Collections(fresh).close()
    assert "repack" not in caplog.text
