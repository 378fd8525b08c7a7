"""kill -9 of a served v5 face while it processes documents, then check every acknowledged one.

`V5Crash` mints a supermemory key, serves a data directory with `engram-index serve` (the
hashing embedder) and runs rounds: writers add documents through the official SDK (single adds
and batches, half of them under caller ids) and remember each document the server answered 200
with an id; the server is killed -9 at a random moment, the store is read to see whether the kill
landed while documents were still processing, and it is served again. A request cut off by the
kill is retried under its caller id (which must not make a second document) or, with no id, may
or may not have happened. `finish` lets processing end and checks every acknowledged document:
present once, `done`, one chunk and one memory, found by its own word and by its own text at
rank 1 with a cosine-bearing similarity; then, with the server stopped, in the engine itself.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from supermemory import Supermemory
from supermemory.core.api_error import ApiError

from engram_index.collections import Collections
from engram_index.embed.hashing import HashingEmbedder
from engram_index.engine.types import SearchRequest
from engram_index.keys import KeyStore
from engram_index.supermemory.tables import chunks_collection, memories_collection
from tests.kindgi.server import ServeProcess

NS = "crash"
DIMS = 256
EMBEDDER = f"hashing:{DIMS}"
# The checks run far above a key's default admission (50 a second): that is the load path's to test.
UNLIMITED = ("--key-rate", "1000000", "--key-burst", "1000000", "--rate", "1000000", "--burst", "1000000")
COLORS = ("green", "amber", "violet", "grey", "scarlet", "teal", "ochre")
THINGS = ("bike", "kettle", "garden", "lantern", "ledger", "compass", "harbour", "violin", "orchard", "quilt", "atlas")


def kill_while_writing(server: ServeProcess, rng: random.Random, max_delay: float, stop: threading.Event,
                       writers: list[threading.Thread]) -> None:
    """Start the writers, kill -9 the server at a random moment of their work, then stop and join them."""
    for t in writers:
        t.start()
    time.sleep(rng.uniform(0.05, max_delay))
    server.kill()
    stop.set()
    for t in writers:
        t.join(60)


def word(n: int) -> str:
    """The word only document `n` holds: letters only, so no identifier part or stem is shared."""
    letters = "".join(chr(97 + (n // 26 ** k) % 26) for k in range(4))
    return f"kw{letters}vox"


def text(n: int) -> str:
    """Document `n`'s content: one sentence (one chunk, one memory) around its word."""
    return f"Entry {word(n)} keeps the {COLORS[n % 7]} {THINGS[n % 11]} notes for recall."


@dataclass
class Sent:
    """One request a writer sent: the documents (number, caller id or None) it carried."""

    docs: list[tuple[int, str | None]]
    batch: bool


@dataclass
class Round:
    """What one kill did."""

    acknowledged: int = 0
    unfinished_at_kill: int = 0  # documents not yet done in the store right after the kill
    statuses: dict[str, int] = field(default_factory=dict)  # the stored documents' statuses then
    cut_off: int = 0  # requests in flight at the kill


@dataclass
class V5Crash:
    """A data directory served again and again, and the documents it acknowledged."""

    data: Path
    seed: int = 18
    key: str = ""
    acked: dict[str, int] = field(default_factory=dict)  # document id -> its number
    unacked: set[int] = field(default_factory=set)  # numbers sent without an id and never answered
    retried: int = 0
    problems: list[str] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Mint the key and prepare the server (not started)."""
        self.data.mkdir(parents=True, exist_ok=True)
        self.key, _ = KeyStore(self.data).create("supermemory", {"namespaces": None})
        self.server = ServeProcess(self.data, "--embedder", EMBEDDER, *UNLIMITED)
        self.rng = random.Random(self.seed)
        self._next = 0
        self._lock = threading.Lock()

    def client(self) -> Supermemory:
        """An official SDK client with the minted key (no retries: a cut-off request is ours to retry)."""
        return Supermemory(api_key=self.key, base_url=self.server.url, max_retries=0, timeout=60)

    # -- one round -------------------------------------------------------------------------------

    def round(self, writers: int = 2, max_delay: float = 1.5, max_batch: int = 24) -> Round:
        """Serve, retry what the last kill cut off, write until a random moment, kill -9."""
        self.server.start()
        done = Round()
        try:
            self._retry_cut_off()
        except BaseException:  # never leave the server running behind a failed retry
            self.server.kill()
            raise
        stop = threading.Event()
        cut: list[Sent] = []
        threads = [threading.Thread(target=self._write,
                                    args=(random.Random(self.rng.random()), stop, cut, done, max_batch))
                   for _ in range(writers)]
        kill_while_writing(self.server, self.rng, max_delay, stop, threads)
        done.cut_off = len(cut)
        self._cut = cut
        for _, _, status in self._rows():
            done.statuses[status] = done.statuses.get(status, 0) + 1
        done.unfinished_at_kill = sum(k for s, k in done.statuses.items() if s != "done")
        self._check_stored()
        self.rounds.append(done)
        return done

    def _numbers(self, k: int) -> list[int]:
        """k fresh document numbers."""
        with self._lock:
            start, self._next = self._next, self._next + k
        return list(range(start, start + k))

    def _write(self, rng: random.Random, stop: threading.Event, cut: list[Sent], done: Round, max_batch: int) -> None:
        """Add documents until stopped or cut off by the kill."""
        client = self.client()
        while not stop.is_set():
            batch = rng.random() < 0.4
            numbers = self._numbers(rng.randint(2, max_batch) if batch else 1)
            sent = Sent([(n, f"c{n}" if rng.random() < 0.5 else None) for n in numbers], batch)
            try:
                ids = self._send(client, sent)
            except ApiError as exc:
                self.problems.append(f"refused {sent}: {exc.status_code} {exc.body}")
                return
            except Exception:  # the connection died with the server: not acknowledged
                with self._lock:
                    cut.append(sent)
                return
            with self._lock:
                for (n, _), doc_id in zip(sent.docs, ids):
                    self.acked[doc_id] = n
                done.acknowledged += len(ids)

    @staticmethod
    def _item(n: int, custom: str | None) -> dict[str, Any]:
        """One document's fields."""
        return {"content": text(n), **({"id": custom} if custom else {}), "metadata": {"n": n}}

    def _send(self, client: Supermemory, sent: Sent) -> list[str]:
        """Add one request's documents; the ids the server answered."""
        if sent.batch:
            results = client.documents.batch_add(NS, documents=[self._item(n, c) for n, c in sent.docs]).results
            bad = [r for r in results if r.status == "error"]
            if bad:
                raise ApiError(status_code=200, body=str(bad))
            return [r.id for r in results]
        n, custom = sent.docs[0]
        item = self._item(n, custom)
        return [client.add(NS, content=item["content"], id=custom, metadata=item["metadata"]).id
                if custom else client.add(NS, content=item["content"], metadata=item["metadata"]).id]

    def _retry_cut_off(self) -> None:
        """Send again, as a client would, what the kill cut off: under caller ids it must not double."""
        client = self.client()
        for sent in getattr(self, "_cut", []):
            keep = Sent([(n, c) for n, c in sent.docs if c is not None], sent.batch)
            self.unacked.update(n for n, c in sent.docs if c is None)
            if not keep.docs:
                continue
            ids = self._send(client, keep)  # the unique text check after the next kill sees a second copy
            for (n, _), doc_id in zip(keep.docs, ids):
                self.acked[doc_id] = n
            self.retried += len(ids)
        self._cut = []

    # -- checks ----------------------------------------------------------------------------------

    def _rows(self) -> list[tuple[str, str, str]]:
        """Every stored document (id, content, status), read from the store of the stopped server."""
        with sqlite3.connect(self.data / "records.sqlite") as db:
            return list(db.execute("SELECT id, content, status FROM sm_documents WHERE ns=?", (NS,)))

    def _check_stored(self) -> None:
        """Right after a kill: each acknowledged document is stored once, with its content."""
        rows = {doc_id: content for doc_id, content, _ in self._rows()}
        for doc_id, n in self.acked.items():
            if rows.get(doc_id) != text(n):
                self.problems.append(f"acknowledged {doc_id} (#{n}) is {'changed' if doc_id in rows else 'lost'}")
        by_text: dict[str, int] = {}
        for content in rows.values():
            by_text[content] = by_text.get(content, 0) + 1
        doubled = [c for c, k in by_text.items() if k > 1]
        if doubled:
            self.problems.append(f"stored twice: {doubled[:3]}")

    def finish(self, timeout: float = 120) -> dict[str, int]:
        """Serve, retry what was cut off, let processing end, check everything; the counts."""
        self.server.start()
        try:
            self._retry_cut_off()
            client = self.client()
            docs = self._wait_done(client, timeout)
            self._check_served(client, docs)
        finally:
            self.server.kill()
        self._check_engine()
        extra = {n for n in self.unacked if text(n) in {c for _, c, _ in self._rows()}}
        return {"acknowledged": len(self.acked), "lost": sum(p.startswith("acknowledged") for p in self.problems),
                "problems": len(self.problems), "unacknowledged_stored": len(extra), "retried": self.retried,
                "documents": len(docs)}

    def _wait_done(self, client: Supermemory, timeout: float) -> dict[str, str]:
        """Wait until every stored document is done; their ids and statuses."""
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

    def _check_served(self, client: Supermemory, docs: dict[str, str]) -> None:
        """Over HTTP: done, once, one chunk and one memory, found by word and by its text at rank 1."""
        http = httpx.Client(base_url=self.server.url, headers={"Authorization": f"Bearer {self.key}"}, timeout=60)
        time.sleep(1.2)  # keyword commits land within a second
        chunks = client.list(NS, "chunks", limit=1).pagination.total_items
        memories = client.list(NS, "memories", limit=1).pagination.total_items
        if chunks != len(docs) or memories != len(docs):
            self.problems.append(f"{len(docs)} documents but {chunks} chunks and {memories} memories")
        for doc_id, n in sorted(self.acked.items(), key=lambda kv: kv[1]):
            status = docs.get(doc_id)
            if status != "done":
                self.problems.append(f"acknowledged {doc_id} (#{n}) is {status or 'lost'} at the end")
                continue
            got = http.get(f"/ns/{NS}/document/{doc_id}", params=[("include", "chunks"), ("include", "memories")])
            body = got.json()
            if [c["content"] for c in body.get("chunks", [])] != [text(n)] or [
                    m["memory"] for m in body.get("memories", [])] != [text(n)]:
                self.problems.append(f"{doc_id}: chunks {body.get('chunks')} memories {body.get('memories')}")
            found = [r.memory for r in client.search(NS, query=word(n), search_mode="memories", limit=5).results]
            # Others may follow on a hashing collision (a cosine, no word): only its own holds the word.
            if found[:1] != [text(n)] or [m for m in found if m and word(n) in m] != [text(n)]:
                self.problems.append(f"{word(n)} finds {found}")
            near = client.search(NS, query=text(n), search_mode="chunks", limit=3).results
            # 0.7 x cosine + 0.3 x coverage: its own text scores 1 only with its vector there.
            if not near or near[0].id != f"{doc_id}c0" or near[0].similarity < 0.99:
                self.problems.append(f"{doc_id}'s own text finds {[(r.id, r.similarity) for r in near]}")
        http.close()

    def _check_engine(self) -> None:
        """The stopped data directory reopened: each document's chunk and memory by word and by vector."""
        embedder = HashingEmbedder(DIMS)
        spaces = Collections(self.data)
        try:
            for name in (chunks_collection(NS), memories_collection(NS)):
                stored = [r[0] for r in spaces.store.query(
                    "SELECT doc_id FROM documents WHERE space_id=?", (spaces.info(name).id,))]
                if len(stored) != len(set(stored)):
                    self.problems.append(f"{name}: a record stored twice")
                for doc_id, n in self.acked.items():
                    want = f"{doc_id}c0" if name == chunks_collection(NS) else None
                    hits = spaces.search(name, SearchRequest(mode="keyword", q=word(n), limit=3, explain=False)).hits
                    if len(hits) != 1 or (want and hits[0].document.id != want) or hits[0].document.text != text(n):
                        self.problems.append(f"{name}: {word(n)} finds {[h.document.id for h in hits]}")
                        continue
                    vec = embedder.embed_documents([text(n)])[0]
                    near = spaces.search(name, SearchRequest(mode="vector", vector=vec, limit=5, explain=False)).hits
                    # Rank 1, or tied with it: two texts may hash to one vector (older first breaks the tie).
                    first = [h.document.id for h in near if (h.similarity or 0) >= (near[0].similarity or 0) - 1e-6]
                    if hits[0].document.id not in first or (near[0].similarity or 0) < 0.999:
                        self.problems.append(f"{name}: {doc_id}'s vector finds {[h.document.id for h in near]}")
        finally:
            spaces.close()
