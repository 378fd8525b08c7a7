"""kill -9 of a served v5 face while clients change documents and memories, then check what they were told.

`V5Crash` mints a supermemory key, serves a data directory with `engram-index serve` (the
hashing embedder) and runs rounds: writers send changes through the official SDK and keep a
model of every document the server acknowledged; the server is killed -9 at a random moment,
the stopped store is checked (`crashkit_v5_checks.check_stored`: every acknowledged change
there exactly once, nothing half done), and it is served again. The changes are single adds
and batches (half under caller ids), resubmissions under a caller id (content that grows, so
the last statement's memory gets a new version, or that is appended; and unchanged ones),
PATCHes of content (a statement reworded: a new memory version) or of metadata alone, file
uploads (multipart), deletes, and forgetting a memory by id. Each writer changes only the
documents it made, one change at a time, so the model knows what each must hold.

A change cut off by the kill (no answer) may have landed or not: after the restart it is sent
again as a client would (a caller-id add, a resubmission, a PATCH, a delete, a forget: each
must then hold once); an add without an id and a file upload cannot be retried without
risking a copy, so they may be there once or not at all. `finish` lets processing end and
checks everything over HTTP and, the server stopped, in the engine itself.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supermemory import Supermemory
from supermemory.core.api_error import ApiError

from engram_index.keys import KeyStore
from tests.limits import ServeProcess

from . import crashkit_v5_checks as checks

NS = checks.NS
EMBEDDER = f"hashing:{checks.DIMS}"
# The checks run far above a key's default admission (50 a second): that is the load path's to test.
UNLIMITED = ("--key-rate", "1000000", "--key-burst", "1000000", "--rate", "1000000", "--burst", "1000000")
COLORS = ("green", "amber", "violet", "grey", "scarlet", "teal", "ochre")
THINGS = ("bike", "kettle", "garden", "lantern", "ledger", "compass", "harbour", "violin", "orchard", "quilt", "atlas")
# How often a writer picks each change (adds keep the pipeline busy; the rest need documents).
WEIGHTS = {"add": 25, "batch": 15, "resubmit": 14, "same": 4, "patch": 9, "meta": 6, "upload": 10, "delete": 7,
           "forget": 10}
MAX_GROWS, MAX_APPENDS = 6, 3  # keeps a document one chunk (under 800 characters) of statements under 60 words


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
    """Document `n`'s first content: one statement around its word, open-ended so that it can grow."""
    return f"Entry {word(n)} keeps the {COLORS[n % 7]} {THINGS[n % 11]} notes for recall"


@dataclass
class Doc:
    """What the server acknowledged of one document: its current content, metadata and forgotten memories."""

    n: int
    owner: int
    id: str
    custom: str | None
    content: str
    metadata: dict[str, Any]
    file: bool = False
    grows: int = 0
    appends: int = 0
    edits: int = 0  # PATCHes acknowledged
    recolours: int = 0  # of them, those that reworded the first statement
    deleted: bool = False
    forgotten: set[str] = field(default_factory=set)
    pending: Op | None = None  # a change to it the kill cut off, not yet sent again
    # Every metadata it was sent (acknowledged or cut off): a chunk or memory is embedded with the
    # metadata of the processing that made it, which a later metadata-only PATCH leaves as it was.
    sent_metadata: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Op:
    """One change a writer sent: adds carry (number, caller id) pairs, the rest name their document."""

    kind: str
    docs: list[tuple[int, str | None]] = field(default_factory=list)
    doc: Doc | None = None
    content: str | None = None
    metadata: dict[str, Any] | None = None
    memory: str | None = None  # the memory a forget names (None: it was not sent yet)
    owner: int = 0
    targets: list[Doc] = field(default_factory=list)  # the documents a delete names (doc is the first)


@dataclass
class Round:
    """What one kill did."""

    acknowledged: int = 0
    unfinished_at_kill: int = 0  # documents not yet done in the store right after the kill
    statuses: dict[str, int] = field(default_factory=dict)  # the stored documents' statuses then
    cut_off: int = 0  # changes in flight at the kill
    kinds: dict[str, int] = field(default_factory=dict)  # acknowledged changes by kind
    cut_kinds: dict[str, int] = field(default_factory=dict)  # changes in flight at the kill, by kind


@dataclass
class V5Crash:
    """A data directory served again and again, and what it acknowledged."""

    data: Path
    seed: int = 18
    key: str = ""
    docs: dict[str, Doc] = field(default_factory=dict)  # document id -> what it must hold
    unacked: set[int] = field(default_factory=set)  # numbers added without an id (or as files) and cut off
    files: set[int] = field(default_factory=set)  # numbers uploaded as files (their content is extracted)
    retried: int = 0
    kinds: dict[str, int] = field(default_factory=dict)  # acknowledged changes by kind, over every round
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
        self._cut: list[Op] = []

    def client(self) -> Supermemory:
        """An official SDK client with the minted key (no retries: a cut-off request is ours to retry)."""
        return Supermemory(api_key=self.key, base_url=self.server.url, max_retries=0, timeout=60)

    @property
    def acked(self) -> dict[str, int]:
        """Every acknowledged document's number, by id (deleted ones too)."""
        return {d.id: d.n for d in self.docs.values()}

    # -- one round -------------------------------------------------------------------------------

    def round(self, writers: int = 2, max_delay: float = 1.5, max_batch: int = 24) -> Round:
        """Serve, retry what the last kill cut off, write until a random moment, kill -9, check the store."""
        self.server.start()
        done = Round()
        try:
            self._retry_cut_off()
            served = checks.ServedCheck(self.client(), self.server.url, self.key)
            try:
                self.problems += served.after_restart(self.data, self.docs, random.Random(self.rng.random()))
            finally:
                served.close()
        except BaseException:  # never leave the server running behind a failed retry or check
            self.server.kill()
            raise
        stop = threading.Event()
        cut: list[Op] = []
        threads = [threading.Thread(target=self._write, args=(i, random.Random(self.rng.random()), stop, cut, done,
                                                              max_batch)) for i in range(writers)]
        kill_while_writing(self.server, self.rng, max_delay, stop, threads)
        done.cut_off = len(cut)
        for op in cut:
            done.cut_kinds[op.kind] = done.cut_kinds.get(op.kind, 0) + 1
        self._cut = cut
        rows = checks.stored_documents(self.data)
        for row in rows.values():
            done.statuses[row.status] = done.statuses.get(row.status, 0) + 1
        done.unfinished_at_kill = sum(k for s, k in done.statuses.items() if s != "done")
        in_flight = {n for op in cut for n, _ in op.docs}  # adds cut off: they may have landed
        self.problems += checks.check_stored(self.data, self.docs, self.unacked | in_flight)
        self.rounds.append(done)
        return done

    def _numbers(self, k: int) -> list[int]:
        """k fresh document numbers."""
        with self._lock:
            start, self._next = self._next, self._next + k
        return list(range(start, start + k))

    def _pick(self, owner: int, rng: random.Random, max_batch: int) -> Op:
        """The next change a writer sends: a random kind, on one of its own documents when it needs one."""
        kind = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        with self._lock:
            mine = [d for d in self.docs.values() if d.owner == owner and not d.deleted]
        if kind == "resubmit" or kind == "same":
            mine = [d for d in mine if d.custom is not None and not d.file]
        if kind in ("add", "batch", "upload") or not mine:
            batch = kind == "batch"
            numbers = self._numbers(rng.randint(2, max_batch) if batch else 1)
            custom = kind != "upload"
            return Op("upload" if kind == "upload" else "batch" if batch else "add", owner=owner,
                      docs=[(n, f"c{n}" if custom and rng.random() < 0.5 else None) for n in numbers])
        doc = rng.choice(mine)
        if kind == "resubmit":
            # The last statement grows (its memory gets a new version), or new content is appended.
            if doc.grows < MAX_GROWS and (doc.appends >= MAX_APPENDS or rng.random() < 0.7):
                return Op(kind, doc=doc, content=f"{doc.content} and more {THINGS[(doc.n + doc.grows) % 11]} pages")
            if doc.appends < MAX_APPENDS:  # content that does not extend the stored content
                return Op("append", doc=doc, content=f"Later {word(doc.n)} holds list {doc.appends} of"
                                                     f" {THINGS[(doc.n + 3) % 11]} cards")
            kind = "same"
        if kind == "delete":  # one to twelve at once: each id is its own change, so kills land between them
            picked = rng.sample(mine, min(len(mine), rng.choice((1, 1, 2, 5, 12))))
            return Op(kind, doc=picked[0], targets=picked)
        if kind == "same":
            return Op(kind, doc=doc, content=doc.content)
        if kind == "patch":  # a statement reworded (one colour for another): the same memory, a new version
            old, new = COLORS[(doc.n + doc.recolours) % 7], COLORS[(doc.n + doc.recolours + 1) % 7]
            return Op(kind, doc=doc, content=doc.content.replace(f" the {old} ", f" the {new} ", 1))
        if kind == "meta":
            metadata = {"n": doc.n, "edit": doc.edits + 1, "colour": COLORS[doc.edits % 7]}
            doc.sent_metadata.append(metadata)
            return Op(kind, doc=doc, metadata=metadata)
        return Op(kind, doc=doc)

    def _write(self, owner: int, rng: random.Random, stop: threading.Event, cut: list[Op], done: Round,
               max_batch: int) -> None:
        """Send changes until stopped or cut off by the kill."""
        client = self.client()
        while not stop.is_set():
            op = self._pick(owner, rng, max_batch)
            try:
                result = self._send(client, op)
            except ApiError as exc:
                if exc.status_code == 409 and op.kind in ("patch", "meta"):  # still processing: not changed
                    continue
                self.problems.append(f"refused {op.kind} {op.docs or (op.doc and op.doc.id)}: {exc.status_code}"
                                     f" {exc.body}")
                return
            except Exception:  # the connection died with the server: not acknowledged
                if op.kind != "forget" or op.memory is not None:  # a forget's first read changes nothing
                    with self._lock:
                        cut.append(op)
                        for doc in op.targets or ([op.doc] if op.doc else []):
                            doc.pending = op
                return
            with self._lock:
                self._ack(op, result, done)

    # -- sending and acknowledging ---------------------------------------------------------------

    @staticmethod
    def _item(n: int, custom: str | None) -> dict[str, Any]:
        """One added document's fields."""
        return {"content": text(n), **({"id": custom} if custom else {}), "metadata": {"n": n}}

    def _send(self, client: Supermemory, op: Op) -> Any:
        """Send one change; what the server answered (ids for adds)."""
        doc = op.doc
        if op.kind == "batch":
            results = client.documents.batch_add(NS, documents=[self._item(n, c) for n, c in op.docs]).results
            bad = [r for r in results if r.status == "error"]
            if bad:
                raise ApiError(status_code=200, body=str(bad))
            return [r.id for r in results]
        if op.kind == "add":
            n, custom = op.docs[0]
            item = self._item(n, custom)
            return [client.add(NS, content=item["content"], id=custom, metadata=item["metadata"]).id
                    if custom else client.add(NS, content=item["content"], metadata=item["metadata"]).id]
        if op.kind == "upload":
            n = op.docs[0][0]
            return [client.documents.upload_file(NS, file=(f"note{n}.txt", text(n).encode(), "text/plain"),
                                                 metadata=json.dumps({"n": n})).id]
        assert doc is not None
        if op.kind in ("resubmit", "append", "same"):
            return client.add(NS, content=op.content or "", id=doc.custom)
        if op.kind == "patch":
            return client.documents.update(NS, doc.id, content=op.content)
        if op.kind == "meta":
            return client.documents.update(NS, doc.id, metadata=op.metadata)
        if op.kind == "delete":
            return client.documents.delete(NS, ids=[d.custom or d.id for d in op.targets])
        if op.memory is None:  # forget: one of its current memories, read first
            got = client.documents.get(NS, doc.id, include=["memories"])
            if got.system.status != "done":
                return None
            live = sorted(m.id for m in got.memories or [] if m.is_latest and not m.is_forgotten)
            if not live:
                return None
            op.memory = live[len(doc.forgotten) % len(live)]
        return client.memories.forget(NS, ids=[op.memory])

    def _ack(self, op: Op, result: Any, done: Round) -> None:
        """Take an answered change into the model (and say what in the answer is wrong)."""
        if op.kind in ("add", "batch", "upload"):
            for (n, custom), doc_id in zip(op.docs, result):
                if doc_id in self.docs and self.docs[doc_id].n != n:
                    self.problems.append(f"{op.kind} of #{n} answered #{self.docs[doc_id].n}'s id {doc_id}")
                content = text(n)
                self.docs[doc_id] = Doc(n, op.owner, doc_id, custom, content, {"n": n}, file=op.kind == "upload",
                                        sent_metadata=[{"n": n}])
                if op.kind == "upload":
                    self.files.add(n)
            self._count(op.kind, done, len(result))
            return
        doc = op.doc
        assert doc is not None
        doc.pending = None
        if op.kind in ("resubmit", "append", "same"):
            if result.id != doc.id:
                self.problems.append(f"{op.kind} under {doc.custom} answered {result.id}, not {doc.id}")
            if op.kind == "resubmit":
                doc.content, doc.grows = op.content or "", doc.grows + 1
            elif op.kind == "append":
                doc.content, doc.appends = f"{doc.content}\n\n{op.content}", doc.appends + 1
        elif op.kind == "patch":
            doc.content, doc.edits, doc.recolours, doc.file = op.content or "", doc.edits + 1, doc.recolours + 1, False
        elif op.kind == "meta":
            doc.metadata, doc.edits = op.metadata or {}, doc.edits + 1
        elif op.kind == "delete":
            for target in op.targets:
                target.deleted, target.pending = True, None
            if result.count + len(result.errors or []) != len(op.targets):
                self.problems.append(f"delete of {[d.id for d in op.targets]} answered {result}")
            self._count(op.kind, done, len(op.targets))
            return
        elif op.kind == "forget":
            if result is None:
                return
            if result.count != 1:
                self.problems.append(f"forget of {op.memory} answered {result}")
            else:
                doc.forgotten.add(op.memory or "")
        self._count(op.kind, done, 1)

    def _count(self, kind: str, done: Round, k: int) -> None:
        """Count acknowledged changes by kind."""
        done.acknowledged += k
        done.kinds[kind] = done.kinds.get(kind, 0) + k
        self.kinds[kind] = self.kinds.get(kind, 0) + k

    def _retry_cut_off(self) -> None:
        """Send again, as a client would, what the kill cut off; each must then hold exactly once."""
        client = self.client()
        for op in self._cut:
            if op.kind in ("add", "batch", "upload"):
                keep = Op(op.kind, [(n, c) for n, c in op.docs if c is not None], owner=op.owner)
                self.unacked.update(n for n, c in op.docs if c is None)
                if op.kind == "upload":
                    self.files.update(n for n, _ in op.docs)
                if keep.docs:
                    ids = self._send(client, keep)
                    self._ack(keep, ids, Round())
                    self.retried += len(ids)
                continue
            deadline = time.monotonic() + 60
            while True:
                try:
                    result = self._send(client, op)
                    break
                except ApiError as exc:  # a PATCH waits for the resumed processing to end
                    if exc.status_code != 409 or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            self._ack(op, result, Round())
            self.retried += 1
        self._cut = []

    # -- the end ---------------------------------------------------------------------------------

    def finish(self, timeout: float = 120) -> dict[str, int]:
        """Serve, retry what was cut off, let processing end, check everything; the counts."""
        self.server.start()
        try:
            self._retry_cut_off()
            client = self.client()
            listed = checks.wait_done(client, timeout)
            landed = self._adopt_landed()
            served = checks.ServedCheck(client, self.server.url, self.key)
            try:
                self.problems += served.run(self.docs, listed)
            finally:
                served.close()
        finally:
            self.server.kill()
        self.problems += checks.check_stored(self.data, self.docs, set())
        self.problems += checks.check_engine(self.data, self.docs)
        live = [d for d in self.docs.values() if not d.deleted]
        return {"acknowledged": len(self.docs) - len(landed), "lost": sum(p.startswith("lost") for p in self.problems),
                "problems": len(self.problems), "unacknowledged_stored": len(landed), "retried": self.retried,
                "documents": len(listed), "live": len(live), "deleted": len(self.docs) - len(live),
                "forgotten": sum(len(d.forgotten) for d in live),
                "versions": checks.versioned_memories(self.data)}

    def _adopt_landed(self) -> list[int]:
        """Cut-off adds without an id that landed: into the model, to be checked as the others."""
        landed = []
        for doc_id, row in checks.stored_documents(self.data).items():
            if doc_id not in self.docs and row.n in self.unacked:
                # Sent with {"n": n} as every add is: the metadata its chunks and memories are embedded with.
                self.docs[doc_id] = Doc(row.n, -1, doc_id, None, text(row.n), {"n": row.n}, file=row.n in self.files,
                                        sent_metadata=[{"n": row.n}])
                landed.append(row.n)
        return landed
