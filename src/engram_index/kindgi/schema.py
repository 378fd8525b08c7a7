"""The Kindgi face's own tables in the record store's SQLite, made by numbered, append-only migrations.

Every revision of every fact is kept here (the index holds only each fact's current, retrievable
revision); idempotency answers and erasures live beside them, so that a fact's write and the
answer kept for its Idempotency-Key commit in one transaction.
"""

from __future__ import annotations

from engram_index.store import migrations
from engram_index.store.base import RecordStore

# Append-only: a store at kindgi version N has run migrations [0, N).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE kindgi_revisions (
            tenant TEXT NOT NULL,
            fact_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            type TEXT NOT NULL,
            user_id TEXT, org_id TEXT, project_id TEXT, thread_id TEXT, session_id TEXT, participant_id TEXT,
            created_ms INTEGER NOT NULL,
            first_ms INTEGER NOT NULL,
            invalidated_ms INTEGER,
            current INTEGER NOT NULL,
            review INTEGER NOT NULL DEFAULT 0,
            legal_hold INTEGER NOT NULL DEFAULT 0,
            expires_ms INTEGER,
            body TEXT NOT NULL,
            PRIMARY KEY (tenant, fact_id, version)
        ) WITHOUT ROWID""",
        "CREATE INDEX kindgi_by_time ON kindgi_revisions(tenant, current, created_ms, fact_id)",
        "CREATE INDEX kindgi_expiring ON kindgi_revisions(tenant, expires_ms)"
        " WHERE current = 1 AND expires_ms IS NOT NULL",
        "CREATE INDEX kindgi_by_thread ON kindgi_revisions(tenant, thread_id) WHERE thread_id IS NOT NULL",
        "CREATE INDEX kindgi_by_session ON kindgi_revisions(tenant, session_id) WHERE session_id IS NOT NULL",
        "CREATE INDEX kindgi_by_participant ON kindgi_revisions(tenant, participant_id)"
        " WHERE participant_id IS NOT NULL",
        """CREATE TABLE kindgi_subjects (
            tenant TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, fact_id TEXT NOT NULL,
            PRIMARY KEY (tenant, kind, id, fact_id)
        ) WITHOUT ROWID""",
        """CREATE TABLE kindgi_idempotency (
            key TEXT PRIMARY KEY,
            body_sha TEXT NOT NULL,
            status INTEGER NOT NULL,
            content_type TEXT NOT NULL,
            body BLOB NOT NULL,
            created_ms INTEGER NOT NULL
        ) WITHOUT ROWID""",
        "CREATE INDEX kindgi_idempotency_age ON kindgi_idempotency(created_ms)",
        """CREATE TABLE kindgi_erasures (
            tenant TEXT NOT NULL,
            id TEXT NOT NULL,
            selector_kind TEXT NOT NULL,
            selector TEXT,
            status TEXT NOT NULL,
            phase TEXT NOT NULL,
            requested_by TEXT NOT NULL,
            counts TEXT NOT NULL DEFAULT '{}',
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            created_ms INTEGER NOT NULL,
            started_ms INTEGER,
            completed_ms INTEGER,
            PRIMARY KEY (tenant, id)
        ) WITHOUT ROWID""",
        "CREATE INDEX kindgi_erasures_by_time ON kindgi_erasures(tenant, created_ms, id)",
    ),
    (
        # A listing's filters (visibility, scope, type, retention, what was alive at a time) in the time
        # index: the facts a caller may not see are skipped there, not each read from the table (Facts.page
        # reads only its page's).
        "DROP INDEX kindgi_by_time",
        "CREATE INDEX kindgi_by_time ON kindgi_revisions(tenant, current, created_ms, fact_id, review, expires_ms,"
        " invalidated_ms, type, user_id, org_id, project_id, thread_id, session_id, participant_id)",
    ),
)


def migrate(store: RecordStore) -> None:
    """Run the Kindgi migrations this store has not run yet (each in one transaction)."""
    migrations.run(store, "kindgi", MIGRATIONS)
