"""The migration runner for a face's own tables in any record store: numbered, append-only, each once.

A face names its migrations (each a tuple of statements, in the faces' SQLite SQL, which the
PostgreSQL store translates) and the table that counts them (`<name>_schema`, one row: how many
have run). Each migration and its count commit in one transaction, so a crash leaves the old
count and the migration runs again whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram_index.store.base import RecordStore, Statement

Migration = Sequence[str]  # the statements of one migration


def version(store: RecordStore, name: str) -> int:
    """How many of the `name` migrations this store has run (a store that is current is only read)."""
    try:
        rows = store.query(f"SELECT version FROM {name}_schema")
    except Exception:  # no such table yet (each store raises its own kind): made below, or its real error
        store.execute([(f"CREATE TABLE IF NOT EXISTS {name}_schema (version INTEGER NOT NULL)", ())])
        rows = store.query(f"SELECT version FROM {name}_schema")
    return int(rows[0][0]) if rows else 0


def run(store: RecordStore, name: str, migrations: Sequence[Migration]) -> None:
    """Run the `name` migrations this store has not run yet (each with its count in one transaction),
    one process at a time: nodes started together on a fresh database would otherwise each create
    the same tables, and all but one fail to start."""
    with store.exclusive(f"migrations-{name}"):
        for number in range(version(store, name), len(migrations)):
            statements: list[Statement] = [(sql, ()) for sql in migrations[number]]
            statements.append((f"DELETE FROM {name}_schema", ()))
            statements.append((f"INSERT INTO {name}_schema(version) VALUES (?)", (number + 1,)))
            store.execute(statements)


def statements(script: str) -> tuple[str, ...]:
    """A script's statements (split at `;`: none of the faces' DDL holds one inside a literal)."""
    return tuple(part for part in script.split(";") if part.strip())
