"""What the v5 crash path checks: the stopped store after each kill, the served face and the engine at the end.

`check_stored` reads the store of the killed server: every acknowledged document is there once
with its acknowledged content and metadata (or, under a change cut off, the content before or
after it), every acknowledged delete left no row, chunk, memory or index record, every
acknowledged forget holds; nothing is half there (a chunk or memory without its document, an
index record without its row or the other way round, a record's tags not saying what its row
says), and every `done` document has its chunk and exactly one latest memory per statement of
its content. `ServedCheck` and `check_engine` ask the same at the end over HTTP and of the
reopened engine, by word and by vector.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from supermemory import Supermemory

from engram_index.collections import Collections
from engram_index.embed.hashing import HashingEmbedder
from engram_index.engine.types import SearchRequest
from engram_index.supermemory.face import FORGOTTEN, SUPERSEDED
from engram_index.supermemory.pipeline import embedded_text
from engram_index.supermemory.tables import chunks_collection, memories_collection

if TYPE_CHECKING:
    from .crashkit_v5 import Doc

NS = "crash"
DIMS = 256


def statements(content: str) -> list[str]:
    """The memories a processed content must have as latest: its paragraphs (the path writes no other period)."""
    return sorted(" ".join(p.split()) for p in content.split("\n\n") if len(p.split()) >= 3)


def the_word(doc: Doc) -> str:
    """The word only this document holds."""
    from .crashkit_v5 import word

    return word(doc.n)


@dataclass
class Stored:
    """One stored document row."""

    n: int
    custom: str | None
    content: str
    status: str
    task_type: str
    metadata: dict[str, Any]


def _db(data: Path) -> sqlite3.Connection:
    """The store, read only."""
    return sqlite3.connect(f"file:{data / 'records.sqlite'}?mode=ro", uri=True)


def stored_documents(data: Path, ids: Iterable[str] | None = None) -> dict[str, Stored]:
    """Stored documents by id (all, or these)."""
    with _db(data) as db:
        rows = db.execute("SELECT id, custom_id, content, status, task_type, metadata FROM sm_documents WHERE ns=?",
                          (NS,)).fetchall()
    wanted = None if ids is None else set(ids)
    out = {}
    for doc_id, custom, content, status, task, metadata in rows:
        if wanted is None or doc_id in wanted:
            md = json.loads(metadata)
            out[doc_id] = Stored(int(md.get("n", -1)), custom, content, status, task, md)
    return out


def versioned_memories(data: Path) -> int:
    """How many stored memories are a later version of another (version > 1)."""
    with _db(data) as db:
        return int(db.execute("SELECT count(*) FROM sm_memories WHERE ns=? AND version > 1", (NS,)).fetchone()[0])


def check_stored(data: Path, docs: Mapping[str, Doc], unacked: set[int]) -> list[str]:
    """The stopped server's store against what was acknowledged (see the module doc); the problems."""
    problems: list[str] = []
    rows = stored_documents(data)
    with _db(data) as db:
        chunks: dict[str, list[str]] = {}
        for cid, doc_id in db.execute("SELECT id, doc_id FROM sm_chunks WHERE ns=?", (NS,)):
            chunks.setdefault(doc_id, []).append(cid)
        memories: dict[str, list[tuple[str, str, int, int | None]]] = {}
        for mid, doc_id, text, latest, forgotten in db.execute(
                "SELECT id, doc_id, memory, is_latest, forgotten_ms FROM sm_memories WHERE ns=?", (NS,)):
            memories.setdefault(doc_id, []).append((mid, text, latest, forgotten))
        records = {name: {r[0]: (json.loads(r[1]), json.loads(r[2] or "{}")) for r in db.execute(
            "SELECT d.doc_id, d.tags, d.metadata FROM documents d JOIN spaces s ON s.id=d.space_id"
            " WHERE s.uri=? AND d.deleted=0", (name,))} for name in (chunks_collection(NS), memories_collection(NS))}
    chunk_records, memory_records = records[chunks_collection(NS)], records[memories_collection(NS)]

    # Nothing half there: rows and index records of chunks and memories match, each with its document.
    chunk_rows = {cid: doc_id for doc_id, ids in chunks.items() for cid in ids}
    memory_rows = {m[0]: (doc_id, m) for doc_id, ms in memories.items() for m in ms}
    for doc_id in set(chunks) | set(memories):
        if doc_id not in rows:
            problems.append(f"half: {len(chunks.get(doc_id, []))} chunks and {len(memories.get(doc_id, []))}"
                            f" memories of {doc_id}, which is not stored")
    for kind, recs, wanted in (("chunk", chunk_records, chunk_rows), ("memory", memory_records, memory_rows)):
        for rid, (_, md) in recs.items():
            if rid not in wanted:
                problems.append(f"half: the index record of {kind} {rid} (of {md.get('doc')}) has no row")
        for rid in wanted:
            if rid not in recs:
                problems.append(f"half: {kind} {rid} has no index record")
    for mid, (_, (_, _, latest, forgotten)) in memory_rows.items():
        tags = set(memory_records.get(mid, ([], {}))[0])
        if mid in memory_records and ((SUPERSEDED in tags) == bool(latest) or (FORGOTTEN in tags) != bool(forgotten)):
            problems.append(f"half: memory {mid} is latest={latest} forgotten={forgotten is not None} but its"
                            f" record's tags say otherwise")

    # Nothing doubled: each number is stored once.
    twice = [n for n, k in Counter(r.n for r in rows.values()).items() if k > 1]
    if twice:
        problems.append(f"stored twice: numbers {sorted(twice)[:5]}")

    # Every done document is whole: its chunk, and one latest memory per statement of its content.
    for doc_id, row in rows.items():
        if row.status != "done":
            continue
        if not chunks.get(doc_id):
            problems.append(f"half: {doc_id} is done without chunks")
        latest = sorted(m[1] for m in memories.get(doc_id, []) if m[2])
        want = statements(row.content) if row.task_type == "memory" else []
        if latest != want:
            problems.append(f"{doc_id} is done with latest memories {latest}, not {want}")

    # Every acknowledged change holds.
    for doc_id, doc in docs.items():
        row = rows.get(doc_id)
        pending = doc.pending
        if doc.deleted:
            if row is not None or chunks.get(doc_id) or memories.get(doc_id):
                problems.append(f"deleted {doc_id} is back: row {row is not None}, {len(chunks.get(doc_id, []))}"
                                f" chunks, {len(memories.get(doc_id, []))} memories")
            continue
        if row is None:
            if pending is None or pending.kind != "delete":
                problems.append(f"lost: acknowledged {doc_id} (#{doc.n})")
            continue
        contents = {doc.content} | ({pending.content} if pending and pending.content is not None else set())
        if pending is not None and pending.kind == "append":
            contents.add(f"{doc.content}\n\n{pending.content}")
        if doc.file:
            contents.add("")  # an upload's text is stored once it is extracted
        if row.content not in contents:
            problems.append(f"{doc_id} (#{doc.n}) holds {row.content!r}, not {sorted(contents)}")
        metadata = [doc.metadata] + ([pending.metadata] if pending and pending.metadata else [])
        if row.metadata not in metadata:
            problems.append(f"{doc_id} has metadata {row.metadata}, not {metadata}")
        for mid in doc.forgotten:
            found = memory_rows.get(mid)
            if found is None or found[1][3] is None:
                problems.append(f"forgotten memory {mid} of {doc_id} is {'gone' if found is None else 'back'}")
    for doc_id, row in rows.items():
        if doc_id not in docs and row.n not in unacked:
            problems.append(f"{doc_id} (#{row.n}) is stored but was never acknowledged nor cut off")
    return problems


def wait_done(client: Supermemory, timeout: float) -> dict[str, str]:
    """Wait until every stored document is done or failed; their ids and statuses."""
    deadline = time.monotonic() + timeout
    while True:
        docs: dict[str, str] = {}
        page = 1
        while True:
            listed = client.list(NS, "documents", limit=100, page=page)
            docs.update({d.id: d.system.status for d in listed.documents})
            if page >= (listed.pagination.total_pages or 1):
                break
            page += 1
        if all(s in ("done", "failed") for s in docs.values()) or time.monotonic() > deadline:
            return docs
        time.sleep(0.3)


class ServedCheck:
    """The end state as a client sees it: documents, memories and search by word and by text."""

    def __init__(self, client: Supermemory, url: str, key: str) -> None:
        """Check through this SDK client (and plain HTTP for status codes)."""
        self.client = client
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)

    def run(self, docs: Mapping[str, Doc], listed: Mapping[str, str]) -> list[str]:
        """Every live document whole and found, every deleted one gone, every forgotten memory forgotten."""
        problems: list[str] = []
        time.sleep(1.2)  # keyword commits land within a second
        live = {i for i, d in docs.items() if not d.deleted}
        if set(listed) != live:
            problems.append(f"listed {len(listed)} documents: {sorted(set(listed) - live)[:3]} not acknowledged,"
                            f" {sorted(live - set(listed))[:3]} missing")
        chunks = self.client.list(NS, "chunks", limit=1).pagination.total_items
        if chunks != len(live):
            problems.append(f"{len(live)} documents but {chunks} chunks")
        for doc_id, doc in sorted(docs.items(), key=lambda kv: kv[1].n):
            problems += self._gone(doc) if doc.deleted else self._whole(doc, listed.get(doc_id))
        return problems

    def after_restart(self, data: Path, docs: Mapping[str, Doc], rng: random.Random, sample: int = 20) -> list[str]:
        """Right after a restart: a sample of the deleted documents gone, of the done ones whole and found."""
        time.sleep(1.2)  # keyword commits land within a second
        rows = stored_documents(data)
        deleted = sorted((d for d in docs.values() if d.deleted), key=lambda d: d.n)
        done = sorted((d for d in docs.values() if not d.deleted and d.id in rows and rows[d.id].status == "done"),
                      key=lambda d: d.n)
        forgetting = [d for d in done if d.forgotten]
        problems: list[str] = []
        for doc in rng.sample(deleted, min(sample, len(deleted))):
            problems += self._gone(doc)
        for doc in {d.id: d for d in rng.sample(done, min(sample, len(done))) + forgetting[-sample:]}.values():
            problems += [f"after a restart: {p}" for p in self._whole(doc, "done")]
        return problems

    def close(self) -> None:
        """Close the HTTP client."""
        self.http.close()

    def _whole(self, doc: Doc, status: str | None) -> list[str]:
        """A live document: done, its content, metadata, chunk and latest memories; found by word and text."""
        if status != "done":
            return [f"lost: acknowledged {doc.id} (#{doc.n}) is {status or 'missing'} at the end"]
        problems = []
        body = self.http.get(f"/ns/{NS}/document/{doc.id}", params=[("include", "chunks"),
                                                                     ("include", "memories")]).json()
        if body.get("content") != doc.content or body.get("metadata") != doc.metadata:
            problems.append(f"{doc.id}: content {body.get('content')!r} metadata {body.get('metadata')}, not"
                            f" {doc.content!r} {doc.metadata}")
        if [c["content"] for c in body.get("chunks", [])] != [doc.content]:
            problems.append(f"{doc.id}: chunks {[c['content'] for c in body.get('chunks', [])]}")
        memories = body.get("memories", [])
        latest = sorted(m["memory"] for m in memories if m["isLatest"])
        if latest != statements(doc.content):
            problems.append(f"{doc.id}: latest memories {latest}, not {statements(doc.content)}")
        forgotten = {m["id"] for m in memories if m["isForgotten"]}
        if doc.forgotten - forgotten:
            problems.append(f"{doc.id}: forgotten {sorted(doc.forgotten - forgotten)} are not")
        recallable = sorted(m["memory"] for m in memories if m["isLatest"] and not m["isForgotten"])
        word = the_word(doc)
        found = [r.memory for r in self.client.search(NS, query=word, search_mode="memories", limit=50,
                                                      threshold=0).results]
        if sorted(m for m in found if m and word in m) != recallable:
            problems.append(f"{word} finds memories {found[:5]}, not {recallable}")
        near = self.client.search(NS, query=doc.content, search_mode="chunks", limit=3, threshold=0).results
        # 0.7 x cosine + 0.3 x coverage: its own text scores 0.3 at most without its vector, and well above
        # 0.5 with it (the vector is of the text with its document's metadata as tags, `check_engine`
        # asks for the exact one). One statement only: a chunk of several pools its sentences' vectors,
        # so only its rank is asked.
        single = len(statements(doc.content)) == 1
        if not near or near[0].id != f"{doc.id}c0" or (single and near[0].similarity < 0.5):
            problems.append(f"{doc.id}'s own text finds {[(r.id, r.similarity) for r in near]}")
        return problems

    def _gone(self, doc: Doc) -> list[str]:
        """A deleted document: not got, not found by its word, its memories not got."""
        problems = []
        status = self.http.get(f"/ns/{NS}/document/{doc.id}").status_code
        if status != 404:
            problems.append(f"deleted {doc.id} is got with {status}")
        word = the_word(doc)
        found = self.client.search(NS, query=word, search_mode="hybrid", limit=20, threshold=0,
                                   include={"forgotten": True}).results
        held = [r.memory or r.chunk for r in found if word in (r.memory or r.chunk or "")]
        if held:
            problems.append(f"deleted {doc.id} is found by {word}: {held}")
        for mid in doc.forgotten:
            if self.http.get(f"/ns/{NS}/memories/{mid}").status_code != 404:
                problems.append(f"memory {mid} of deleted {doc.id} is still got")
        return problems


def check_engine(data: Path, docs: Mapping[str, Doc]) -> list[str]:
    """The stopped data directory reopened: live chunks and memories by word and vector, deleted ones nowhere."""
    problems: list[str] = []
    embedder = HashingEmbedder(DIMS)
    with _db(data) as db:
        memory_ids: dict[str, set[str]] = {}
        latest: dict[str, list[tuple[str, str]]] = {}
        for mid, doc_id, text, is_latest in db.execute(
                "SELECT id, doc_id, memory, is_latest FROM sm_memories WHERE ns=?", (NS,)):
            memory_ids.setdefault(doc_id, set()).add(mid)
            if is_latest:
                latest.setdefault(doc_id, []).append((mid, text))
    spaces = Collections(data)
    try:
        for name in (chunks_collection(NS), memories_collection(NS)):
            stored = [r[0] for r in spaces.store.query(
                "SELECT doc_id FROM documents WHERE space_id=?", (spaces.info(name).id,))]
            if len(stored) != len(set(stored)):
                problems.append(f"{name}: a record stored twice")
        for doc_id, doc in docs.items():
            word = the_word(doc)
            for name, want in ((chunks_collection(NS), set() if doc.deleted else {f"{doc_id}c0"}),
                               (memories_collection(NS), set() if doc.deleted else memory_ids.get(doc_id, set()))):
                hits = spaces.search(name, SearchRequest(mode="keyword", q=word, limit=50, explain=False)).hits
                if {h.document.id for h in hits} != want:
                    problems.append(f"{name}: {word} finds {sorted(h.document.id for h in hits)}, not {sorted(want)}")
            if doc.deleted:
                continue
            targets = [(memories_collection(NS), mid, text) for mid, text in latest.get(doc_id, [])]
            if len(statements(doc.content)) == 1:
                targets.append((chunks_collection(NS), f"{doc_id}c0", doc.content))
            for name, rid, text in targets:
                if not any(_finds_itself(spaces, embedder, name, rid, embedded_text(metadata, text))
                           for metadata in doc.sent_metadata):
                    problems.append(f"{name}: {rid}'s vector is not that of its text with any metadata it had")
    finally:
        spaces.close()
    return problems


def _finds_itself(spaces: Collections, embedder: HashingEmbedder, name: str, rid: str, text: str) -> bool:
    """Whether the vector of `text` finds `rid` first (or tied first) at cosine 1."""
    vec = embedder.embed_documents([text])[0]
    near = spaces.search(name, SearchRequest(mode="vector", vector=vec, limit=5, explain=False)).hits
    # Rank 1, or tied with it: two texts may hash to one vector (older first breaks the tie).
    first = [h.document.id for h in near if (h.similarity or 0) >= (near[0].similarity or 0) - 1e-6]
    return rid in first and (near[0].similarity or 0) >= 0.999
