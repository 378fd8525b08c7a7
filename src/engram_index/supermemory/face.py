"""The v5 face's shared state: the store and collections, the embedder and LLM, locks and caches."""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from engram_index.collections import Collections
from engram_index.embed.base import Embedder, document_text, embed_weighted
from engram_index.embed.pass_start import embed_on
from engram_index.embed.query_cache import EMBED_CONCURRENT, EMBED_QUEUE, EmbedSlots, QueryCache
from engram_index.engine.types import ModelIdentity
from engram_index.errors import UnknownSpace
from engram_index.keys import KeyStore
from engram_index.llm.base import LLM, Reranker
from engram_index.remodel import declare_model, reembed_all
from engram_index.store.base import Statement
from engram_index.supermemory.errors import Forbidden, Missing
from engram_index.supermemory.known import Known
from engram_index.supermemory.tables import (
    CHUNK_COLUMNS, DOC_COLUMNS, ChunkRow, DocRow, MEMORY_COLUMNS, MemoryRow, chunks_collection, memories_collection,
    migrate, now_ms,
)

PROCESSING = ("queued", "extracting", "chunking", "embedding", "indexing")
EMBED_SPLIT = 16


_HEX_TO_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")  # made once, not per tag
CHANGES_KEPT = 1024  # changes of a namespace's documents whose documents sm_doc_changes keeps (known.py)


HIDDEN_TAG_PREFIX = "zq"  # every hidden tag's, and so every index term of one begins with it


@functools.lru_cache(maxsize=1 << 16)
def hidden_tag(kind: str, value: str) -> str:
    """A tag no query word can match: letters of a hash (tags are keyword-searchable text too)."""
    digest = hashlib.blake2b(f"{kind}\0{value}".encode(), digest_size=8).hexdigest()
    return HIDDEN_TAG_PREFIX + digest.translate(_HEX_TO_LETTERS)


SUPERSEDED = hidden_tag("state", "superseded")
FORGOTTEN = hidden_tag("state", "forgotten")
EXPIRED = hidden_tag("state", "expired")  # past its forget-after time when last swept (supermemory/expiry.py)
STATES = frozenset((SUPERSEDED, FORGOTTEN, EXPIRED))  # a memory record's tags that are not its document's


def doc_tag(doc_id: str) -> str:
    """The tag every chunk and memory of a document carries (filters select documents by it)."""
    return hidden_tag("doc", doc_id)


def f16(vector: np.ndarray | None) -> bytes | None:
    """A float32 vector as the f16le bytes the engine stores."""
    return None if vector is None else np.asarray(vector, "<f2").tobytes()


class Face:
    """Everything the v5 routes share."""

    def __init__(
        self,
        collections: Collections,
        keys: KeyStore,
        embedder: Embedder | None,
        *,
        llm: LLM | None = None,
        reranker: Reranker | None = None,
        state: Any = None,
        read_only: bool = False,
    ) -> None:
        """Wire the face to the shared core (migrating its tables unless read-only).

        `state` (the app's state), when given, supplies the LLM and the reranker the server was
        started with (`app.state.llm`, `app.state.reranker`), read at each use.
        """
        self.collections = collections
        self.store = collections.store
        self.keys = keys
        self.embedder = embedder
        self._llm = llm
        self._reranker = reranker
        self._state = state
        self.read_only = read_only

        if not read_only:
            migrate(self.store)
        # Collections of another model (the server's embedder changed) move to this one in the background.
        self.reembedding = None if read_only else reembed_all(collections, "supermemory:", embedder)
        self._lock = threading.Lock()
        # Orders document intake: two adds of one new caller id must not both insert it.
        self.intake = threading.Lock()
        self._ns_locks: dict[str, threading.RLock] = {}
        self._ensured: set[str] = set()
        self._dates: dict[str, dict[str, str | None]] = {}  # documents' dates per namespace until its next write
        # Only a process that makes every write of its store knows of every change of its documents: a
        # read-only worker (serve --workers) or a node over a shared PostgreSQL store would not hear of another
        # process's write. It reads the dates each time, and the version of the documents from the store.
        self._sole_writer = not read_only and collections.shared_store() is None
        # Every document's filterable metadata, and what filters compile to, per namespace (known.py).
        self.known = Known(self.store, self._sole_writer,
                           lambda ns, ids: self._rows("sm_documents", "id, metadata, grp", ns, ids))
        self._dated: dict[str, bool] = {}  # whether any document of the namespace has a date, until its next write
        self.query_cache = QueryCache(slots=EmbedSlots())  # exact query text → vector (embed/query_cache.py)
        # A search's query embedding runs here (`start_embedding`) while the search does what needs no vector,
        # then the scan of one of its collections' vectors (search.found). A thread for each embedding the
        # query cache's slots admit at once or let wait: they still say when the embedder is busy.
        self.embedding_threads: Executor = ThreadPoolExecutor(EMBED_CONCURRENT + EMBED_QUEUE,
                                                              thread_name_prefix="v5-embed")
        self.on_queued: Callable[[str, str], None] = lambda ns, doc_id: None
        # Sweeps of expired memories (supermemory/expiry.py), one at a time, and when each namespace's began.
        self.sweeps: Executor = ThreadPoolExecutor(1, thread_name_prefix="v5-sweep")
        self.swept: dict[str, float] = {}
        self.swept_lock = threading.Lock()

    @property
    def sole_writer(self) -> bool:
        """Whether this process makes every write of its store (not a `--workers` reader, not a node over a
        shared PostgreSQL store): then its indexes hold every write as soon as it is made."""
        return self._sole_writer

    @property
    def llm(self) -> LLM | None:
        """The configured LLM, if any."""
        return self._llm if self._llm is not None else getattr(self._state, "llm", None)

    @property
    def reranker(self) -> Reranker | None:
        """The configured reranker, if any."""
        return self._reranker if self._reranker is not None else getattr(self._state, "reranker", None)

    @property
    def allow_private_urls(self) -> bool:
        """Whether URL documents may point at private or loopback addresses (`app.state.allow_private_urls`;
        off by default, so a caller cannot make the server fetch from its own network)."""
        return bool(getattr(self._state, "allow_private_urls", False))

    # -- locks, caches ------------------------------------------------------------------------

    def ns_lock(self, ns: str) -> threading.RLock:
        """The lock that orders a namespace's index writes, deletes and moves."""
        with self._lock:
            return self._ns_locks.setdefault(ns, threading.RLock())

    def writable(self) -> None:
        """Refuse a write in a read-only process (serve --workers)."""
        if self.read_only:
            raise Forbidden("namespace write access denied",
                            "this server runs read-only worker processes (serve --workers); supermemory"
                            " writes need the single-process server")

    def changed(self, ns: str, documents: Sequence[str] | None = None) -> None:
        """Drop what is cached about a namespace's documents after a write; a write that names the only
        `documents` it added, changed or removed has what filters know of those alone read again."""
        self.known.changed(ns, documents)  # (the write count first: `dates` keeps nothing read before it)
        with self._lock:
            self._dates.pop(ns, None)
            self._dated.pop(ns, None)

    def compiled_filter(self, ns: str, key: str, compile_: Callable[[Mapping[str, dict[str, Any]]], Any],
                        patch: Callable[[Mapping[str, dict[str, Any]], Any, frozenset[str]], Any] | None = None
                        ) -> Any:
        """What a filter compiles to over the namespace's documents (`Known.compiled_filter`)."""
        return self.known.compiled_filter(ns, key, compile_, patch)

    def metadata(self, ns: str) -> Mapping[str, dict[str, Any]]:
        """Every document's filterable metadata in a namespace, by document id (`Known.metadata`)."""
        return self.known.metadata(ns)

    # -- namespaces ---------------------------------------------------------------------------

    def model(self) -> ModelIdentity | None:
        """The model chunks and memories are embedded with (None: keyword search only)."""
        return self.embedder.identity if self.embedder is not None else None

    def ensure_collections(self, ns: str) -> None:
        """Create the namespace's two collections when new."""
        if ns in self._ensured:
            return
        for name in (chunks_collection(ns), memories_collection(ns)):
            declare_model(self.collections, name, self.embedder)  # another model's collection is re-embedded
        self._ensured.add(ns)

    def namespace_statement(self, ns: str, at_ms: int) -> Statement:
        """The statement that creates a namespace on its first document (a no-op afterwards)."""
        return ("INSERT OR IGNORE INTO sm_namespaces(name, created_ms, updated_ms) VALUES (?, ?, ?)", (ns, at_ms, at_ms))

    def documents_changed(self, ns: str, documents: Sequence[str] | None = None) -> list[Statement]:
        """The statements that count a change of a namespace's documents and log the `documents` it added,
        changed or removed (after `namespace_statement`, in the same transaction): another process's kept
        metadata is stale once the count moves, and it reads again only the documents logged since
        (`metadata`); a change that names none (None) has it read them all."""
        count = "(SELECT docs_changed FROM sm_namespaces WHERE name=?)"
        return [("UPDATE sm_namespaces SET docs_changed = docs_changed + 1 WHERE name=?", (ns,)),
                *[("INSERT INTO sm_doc_changes(ns, seq, doc_id) SELECT ?, docs_changed, ? FROM sm_namespaces"
                   " WHERE name=?", (ns, d, ns)) for d in dict.fromkeys(documents or ())],
                (f"DELETE FROM sm_doc_changes WHERE ns=? AND seq <= {count} - ?", (ns, ns, CHANGES_KEPT))]

    def namespace_exists(self, ns: str) -> bool:
        """Whether the namespace has been created."""
        return bool(self.store.query("SELECT 1 FROM sm_namespaces WHERE name=?", (ns,)))

    def namespace_context(self, ns: str) -> str | None:
        """The namespace's supporting context (it guides memory forming, with the document's own)."""
        rows = self.store.query("SELECT supporting_context FROM sm_namespaces WHERE name=?", (ns,))
        return rows[0][0] if rows else None

    def forget_namespace(self, ns: str) -> None:
        """Forget the in-memory state of a dropped namespace."""
        self._ensured.discard(ns)
        self.changed(ns)
        self.known.forget(ns)

    # -- documents ------------------------------------------------------------------------------

    def document(self, ns: str, ref: str) -> DocRow | None:
        """A document by its id or the caller's id, within the namespace."""
        rows = self.store.query(f"SELECT {DOC_COLUMNS} FROM sm_documents WHERE ns=? AND id=?", (ns, ref))
        if not rows:
            rows = self.store.query(f"SELECT {DOC_COLUMNS} FROM sm_documents WHERE ns=? AND custom_id=?", (ns, ref))
        return DocRow.from_row(rows[0]) if rows else None

    def require_document(self, ns: str, ref: str) -> DocRow:
        """A document, or 404."""
        doc = self.document(ns, ref)
        if doc is None:
            raise Missing("document not found", f"no document {ref!r} in namespace {ns!r}")
        return doc

    def documents(self, ns: str, ids: Sequence[str]) -> dict[str, DocRow]:
        """Documents by id."""
        return {doc.id: doc for doc in map(DocRow.from_row, self._rows("sm_documents", DOC_COLUMNS, ns, ids))}

    def documents_metadata(self, ns: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Documents' metadata by id (only that column: a search page's results carry it)."""
        return {row[0]: json.loads(row[1]) for row in self._rows("sm_documents", "id, metadata", ns, ids)}

    def dates(self, ns: str, ids: Sequence[str], dated: bool | None = None) -> dict[str, str | None]:
        """Documents' dates by id, None for a document without one or unknown (only that column, kept per
        namespace until its next write: a search asks them of its chunks' documents, a hundred a search).
        `dated`: what `dated` said just before (over a shared store, each asking is a round trip)."""
        writes = self.known.writes(ns)
        if not (self.any_dated(ns, writes) if dated is None else dated):  # no dated document: nothing to look up
            return dict.fromkeys(ids)
        kept = self._dates.get(ns, {})  # a write replaces the namespace's dict; it never changes this one
        missing = [d for d in dict.fromkeys(ids) if d not in kept]
        if not missing:
            return {d: kept[d] for d in ids}
        found = {row[0]: row[1] for row in self._rows("sm_documents", "id, date", ns, missing)}
        read = {d: found.get(d) for d in missing}
        with self._lock:
            if self._sole_writer and self.known.writes(ns) == writes:  # no write meanwhile: what was read is current
                self._dates.setdefault(ns, {}).update(read)
        return {d: read[d] if d in read else kept[d] for d in ids}

    def dated(self, ns: str) -> bool:
        """Whether any document of the namespace has a date (as of now: `any_dated` with its write count)."""
        return self.any_dated(ns, self.known.writes(ns))

    def any_dated(self, ns: str, writes: int) -> bool:
        """Whether any document of the namespace has a date (one indexed probe, kept like `dates`; `writes`:
        the namespace's write count before the caller began reading)."""
        held = self._dated.get(ns)
        if held is not None:
            return held
        fresh = bool(self.store.query("SELECT 1 FROM sm_documents WHERE ns=? AND date IS NOT NULL LIMIT 1", (ns,)))
        with self._lock:
            if self._sole_writer and self.known.writes(ns) == writes:
                self._dated[ns] = fresh
        return fresh

    def _rows(self, table: str, columns: str, ns: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """The rows of a namespace's table with these ids (500 bound parameters at a time)."""
        wanted = list(dict.fromkeys(ids))
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            rows += self.store.query(
                f"SELECT {columns} FROM {table} WHERE ns=? AND id IN ({','.join('?' * len(part))})", (ns, *part))
        return rows

    def chunks(self, ns: str, ids: Sequence[str]) -> dict[str, ChunkRow]:
        """Chunks by id."""
        return {row[0]: ChunkRow(*row) for row in self._rows("sm_chunks", CHUNK_COLUMNS, ns, ids)}

    # -- memories -------------------------------------------------------------------------------

    def memories(self, ns: str, ids: Sequence[str]) -> dict[str, MemoryRow]:
        """Memories by id."""
        return {m.id: m for m in map(MemoryRow.from_row, self._rows("sm_memories", MEMORY_COLUMNS, ns, ids))}

    def memory_tags(self, memory: MemoryRow) -> tuple[str, ...]:
        """The tags of a memory's record: its document, and whether it is superseded, forgotten or swept as
        expired."""
        tags = [doc_tag(memory.doc_id)]
        if not memory.is_latest:
            tags.append(SUPERSEDED)
        if memory.forgotten_ms is not None:
            tags.append(FORGOTTEN)
        if memory.expiry_tagged:
            tags.append(EXPIRED)
        return tuple(tags)

    def unfinished(self, ns: str) -> int:
        """How many of a namespace's documents are still processing.

        The condition of the partial index sm_documents_status is spelled out so that SQLite reads
        only those rows: `status IN (...)` alone does not imply it, and the count then read every
        document of the namespace (5.5 ms at 11,500 documents, on each short search's whyFewer).
        """
        marks = ",".join("?" * len(PROCESSING))
        return int(self.store.query(
            f"SELECT count(*) FROM sm_documents WHERE ns=? AND status NOT IN ('done', 'failed')"
            f" AND status IN ({marks})", (ns, *PROCESSING))[0][0])

    # -- embedding -------------------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """Embed chunk or memory texts (None each without an embedder)."""
        return self.embed_documents_weighted(texts)[0]

    def embed_documents_weighted(self, texts: Sequence[str]) -> tuple[list[np.ndarray | None], np.ndarray]:
        """Embed chunk or memory texts (None each without an embedder), with each one's weight in a
        pooled vector (`embed.base.pool`).

        A large batch is split in two halves of alike lengths embedded at once: a model's
        forward pass releases the GIL, and one pass uses one core.
        """
        embedder = self.embedder
        if embedder is None or not texts:
            return [None] * len(texts), np.ones(len(texts))
        final = [document_text("", t, None) for t in texts]
        if len(final) < EMBED_SPLIT:
            matrix, weights = embed_weighted(embedder, final)
            return [matrix[i] for i in range(len(final))], weights
        order = sorted(range(len(final)), key=lambda i: len(final[i]))
        halves = [order[0::2], order[1::2]]
        with ThreadPoolExecutor(2, thread_name_prefix="embed") as pool:
            parts = list(pool.map(lambda half: embed_weighted(embedder, [final[i] for i in half]), halves))
        out: list[np.ndarray | None] = [None] * len(final)
        all_weights = np.ones(len(final))
        for half, (matrix, weights) in zip(halves, parts):
            for row, i in enumerate(half):
                out[i] = matrix[row]
                all_weights[i] = weights[row]
        return out, all_weights

    def embed_query(self, text: str) -> np.ndarray | None:
        """Embed a query (None without an embedder)."""
        if self.embedder is None:
            return None
        return self.query_cache.vector(self.embedder, text)

    def start_embedding(self, text: str) -> np.ndarray | Future[np.ndarray] | None:
        """A query's vector set going on the face's embedding threads: a Future of it (its error is the
        embedding's), the vector itself when the query cache holds it, None without an embedder."""
        embedder = self.embedder
        if embedder is None:
            return None
        held = self.query_cache.get(embedder.identity, text)
        if held is not None:
            return held
        return embed_on(self.embedding_threads, lambda: self.query_cache.vector(embedder, text))

    def close(self) -> None:
        """Let the query embeddings and the sweep under way finish (before the embedder and the store close)."""
        self.sweeps.shutdown(wait=True)
        self.embedding_threads.shutdown(wait=True)

    def searchable(self, name: str) -> bool:
        """Whether a collection exists yet."""
        try:
            self.collections.info(name)
        except UnknownSpace:
            return False
        return True


def stamp() -> int:
    """Now, in milliseconds (one name for every write's clock)."""
    return now_ms()
