"""One contract for every record store: the same writes give the same reads on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_index.collections import Collections
from engram_index.engine.types import Document, ModelIdentity, Placed, SearchRequest
from engram_index.errors import InvalidInput, StorageError, StoreConflict, UnknownSpace
from engram_index.keys import KeyState, KeyStore
from engram_index.kindgi import schema as kindgi_schema
from engram_index.store.base import RecordStore, StoredDocument
from engram_index.store.opening import open_store
from engram_index.supermemory import tables as sm_tables

URI = "at://did:plc:abc/space/garden.engram.space/s"


def put(i: int, text: str = "t", **kw: object) -> StoredDocument:
    return StoredDocument(Document(id=f"d{i}", author="did:plc:a", text=text, **kw))  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path, store_url: str | None) -> Iterator[RecordStore]:
    opened = open_store(tmp_path, store_url)
    opened.ensure_collection(URI, ModelIdentity("m", "d", 4), "doc: ", "query: ")
    yield opened
    opened.close()


def test_an_unknown_space_is_an_error_and_a_declared_one_round_trips(store: RecordStore) -> None:
    with pytest.raises(UnknownSpace):
        store.collection("at://did:plc:zzz/space/garden.engram.space/none")
    info = store.collection(URI)
    assert (info.model, info.document_prefix, info.query_prefix) == (ModelIdentity("m", "d", 4), "doc: ", "query: ")
    assert store.collections() == [URI]


def test_several_collections_are_read_in_one_call_and_absent_ones_are_left_out(store: RecordStore) -> None:
    other = "at://did:plc:abc/space/garden.engram.space/t"
    store.ensure_collection(other, ModelIdentity("m", "d", 4), "", "")
    store.write(store.collection(other).id, [put(0)])
    found = store.collection_infos([URI, other, "at://did:plc:zzz/space/garden.engram.space/none"])
    assert found == {URI: store.collection(URI), other: store.collection(other)}
    assert found[other].seq == 1 and store.collection_infos([]) == {}


def test_writes_assign_dense_ordinals_and_one_sequence_per_batch(store: RecordStore) -> None:
    sid = store.collection(URI).id
    first = store.write(sid, [put(0), put(1)])
    second = store.write(sid, [put(2)])
    assert [c.ord for c in first.changes] == [0, 1] and first.seq == 1
    assert [c.ord for c in second.changes] == [2] and second.seq == 2


def test_rewriting_the_same_content_changes_nothing(store: RecordStore) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(0, tags=("a",))])
    again = store.write(sid, [put(0, tags=("a",), indexed_ms=99)])
    assert again.changes == [] and again.unchanged == 1 and store.collection(URI).seq == 1


def test_the_same_id_twice_in_one_batch_keeps_one_ordinal_and_the_last_content(store: RecordStore) -> None:
    sid = store.collection(URI).id
    result = store.write(sid, [put(0, "a"), put(0, "b")])
    assert [c.ord for c in result.changes] == [0, 0]
    found = store.document_by_id(sid, "d0")
    assert found is not None and found[1].text == "b" and store.collection(URI).next_ord == 1


def test_replacing_keeps_the_ordinal_and_deleting_leaves_a_tombstone_in_the_log(store: RecordStore) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(0), put(1)])
    store.write(sid, [put(0, "new")], deletes=["d1", "never-there"])
    changes = [c for batch in store.changes_since(sid, 1) for c in batch]
    assert [(c.ord, c.document.text if c.document else None) for c in changes] == [(0, "new"), (1, None)]
    assert store.count(sid) == 1 and store.documents(sid, [0, 1]).keys() == {0}


def test_changes_since_pages_through_everything_after_a_sequence(store: RecordStore) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(i) for i in range(5)])
    store.write(sid, [put(i) for i in range(5, 9)])
    pages = list(store.changes_since(sid, 0, batch=3))
    assert [len(p) for p in pages] == [3, 3, 3]
    assert [c.ord for p in pages for c in p] == list(range(9))
    assert [c.ord for p in store.changes_since(sid, 1) for c in p] == list(range(5, 9))


def test_placed_fields_page_through_the_live_documents_in_sequence_order_without_their_text(
        store: RecordStore) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(i, tags=(f"t{i}", "x"), source=f"s{i % 2}", created_ms=10 + i, vector=bytes([i, 0]) * 4)
                      for i in range(5)])
    store.write(sid, [put(1, "new", tags=("n",), created_ms=99, vector=None)], deletes=["d3"])
    pages = list(store.placed_fields(sid, batch=2))
    assert [len(p) for p in pages] == [2, 2]
    rows = [row for page in pages for row in page]
    # Sequence order: the documents of the first write, then d1 as rewritten; the deleted d3 left out.
    assert [o for o, _ in rows] == [0, 2, 4, 1]
    assert rows[3] == (1, Placed("d1", "did:plc:a", ("n",), None, 99, None))
    assert rows[0] == (0, Placed("d0", "did:plc:a", ("t0", "x"), "s0", 10, bytes([0, 0]) * 4))
    assert [p.vector for _, p in store.placed_fields(sid, vectors=False).__next__()] == [None] * 4


def test_documents_round_trip_every_field(store: RecordStore) -> None:
    sid = store.collection(URI).id
    doc = Document(id="x", author="did:plc:q", text="héllo 🌍", tags=("a", "b"), source="src",
                   created_ms=1_764_000_000_000, indexed_ms=6, metadata={"cid": "bafy", "n": [1, 2]},
                   vector=b"\x00\x3c" * 4, next_vector=b"\x01" * 8)
    store.write(sid, [StoredDocument(doc)])
    assert store.documents(sid, [0])[0] == doc
    assert store.documents(sid, [0], vectors=False)[0].vector is None
    assert store.document_by_id(sid, "x") == (0, doc)


def test_recent_pages_newest_first_by_keyset_with_author_tag_and_vector_filters(store: RecordStore) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(i, created_ms=i // 2, tags=("even",) if i % 2 == 0 else ("odd", "x y"),
                          vector=b"\x00\x3c" * 4 if i < 3 else None) for i in range(6)])
    ids = [d.id for _, d in store.recent(sid, 10)]
    assert ids == ["d5", "d4", "d3", "d2", "d1", "d0"]
    assert [d.id for _, d in store.recent(sid, 2, before=(2, "d4"))] == ["d3", "d2"]
    assert [d.id for _, d in store.recent(sid, 10, tags=["x y"])] == ["d5", "d3", "d1"]
    assert [d.id for _, d in store.recent(sid, 10, tags=["od"])] == []
    assert [d.id for _, d in store.recent(sid, 10, with_vector=True)] == ["d2", "d1", "d0"]
    assert store.recent(sid, 10, author="did:plc:nobody") == []


def test_skipped_counts_unindexed_vectors_by_author_and_reason(store: RecordStore) -> None:
    sid = store.collection(URI).id
    store.write(sid, [StoredDocument(Document(id=f"s{i}", author="did:plc:a", text="t"), "too long") for i in range(3)])
    assert store.skipped(sid) == [("did:plc:a", "too long", 3)]


def test_a_move_to_a_new_model_promotes_each_next_vector(store: RecordStore) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(0, vector=b"\x00" * 8, next_vector=b"\x01" * 16), put(1, vector=b"\x00" * 8)])
    store.set_next_model(URI, ModelIdentity("m2", "d2", 8))
    assert store.collection(URI).next_model == ModelIdentity("m2", "d2", 8)
    store.promote_next(URI)
    info = store.collection(URI)
    assert info.model == ModelIdentity("m2", "d2", 8) and info.next_model is None
    docs = store.documents(sid, [0, 1])
    assert docs[0].vector == b"\x01" * 16 and docs[1].vector is None
    assert store.skipped(sid) == [("did:plc:a", "no vector for the new model", 1)]


def test_a_failing_statement_rolls_the_whole_write_back(store: RecordStore) -> None:
    sid = store.collection(URI).id
    store.execute([("CREATE TABLE t_once (k TEXT PRIMARY KEY)", ())])
    store.write(sid, [put(0)], also=[("INSERT INTO t_once(k) VALUES (?)", ("a",))])
    with pytest.raises(Exception):
        store.write(sid, [put(1)], also=[("INSERT INTO t_once(k) VALUES (?)", ("a",))])
    assert store.count(sid) == 1 and store.collection(URI).seq == 1
    assert store.query("SELECT k FROM t_once") == [("a",)]


def test_write_many_commits_several_collections_together(store: RecordStore) -> None:
    other = store.ensure_collection("supermemory:n:chunks")
    sid = store.collection(URI).id
    results = store.write_many([(sid, [put(0)], []), (other.id, [put(0), put(1)], [])])
    assert [r.seq for r in results] == [1, 1]
    assert store.count(sid) == 1 and store.count(other.id) == 2


def test_a_nul_character_is_kept_by_sqlite_and_refused_as_bad_input_by_postgresql(
        store: RecordStore, store_url: str | None) -> None:
    sid = store.collection(URI).id
    if store_url is None:
        store.write(sid, [put(0, "a\x00b")])
        assert store.documents(sid, [0])[0].text == "a\x00b"
    else:
        with pytest.raises(InvalidInput, match="NUL"):
            store.write(sid, [put(0, "a\x00b")])
        assert store.count(sid) == 0 and store.collection(URI).seq == 0


def test_a_duplicate_key_from_a_racing_writer_is_a_retryable_503_on_postgresql(
        store: RecordStore, store_url: str | None) -> None:
    store.execute([("CREATE TABLE t_race (k TEXT PRIMARY KEY)", ()), ("INSERT INTO t_race(k) VALUES ('a')", ())])
    with pytest.raises(StoreConflict if store_url else sqlite3.IntegrityError):
        store.execute([("INSERT INTO t_race(k) VALUES ('a')", ())])
    assert store.query("SELECT count(*) FROM t_race") == [(1,)]


def test_dropping_a_space_removes_its_records(store: RecordStore) -> None:
    sid = store.collection(URI).id
    store.write(sid, [put(0)])
    assert store.drop_collection(URI) == sid and store.drop_collection(URI) is None
    with pytest.raises(UnknownSpace):
        store.collection(URI)


def test_faces_sql_reads_alike_upserts_blobs_json_and_booleans(store: RecordStore) -> None:
    store.execute([("CREATE TABLE t_kv (k TEXT NOT NULL, n INTEGER NOT NULL, v BLOB, j TEXT,"
                    " PRIMARY KEY (k, n)) WITHOUT ROWID", ())])
    store.execute([
        ("INSERT OR IGNORE INTO t_kv(k, n, v, j) VALUES (?, ?, ?, ?)", ("a", 1, b"abc", '["x", "y"]')),
        ("INSERT OR IGNORE INTO t_kv(k, n, v, j) VALUES (?, ?, ?, ?)", ("a", 1, b"zzz", "[]")),
        ("INSERT OR REPLACE INTO t_kv(k, n, v, j) VALUES (?, ?, ?, ?)", ("b", 2, b"hello", '{"s": {"q": 5}}')),
        ("INSERT OR REPLACE INTO t_kv(k, n, v, j) VALUES (?, ?, ?, ?)", ("b", 2, b"hello!", '{"s": {"q": 6}}')),
        ("INSERT INTO t_kv(k, n, v, j) VALUES (?, ?, x'', '\"100%\"')", ("c", True)),
    ])
    assert store.query("SELECT k, n, v FROM t_kv ORDER BY k") == [("a", 1, b"abc"), ("b", 2, b"hello!"), ("c", 1, b"")]
    assert store.query("SELECT k FROM t_kv WHERE instr(v, ?) > 0", (b"ell",)) == [("b",)]
    assert store.query("SELECT k FROM t_kv WHERE instr(j, ?) > 0", ("%",)) == [("c",)]
    assert store.query("SELECT value FROM json_each(?) ORDER BY value", ('["b", "a"]',)) == [("a",), ("b",)]
    assert store.query("SELECT k FROM t_kv WHERE json_extract(j, ?) = json(?)", ('$."s"', '{"q": 6}')) == [("b",)]
    assert store.query("SELECT count(*), sum(n), EXISTS (SELECT 1 FROM t_kv WHERE k = ?) FROM t_kv", ("a",)) \
        == [(3, 4, 1)]


def test_faces_migrations_run_once_on_either_store(store: RecordStore) -> None:
    for _ in range(2):
        kindgi_schema.migrate(store)
        sm_tables.migrate(store)
    assert store.query("SELECT version FROM kindgi_schema") == [(len(kindgi_schema.MIGRATIONS),)]
    assert store.query("SELECT version FROM sm_schema") == [(len(sm_tables.MIGRATIONS),)]


def test_keys_are_kept_hashed_and_revocable_on_either_store(tmp_path: Path, store_url: str | None) -> None:
    spaces = Collections(tmp_path / "data", store=store_url)
    try:
        keys = KeyStore(tmp_path / "data", spaces.shared_store())
        token, record = keys.create("kindgi", {"tenant": "acme"})
        assert keys.lookup("kindgi", token)[0] is KeyState.VALID
        assert keys.lookup("supermemory", token)[0] is KeyState.UNKNOWN
        assert [r.id for r in keys.list("kindgi")] == [record.id]
        keys.revoke(record.id)
        assert keys.lookup("kindgi", token)[0] is KeyState.REVOKED
        secret = token.split("_", 2)[2]  # the secret may hold "_" itself
        assert all(secret not in str(r) for r in spaces.store.query("SELECT * FROM keys")) if store_url else True
    finally:
        spaces.close()


def test_a_collection_written_and_reopened_is_searchable_from_its_records(tmp_path: Path, store_url: str | None) -> None:
    data = tmp_path / "data"
    spaces = Collections(data, store=store_url)
    spaces.ensure_collection(URI)
    spaces.write(URI, [put(0, "the quick brown fox"), put(1, "lazy dogs sleep")])
    assert [h.document.id for h in spaces.search(URI, SearchRequest(q="fox", mode="keyword")).hits] == ["d0"]
    spaces.close()
    again = Collections(data, store=store_url)
    try:
        assert [h.document.id for h in again.search(URI, SearchRequest(q="dogs", mode="keyword")).hits] == ["d1"]
    finally:
        again.close()


def test_a_cache_directory_of_one_postgresql_store_is_refused_for_another(
        tmp_path: Path, postgres_server: object) -> None:
    first = Collections(tmp_path / "cache", store=postgres_server.database())  # type: ignore[attr-defined]
    first.close()
    with pytest.raises(StorageError, match="another PostgreSQL store"):
        Collections(tmp_path / "cache", store=postgres_server.database())  # type: ignore[attr-defined]


def test_a_data_directory_with_its_own_records_is_refused_as_a_cache(tmp_path: Path, postgres_server: object) -> None:
    Collections(tmp_path / "data").close()
    with pytest.raises(StorageError, match="embedded record store"):
        Collections(tmp_path / "data", store=postgres_server.database())  # type: ignore[attr-defined]
