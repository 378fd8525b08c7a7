"""Which record store a data directory uses: the embedded SQLite file, or a PostgreSQL database.

With `--store postgresql://…` the data directory is only the node's cache (tantivy, vectors): it
remembers the store it was built from (`STORE_ID`), so that a cache of one database is never
read as the cache of another, and a directory holding its own SQLite records is refused.
"""

from __future__ import annotations

from pathlib import Path

from engram_index.errors import StorageError
from engram_index.store.base import RecordStore
from engram_index.store.sqlite import Store

RECORDS_FILE = "records.sqlite"
STORE_ID_FILE = "STORE_ID"
SCHEMES = ("postgresql://", "postgres://")


def check_store_url(url: str) -> str:
    """The URL when it names a store this build can open; else StorageError saying what is taken."""
    if not url.startswith(SCHEMES):
        raise StorageError(f"--store takes a postgresql:// URL (got {url.split(':', 1)[0]!r}:…)")
    return url


def open_store(data_dir: Path, url: str | None = None, read_only: bool = False) -> RecordStore:
    """The data directory's own SQLite store, or the PostgreSQL store at `url` with `data_dir` as its cache."""
    if url is None:
        return Store(data_dir / RECORDS_FILE, read_only=read_only)
    from engram_index.store.postgres import PostgresStore  # only with --store: psycopg loads libpq

    if (data_dir / RECORDS_FILE).exists():
        raise StorageError(f"{data_dir} holds an embedded record store: give --store an empty cache directory")
    store = PostgresStore(check_store_url(url), read_only=read_only)
    marker = data_dir / STORE_ID_FILE
    known = marker.read_text().strip() if marker.exists() else None
    if known is None and not read_only:
        marker.write_text(store.identity + "\n")
    elif known is not None and known != store.identity:
        store.close()
        raise StorageError(f"{data_dir} caches another PostgreSQL store's indexes: give this one its own directory")
    return store
