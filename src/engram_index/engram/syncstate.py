"""Sync's durable state, beside the records: the spaces to keep current, each member repo's
verified position (revision and set-hash state), and every path of each repo with its CID.

Writes come back as statements for `Collections.write(..., also=...)`, so a repo's position advances
in the same transaction as the records it verified; nothing here commits on its own, except the
bookkeeping that changes no records (configuration, problems).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from engram_index.store import migrations
from engram_index.store.base import RecordStore, Statement

# The garden face's own tables, by numbered, append-only migrations (counted in `sync_schema`): the
# spaces to keep current, each member repo's verified position (revision and set-hash state) and
# every path of the repo with its CID (the set hash covers all records, memories or not), with why a
# record is not indexed, if so. Stores written before these were the face's own made the same tables
# in the store's own migrations: IF NOT EXISTS adopts them as they are.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE IF NOT EXISTS sync_spaces (
            space TEXT PRIMARY KEY,
            added_ms INTEGER NOT NULL DEFAULT 0,
            space_rev TEXT,
            notify_until_ms INTEGER NOT NULL DEFAULT 0,
            synced_ms INTEGER NOT NULL DEFAULT 0,
            problem TEXT
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS sync_repos (
            space TEXT NOT NULL,
            repo TEXT NOT NULL,
            rev TEXT,
            state BLOB,
            problem TEXT,
            checked_ms INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (space, repo)
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS sync_paths (
            space TEXT NOT NULL,
            repo TEXT NOT NULL,
            path TEXT NOT NULL,
            cid TEXT NOT NULL,
            problem TEXT,
            PRIMARY KEY (space, repo, path)
        ) WITHOUT ROWID""",
    ),
)
_MIGRATED: weakref.WeakSet[RecordStore] = weakref.WeakSet()  # the stores whose sync tables are current
_MIGRATING = threading.Lock()


def migrate(store: RecordStore) -> None:
    """Run the sync migrations this store has not run yet (once per opened store)."""
    with _MIGRATING:
        if store not in _MIGRATED:
            migrations.run(store, "sync", MIGRATIONS)
            _MIGRATED.add(store)


@dataclass(frozen=True, slots=True)
class RepoPosition:
    """Where a member repo stands: its last verified revision and set-hash state."""

    rev: str | None
    state: bytes | None
    problem: str | None


@dataclass(frozen=True, slots=True)
class PathChange:
    """A path's new CID (None: gone) and why its record is not indexed (None: it is, or it is no memory)."""

    cid: str | None
    problem: str | None = None


class SyncState:
    """Reads and statement builders over the sync tables of a record store."""

    def __init__(self, store: RecordStore) -> None:
        migrate(store)
        self.store = store

    # -- configured spaces ------------------------------------------------------------------

    def add_space(self, space: str, now_ms: int) -> None:
        """Keep `space` current from now on."""
        self.store.execute([("INSERT OR IGNORE INTO sync_spaces(space, added_ms) VALUES (?, ?)", (space, now_ms))])

    def remove_space(self, space: str) -> bool:
        """Stop syncing `space` (its records stay until the space is dropped); False when it was not configured."""
        present = bool(self.store.query("SELECT 1 FROM sync_spaces WHERE space=?", (space,)))
        self.store.execute([("DELETE FROM sync_spaces WHERE space=?", (space,))])
        return present

    def spaces(self) -> list[tuple[str, str | None, int]]:
        """(space, problem, synced_ms) of every configured space."""
        return [(str(s), p, int(t)) for s, p, t in
                self.store.query("SELECT space, problem, synced_ms FROM sync_spaces ORDER BY space")]

    def is_configured(self, space: str) -> bool:
        """Whether `space` is kept current by sync."""
        return bool(self.store.query("SELECT 1 FROM sync_spaces WHERE space=?", (space,)))

    def space_rev(self, space: str) -> str | None:
        """The last notification revision seen for `space`."""
        rows = self.store.query("SELECT space_rev FROM sync_spaces WHERE space=?", (space,))
        return rows[0][0] if rows else None

    def set_space_rev(self, space: str, rev: str) -> None:
        """Remember the last notification revision seen."""
        self.store.execute([("UPDATE sync_spaces SET space_rev=? WHERE space=?", (rev, space))])

    def space_synced(self, space: str, problem: str | None, now_ms: int) -> None:
        """Record the outcome of a sync of the whole space."""
        self.store.execute([("UPDATE sync_spaces SET problem=?, synced_ms=? WHERE space=?", (problem, now_ms, space))])

    def notify_until(self, space: str) -> int:
        """Until when (ms) our notification registration for `space` holds."""
        rows = self.store.query("SELECT notify_until_ms FROM sync_spaces WHERE space=?", (space,))
        return int(rows[0][0]) if rows else 0

    def set_notify_until(self, space: str, until_ms: int) -> None:
        """Remember until when the registration holds."""
        self.store.execute([("UPDATE sync_spaces SET notify_until_ms=? WHERE space=?", (until_ms, space))])

    # -- repos ------------------------------------------------------------------------------

    def position(self, space: str, repo: str) -> RepoPosition | None:
        """The repo's position, or None when it was never seen."""
        rows = self.store.query("SELECT rev, state, problem FROM sync_repos WHERE space=? AND repo=?", (space, repo))
        return RepoPosition(rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def repos(self, space: str) -> list[str]:
        """Every member repo of `space` with a position."""
        return [str(r[0]) for r in self.store.query("SELECT repo FROM sync_repos WHERE space=? ORDER BY repo", (space,))]

    def paths(self, space: str, repo: str) -> dict[str, str]:
        """path → CID of every record of the repo as last verified."""
        return {str(p): str(c) for p, c in
                self.store.query("SELECT path, cid FROM sync_paths WHERE space=? AND repo=?", (space, repo))}

    def advance(
        self, space: str, repo: str, rev: str, state: bytes, changes: dict[str, PathChange], now_ms: int
    ) -> list[Statement]:
        """Statements moving the repo to a verified (rev, state) with these path changes."""
        out: list[Statement] = [(
            "INSERT INTO sync_repos(space, repo, rev, state, problem, checked_ms) VALUES (?, ?, ?, ?, NULL, ?)"
            " ON CONFLICT(space, repo) DO UPDATE SET rev=excluded.rev, state=excluded.state, problem=NULL,"
            " checked_ms=excluded.checked_ms",
            (space, repo, rev, state, now_ms),
        )]
        for path, change in changes.items():
            if change.cid is None:
                out.append(("DELETE FROM sync_paths WHERE space=? AND repo=? AND path=?", (space, repo, path)))
            else:
                out.append((
                    "INSERT INTO sync_paths(space, repo, path, cid, problem) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT(space, repo, path) DO UPDATE SET cid=excluded.cid, problem=excluded.problem",
                    (space, repo, path, change.cid, change.problem),
                ))
        return out

    def forget_space(self, space: str) -> list[Statement]:
        """Statements forgetting every repo position and path of a space (dropped with its records)."""
        return [("DELETE FROM sync_repos WHERE space=?", (space,)), ("DELETE FROM sync_paths WHERE space=?", (space,))]

    def forget_repo(self, space: str, repo: str) -> list[Statement]:
        """Statements removing a repo's position and paths (a member who left)."""
        return [("DELETE FROM sync_repos WHERE space=? AND repo=?", (space, repo)),
                ("DELETE FROM sync_paths WHERE space=? AND repo=?", (space, repo))]

    def reset_space(self, space: str) -> None:
        """Forget every repo's position, so the next sync fetches each repo whole (a model change)."""
        self.store.execute([("UPDATE sync_repos SET rev=NULL WHERE space=?", (space,))])

    def repo_failed(self, space: str, repo: str, problem: str, now_ms: int) -> None:
        """Record that a repo could not be verified (its position stays where it was)."""
        self.store.execute([(
            "INSERT INTO sync_repos(space, repo, problem, checked_ms) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(space, repo) DO UPDATE SET problem=excluded.problem, checked_ms=excluded.checked_ms",
            (space, repo, problem, now_ms),
        )])

    def problems(self, space: str) -> tuple[list[tuple[str, str]], list[tuple[str, str, int]]]:
        """Repos that failed verification (repo, problem) and records not indexed (repo, reason, count)."""
        repos = [(str(r), str(p)) for r, p in self.store.query(
            "SELECT repo, problem FROM sync_repos WHERE space=? AND problem IS NOT NULL ORDER BY repo", (space,))]
        records = [(str(r), str(p), int(n)) for r, p, n in self.store.query(
            "SELECT repo, problem, count(*) FROM sync_paths WHERE space=? AND problem IS NOT NULL"
            " GROUP BY repo, problem ORDER BY repo, problem", (space,))]
        return repos, records
