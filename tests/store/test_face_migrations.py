"""Each face's tables come from its own numbered migrations, run by the store's one runner; a store made
before the garden face's sync tables were its own opens unchanged."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_index.engine.types import Document, ModelIdentity
from engram_index.engram import syncstate
from engram_index.engram.syncstate import PathChange, SyncState
from engram_index.kindgi import schema as kindgi_schema
from engram_index.store import migrations
from engram_index.store.base import RecordStore, StoredDocument
from engram_index.store.opening import open_store
from engram_index.store.sqlite import Store
from engram_index.store.sqlite_schema import MIGRATIONS
from engram_index.supermemory import tables as sm_tables

OLD_STORE = Path(__file__).parent / "data" / "store_before_face_migrations.sql"
URI = "at://did:plc:abc/space/garden.engram.space/s"
REPO = "did:plc:a"
MEMORY = f"{URI}/{REPO}/garden.engram.memory/r0"


@pytest.fixture
def store(tmp_path: Path, store_url: str | None) -> Iterator[RecordStore]:
    opened = open_store(tmp_path, store_url)
    yield opened
    opened.close()


def old_store(data: Path) -> Path:
    """The records database of a store the code before this change wrote (its `.dump`, loaded)."""
    path = data / "records.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(OLD_STORE.read_text(encoding="utf-8"))
    conn.close()
    return path


def test_a_store_made_before_the_sync_tables_were_the_garden_faces_opens_with_its_rows_and_runs_nothing_twice(
        tmp_path: Path) -> None:
    path = old_store(tmp_path)
    before = sqlite3.connect(path).execute("SELECT sql FROM sqlite_master WHERE name LIKE 'sync_%' ORDER BY name")
    old_tables = before.fetchall()
    store = Store(path)
    state = SyncState(store)  # the garden face's migrations: the tables are there, so they are adopted
    assert store.query("PRAGMA user_version") == [(len(MIGRATIONS),)]
    assert store.query("SELECT version FROM sync_schema") == [(len(syncstate.MIGRATIONS),)]
    assert store.query("SELECT sql FROM sqlite_master WHERE name LIKE 'sync_%' AND name != 'sync_schema'"
                       " ORDER BY name") == old_tables  # unchanged, not made again
    assert state.spaces() == [(URI, None, 0)]
    assert state.position(URI, REPO) is not None and state.paths(URI, REPO) == {"garden.engram.memory/r0": "bafycid"}
    info = store.collection(URI)
    assert store.document_by_id(info.id, MEMORY) is not None
    store.close()
    reopened = Store(path)
    assert SyncState(reopened).repos(URI) == [REPO]  # a second open runs nothing and fails on nothing
    reopened.close()


def test_a_new_store_has_no_sync_table_until_the_garden_face_makes_its_own(tmp_path: Path) -> None:
    store = Store(tmp_path / "records.sqlite")
    names = {name for (name,) in store.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"spaces", "documents"} <= names and not {n for n in names if n.startswith("sync_")}
    SyncState(store).add_space(URI, 5)
    assert SyncState(store).spaces() == [(URI, None, 0)]
    store.close()


def test_every_faces_migrations_run_once_on_either_store(store: RecordStore) -> None:
    for _ in range(2):
        syncstate.migrate(store)
        migrations.run(store, "sync", syncstate.MIGRATIONS)  # past the per-store memo: the count says done
        kindgi_schema.migrate(store)
        sm_tables.migrate(store)
    assert store.query("SELECT version FROM sync_schema") == [(len(syncstate.MIGRATIONS),)]
    assert store.query("SELECT version FROM kindgi_schema") == [(len(kindgi_schema.MIGRATIONS),)]
    assert store.query("SELECT version FROM sm_schema") == [(len(sm_tables.MIGRATIONS),)]


def test_dropping_a_collection_runs_the_faces_statements_in_its_transaction(store: RecordStore) -> None:
    info = store.ensure_collection(URI, ModelIdentity("m", "d", 4))
    store.write(info.id, [StoredDocument(Document(id=MEMORY, author=REPO, text="t"))])
    state = SyncState(store)
    store.execute(state.advance(URI, REPO, "rev1", b"\x01", {"garden.engram.memory/r0": PathChange("cid")}, 1))
    assert store.drop_collection(URI, state.forget_space(URI)) == info.id
    assert state.repos(URI) == [] and state.paths(URI, REPO) == {}


def test_a_migration_that_fails_leaves_the_count_where_it_was(store: RecordStore) -> None:
    broken = (("CREATE TABLE t_first (k TEXT PRIMARY KEY)",), ("CREATE TABLE t_second (k TEXT)", "NOT SQL AT ALL"))
    with pytest.raises(Exception):
        migrations.run(store, "t_probe", broken)
    assert migrations.version(store, "t_probe") == 1
    assert store.query("SELECT count(*) FROM t_first") == [(0,)]


def test_nodes_opening_a_fresh_store_together_each_run_every_faces_migrations_once_and_none_fails(
        tmp_path: Path, store_url: str | None) -> None:
    # As nodes of a cluster started together (or `serve --workers` on one file): each its own store.
    nodes = 4
    stores = [open_store(tmp_path, store_url) for _ in range(nodes)]
    start = threading.Barrier(nodes)
    failures: list[BaseException] = []

    def open_faces(store: RecordStore) -> None:
        start.wait()
        try:
            kindgi_schema.migrate(store)
            sm_tables.migrate(store)
            syncstate.migrate(store)
        except BaseException as exc:  # noqa: BLE001 - every failure is the finding
            failures.append(exc)

    threads = [threading.Thread(target=open_faces, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert failures == []
        for name, count in (("kindgi", len(kindgi_schema.MIGRATIONS)), ("sm", len(sm_tables.MIGRATIONS)),
                            ("sync", len(syncstate.MIGRATIONS))):
            assert stores[0].query(f"SELECT version FROM {name}_schema") == [(count,)]
    finally:
        for store in stores:
            store.close()
