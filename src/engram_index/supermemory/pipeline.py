"""The processing pipeline: one background thread walks queued documents to done (or failed).

Documents are taken in batches (up to BATCH, each namespace written together): every step's
status change is one transaction for the batch, the batch's chunks and memories are embedded in
one call (each sentence once when the memories are the sentences), and both collections are written
in one transaction. A step only moves a document at the revision it started with: a document resubmitted
meanwhile is queued again and its later run wins. At start, every document not yet done or
failed is queued again, so nothing acknowledged is lost.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from engram_index.embed.base import pool
from engram_index.embed.text import embed_text
from engram_index import metrics
from engram_index.errors import EngramError
from engram_index.supermemory import memories_form
from engram_index.supermemory.chunking import chunk, sentences
from engram_index.supermemory.face import PROCESSING, Face, stamp
from engram_index.supermemory.forming import Job
from engram_index.supermemory.sources import extract_document

log = logging.getLogger("engram_index.supermemory")
BATCH = 32


class Pipeline:
    """The background worker that processes documents."""

    def __init__(self, face: Face) -> None:
        """Attach to the face (its `on_queued` hook feeds this queue)."""
        self.face = face
        self._queue: deque[tuple[str, str]] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self._busy = False
        self._thread = threading.Thread(target=self._loop, daemon=True, name="supermemory-pipeline")
        face.on_queued = self.submit

    def start(self) -> None:
        """Queue every unfinished document again and start working."""
        rows = self.face.store.query(
            "SELECT ns, id FROM sm_documents WHERE status NOT IN ('done', 'failed') ORDER BY created_ms, id")
        for ns, doc_id in rows:
            self.submit(ns, doc_id)
        if rows:
            log.info("resuming %d unfinished supermemory documents", len(rows))
        self._thread.start()

    def submit(self, ns: str, doc_id: str) -> None:
        """Queue a document for processing."""
        with self._cond:
            self._queue.append((ns, doc_id))
            self._cond.notify()

    def stop(self) -> None:
        """Finish the batch in hand and stop (what is queued resumes at the next start)."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(60)

    def idle(self) -> bool:
        """Whether nothing is queued or in hand."""
        with self._cond:
            return not self._queue and not self._busy

    def _loop(self) -> None:
        """Take batches until stopped."""
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                taken: dict[tuple[str, str], None] = {}
                while self._queue and len(taken) < BATCH:
                    taken[self._queue.popleft()] = None
                self._busy = True
            try:
                by_ns: dict[str, list[str]] = {}
                for ns, doc_id in taken:
                    by_ns.setdefault(ns, []).append(doc_id)
                for ns, ids in by_ns.items():
                    try:
                        self._process(ns, ids)
                    except Exception as exc:  # a bug or a broken store: say so on the documents
                        log.exception("supermemory processing failed")
                        self._give_up(ns, ids, f"processing failed: {exc}")
            finally:
                with self._cond:
                    self._busy = False

    # -- one batch of one namespace ------------------------------------------------------------

    def _process(self, ns: str, ids: Sequence[str]) -> None:
        """Walk a namespace's batch through every step."""
        face = self.face
        docs = face.documents(ns, ids)
        # In the order they were queued: the index's insertion order (its stable tie-break) then
        # follows the order the documents were sent, whatever their random ids.
        jobs = [Job(docs[i]) for i in dict.fromkeys(ids) if i in docs and docs[i].status in PROCESSING]
        if not jobs:
            return
        self._status(ns, jobs, "extracting")
        for job in jobs:
            try:
                job.text = extract_document(face, job.doc)
            except EngramError as exc:
                job.error = exc.message
            except Exception as exc:  # an extractor's own failure on a malformed file
                log.warning("extracting %s/%s failed", ns, job.doc.id, exc_info=True)
                job.error = f"cannot extract text: {exc}"
        self._fail(ns, jobs)
        jobs = [j for j in jobs if j.error is None]
        self._status(ns, jobs, "chunking")
        for job in jobs:
            job.chunks = chunk(job.text)
            try:
                job.formed = memories_form.form(face, ns, job.doc, job.text)
            except EngramError as exc:
                job.error = exc.message
        self._fail(ns, jobs)
        jobs = [j for j in jobs if j.error is None]
        self._status(ns, jobs, "embedding")
        try:
            if face.llm is None:
                _embed_pooled(face, jobs)
            else:
                _embed_whole(face, jobs)
        except EngramError as exc:
            for job in jobs:
                job.error = f"embedding failed: {exc.message}"
            self._fail(ns, jobs)
            return
        self._status(ns, jobs, "indexing")
        memories_form.index(face, ns, jobs)
        now = stamp()
        for job in jobs:  # searchable now: how long since the write that queued it was acknowledged
            metrics.observe_lag((now - job.doc.updated_ms) / 1000)

    def _give_up(self, ns: str, ids: Sequence[str], error: str) -> None:
        """Mark unfinished documents failed (a PATCH or a resubmission queues them again)."""
        marks = ",".join("?" * len(PROCESSING))
        try:
            self.face.store.execute([
                (f"UPDATE sm_documents SET status='failed', error=? WHERE ns=? AND id=? AND status IN ({marks})",
                 (error, ns, doc_id, *PROCESSING)) for doc_id in ids])
        except Exception:  # the store itself is failing: the documents resume at the next start
            log.exception("could not mark documents failed")

    def _status(self, ns: str, jobs: Sequence[Job], status: str) -> None:
        """Move the batch's documents to a status (each only at the revision it started with)."""
        if not jobs:
            return
        now = stamp()
        self.face.store.execute([
            ("UPDATE sm_documents SET status=?, updated_ms=? WHERE ns=? AND id=? AND revision=?",
             (status, now, ns, j.doc.id, j.doc.revision)) for j in jobs])

    def _fail(self, ns: str, jobs: Sequence[Job]) -> None:
        """Mark the documents that failed a step, with why."""
        failed = [j for j in jobs if j.error is not None]
        if not failed:
            return
        now = stamp()
        self.face.store.execute([
            ("UPDATE sm_documents SET status='failed', error=?, updated_ms=? WHERE ns=? AND id=? AND revision=?",
             (j.error, now, ns, j.doc.id, j.doc.revision)) for j in failed])
        # (A status is nothing the face keeps of the namespace's documents: see memories_form.index.)


# Chunks and memories are embedded with their document's metadata as tags, as garden.engram embeds a
# memory with its tags: what a document is about (who wrote it, where it is from) is part of what each
# of its sentences says. LoCoMo dev (docs/design/ranking.md) measures it.
EMBED_METADATA = True
METADATA_WORDS_ONLY = True  # False: every string and number, as before issue 25's ninth pass


def in_context(job: Job, text: str) -> str:
    """The text one chunk or memory of `job`'s document is embedded as (`embedded_text`)."""
    return embedded_text(job.doc.metadata, text)


def embedded_text(metadata: dict[str, Any] | None, text: str) -> str:
    """The text a chunk or memory is embedded as: itself, then `Tags: key:value, …` of its document's
    metadata that says something of it when it was processed (`_says_something`, in the order sent; a
    later metadata-only PATCH does not re-embed, as a garden.engram record's tags are those of its version)."""
    if not EMBED_METADATA:
        return text
    tags = [f"{k}:{v}" for k, v in (metadata or {}).items() if _says_something(k, v)]
    return embed_text("", text, tags)


# A key naming an identifier, as JSON and Python spell them (diaId, source_id, docID, user-id).
_IDENTIFIER_ENDINGS = ("Id", "ID", "_id", "-id", "_ID", "-ID")


def _says_something(key: str, value: Any) -> bool:
    """Whether a metadata entry is words the model can read: a string holding a letter, under a key that
    does not name an identifier. Identifiers, numbers and dates are noise to the embedding: LoCoMo dev's
    v5 hybrid R@10 0.761 with them, 0.778 without; SciFact through the face 0.7297, 0.7357
    (docs/design/supermemory.md, *What a chunk is embedded as*)."""
    if not METADATA_WORDS_ONLY:  # as before (bench/v5_embedded_text.py compares the two)
        return isinstance(value, (str, int, float)) and not isinstance(value, bool)
    if not isinstance(value, str) or not any(c.isalpha() for c in value):
        return False
    return key.lower() != "id" and not key.endswith(_IDENTIFIER_ENDINGS)


def _embed_whole(face: Face, jobs: Sequence[Job]) -> None:
    """Embed every chunk and every new memory by itself (the LLM's memories are not sentences)."""
    texts = [in_context(j, c.text) for j in jobs for c in j.chunks]
    texts += [in_context(j, s.text) for j in jobs if j.formed for s in j.formed.new]
    vectors = face.embed_documents(texts)
    at = 0
    for job in jobs:
        job.chunk_vectors = vectors[at:at + len(job.chunks)]
        at += len(job.chunks)
    for job in jobs:
        if job.formed:
            job.formed.vectors = vectors[at:at + len(job.formed.new)]
            at += len(job.formed.new)


def _embed_pooled(face: Face, jobs: Sequence[Job]) -> None:
    """Embed each sentence once: it is a memory's vector, and a chunk's vector pools its sentences'.

    Without an LLM the memories are the document's sentences, so embedding the chunks too would
    embed every word twice; a chunk's vector is instead its sentences' pooled by tokens
    (`embed.base.pool`; bench/v5_chunk_vectors.py: nDCG@10 0.8609 against 0.8673 for the model
    on the whole chunk, for about half of ingest's embedding). A chunk with no whole sentence
    (one cut inside a very long one) is embedded itself.
    """
    wanted: dict[str, int] = {}  # text (whitespace normalised, in context) -> row in the one embedding call

    def row(job: Job, text: str) -> int:
        return wanted.setdefault(in_context(job, " ".join(text.split())), len(wanted))

    plans: list[tuple[list[list[int]], list[int]]] = []
    for job in jobs:
        spans = sentences(job.text)
        per_chunk = []
        for c in job.chunks:
            inside = [row(job, s.text) for s in spans if s.start >= c.start and s.end <= c.end]
            per_chunk.append(inside or [row(job, c.text)])
        plans.append((per_chunk, [row(job, m.text) for m in job.formed.new] if job.formed else []))
    vectors, weights = face.embed_documents_weighted(list(wanted))
    model = face.model()
    dims = model.dims if model is not None else 0
    for job, (per_chunk, memory_rows) in zip(jobs, plans):
        job.chunk_vectors = [_pooled(vectors, weights, rows, dims) for rows in per_chunk]
        if job.formed:
            job.formed.vectors = [vectors[r] for r in memory_rows]


def _pooled(vectors: list[np.ndarray | None], weights: np.ndarray, rows: list[int], dims: int) -> np.ndarray | None:
    """One chunk's vector from its sentences' (None without an embedder)."""
    picked = [vectors[r] for r in rows]
    if any(v is None for v in picked):
        return None
    if len(rows) == 1:
        return picked[0]
    return pool(np.stack([v for v in picked if v is not None]), weights[rows], dims)
