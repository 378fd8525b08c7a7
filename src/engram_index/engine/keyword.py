"""The keyword index: BM25 over our own analyzed terms, kept in tantivy.

We feed tantivy the analyzer's terms joined by spaces and index them with a whitespace
tokenizer, so tantivy does the postings, segments, deletes and BM25 (k1 = 1.2, b = 0.75), while
the analysis (identifiers, stems, CJK bigrams) stays ours and identical at query time.

Per query word the best alternative counts: tantivy's disjunction-max over the exact term
(× 1.0), its stem (× 0.5) and the identifier's parts (× 0.4, summed), so a word never scores
twice for matching both as itself and as its stem.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from .analyzer import ANALYZER_VERSION, STOPWORDS, QueryWord, index_terms
from ..errors import StorageError
from .types import Document, Filters

SCHEMA_VERSION = 1
# Above any BM25 a realistic query reaches, and a power of two so that float32 keeps BM25's
# precision to about 4e-6 when it is added (see search_and_score).
CANDIDATE_OFFSET = 64.0
_META = "keyword.meta.json"
_WRITER_HEAP = 64 * 1024 * 1024
# Key term queries kept for reuse (about 100 bytes each); the cache starts over when full.
_KEY_QUERY_CACHE = 1 << 18


@dataclass(frozen=True, slots=True)
class TermWeights:
    """How much each kind of alternative of a query word counts."""

    # Tuned on SciFact's even-numbered queries from the 1.0 / 0.5 / 0.4 start (docs/design/engine.md).
    exact: float = 1.0
    stem: float = 1.0
    part: float = 0.6


def document_terms(doc: Document) -> str:
    """The whitespace-joined terms of a document's text, tags and source (one BM25 field)."""
    terms = index_terms(doc.text)
    for tag in doc.tags:
        terms.extend(index_terms(tag))
    if doc.source:
        terms.extend(index_terms(doc.source))
    return " ".join(terms)


def searchable_words(words: Sequence[QueryWord]) -> list[QueryWord]:
    """Drop stopwords and repeated words, unless the query is nothing but stopwords."""
    seen: set[str] = set()
    kept = [w for w in words if w.exact not in STOPWORDS]
    out: list[QueryWord] = []
    for word in kept or list(words):
        if word.exact not in seen:
            seen.add(word.exact)
            out.append(word)
    return out


def staging_path(path: Path) -> Path:
    """Where a compacted copy of the index at `path` is built before it replaces it."""
    return path.with_name(path.name + ".new")


def finish_swap(path: Path) -> None:
    """Complete or undo a compaction that a crash interrupted, so that `path` is whole."""
    staged, retired = staging_path(path), path.with_name(path.name + ".old")
    if not path.exists() and (staged / _META).exists():
        os.replace(staged, path)  # crashed between the two renames: the new copy is complete
    shutil.rmtree(staged, ignore_errors=True)
    shutil.rmtree(retired, ignore_errors=True)


def swap_in(path: Path) -> None:
    """Replace the index at `path` by its closed, committed staged copy."""
    staged, retired = staging_path(path), path.with_name(path.name + ".old")
    os.replace(path, retired)
    os.replace(staged, path)
    shutil.rmtree(retired, ignore_errors=True)


def _build_schema() -> tantivy.Schema:
    """The index schema: ordinal (fast), key (for deletes), body terms, and filter fields."""
    sb = tantivy.SchemaBuilder()
    sb.add_unsigned_field("ord", indexed=False, fast=True)
    sb.add_text_field("key", tokenizer_name="raw", index_option="basic")
    # Frequencies but no positions: BM25 needs tf, and phrase queries are not offered.
    sb.add_text_field("body", tokenizer_name="ws", index_option="freq")
    sb.add_text_field("author", tokenizer_name="raw", index_option="basic")
    sb.add_text_field("tags", tokenizer_name="raw", index_option="basic")
    sb.add_integer_field("created", indexed=True, fast=True)
    return sb.build()


class KeywordIndex:
    """One space's BM25 index on disk (or in memory), with its durable sequence marker."""

    def __init__(
        self,
        path: Path | None,
        weights: TermWeights | None = None,
        heap_bytes: int = _WRITER_HEAP,
        read_only: bool = False,
    ) -> None:
        """Open the index at `path` (None: in memory); an index of another version starts empty.

        A read-only index has no writer (tantivy allows one per index), so several processes can
        search it while none writes; it refuses writes and never changes its files.
        """
        self.read_only = read_only
        self.path = path
        self.weights = weights or TermWeights()
        self.schema = _build_schema()
        self._lock = threading.Lock()
        self.committed_seq = 0
        if path is not None and read_only:
            meta = self._read_meta()
            if meta is None or meta.get("version") != [SCHEMA_VERSION, ANALYZER_VERSION]:
                raise StorageError(f"no current keyword index at {path}: open it for writing first")
            self.committed_seq = meta["seq"]
            self.index = tantivy.Index(self.schema, path=str(path), reuse=True)
        elif path is not None:
            finish_swap(path)
            meta = self._read_meta()
            if meta is None or meta.get("version") != [SCHEMA_VERSION, ANALYZER_VERSION]:
                # Another analyzer or schema: terms would not match; rebuild from the records.
                shutil.rmtree(path, ignore_errors=True)
                meta = None
            path.mkdir(parents=True, exist_ok=True)
            self.committed_seq = meta["seq"] if meta else 0
            self.index = tantivy.Index(self.schema, path=str(path), reuse=True)
        else:
            self.index = tantivy.Index(self.schema)
        self.index.register_tokenizer(
            "ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
        )
        self._writer = None if read_only else self.index.writer(heap_size=heap_bytes, num_threads=1)
        self._pending = False
        self._current: Any = None  # the searcher of the last commit, once asked for
        self._searcher_lock = threading.Lock()
        self._key_queries: dict[int, tantivy.Query] = {}

    # -- writes -----------------------------------------------------------------------------

    def upsert(self, ord_: int, doc: Document, replace: bool = True) -> None:
        """Add a document, replacing any earlier version at the same ordinal (unless told there is none)."""
        tdoc = tantivy.Document()
        tdoc.add_unsigned("ord", ord_)
        tdoc.add_text("key", str(ord_))
        tdoc.add_text("body", document_terms(doc))
        tdoc.add_text("author", doc.author)
        for tag in doc.tags:
            tdoc.add_text("tags", tag)
        tdoc.add_integer("created", doc.created_ms)
        with self._lock:
            writer = self._writable()
            if replace:
                writer.delete_documents_by_term("key", str(ord_))
            writer.add_document(tdoc)
            self._pending = True

    def delete(self, ord_: int) -> None:
        """Remove the document at this ordinal."""
        with self._lock:
            self._writable().delete_documents_by_term("key", str(ord_))
            self._pending = True

    @property
    def pending(self) -> bool:
        """Whether writes are waiting for a commit."""
        return self._pending

    def commit(self, seq: int) -> None:
        """Make every write so far durable and searchable, and record `seq` as applied."""
        if self.read_only:
            return
        with self._lock:
            self._writable().commit()
            self._pending = False
            if self.path is not None:
                self._write_meta(seq)
            self.committed_seq = seq
        self.index.reload()
        with self._searcher_lock:
            self._current = None

    def reset(self) -> None:
        """Drop every document (durably), as before a full rebuild."""
        with self._lock:
            self._writable().delete_all_documents()
            self._pending = True
        self.commit(0)

    def close(self) -> None:
        """Let background merges finish and release the writer."""
        with self._lock:
            if self._writer is not None:
                self._writer.wait_merging_threads()

    def _writable(self) -> Any:
        """The writer, or StorageError for a read-only index."""
        if self._writer is None:
            raise StorageError("this keyword index is open read-only")
        return self._writer

    def segments(self) -> int:
        """How many segments a search visits (each adds a fixed cost per query term)."""
        return int(self._searcher().num_segments)

    def _read_meta(self) -> dict[str, Any] | None:
        """The marker file of the last durable commit, if any."""
        assert self.path is not None
        try:
            meta: dict[str, Any] = json.loads((self.path / _META).read_text())
            return meta
        except (OSError, ValueError):
            return None

    def _write_meta(self, seq: int) -> None:
        """Write the marker atomically: a crash leaves the old marker or the new, never half."""
        assert self.path is not None
        tmp = self.path / (_META + ".tmp")
        with open(tmp, "w") as fh:
            json.dump({"version": [SCHEMA_VERSION, ANALYZER_VERSION], "seq": seq}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path / _META)

    # -- queries ----------------------------------------------------------------------------

    def _word_query(self, word: QueryWord) -> tantivy.Query:
        """One query word: the best of its exact form, stem and identifier parts."""
        w = self.weights
        term = tantivy.Query.term_query
        alternatives = [tantivy.Query.boost_query(term(self.schema, "body", word.exact), w.exact)]
        if word.stem and word.stem != word.exact:
            alternatives.append(
                tantivy.Query.boost_query(term(self.schema, "body", word.stem), w.stem)
            )
        parts = [p for p in dict.fromkeys(word.parts) if p != word.exact]
        if parts:
            parts_q = tantivy.Query.boolean_query(
                [(tantivy.Occur.Should, term(self.schema, "body", p)) for p in parts]
            )
            alternatives.append(tantivy.Query.boost_query(parts_q, w.part))
        if len(alternatives) == 1:
            return alternatives[0]
        return tantivy.Query.disjunction_max_query(alternatives)

    def _filter_clauses(self, filters: Filters) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        """Filters as clauses that must match and add nothing to the score."""
        clauses: list[tantivy.Query] = []
        if filters.author is not None:
            clauses.append(tantivy.Query.term_query(self.schema, "author", filters.author))
        for tag in filters.tags:
            clauses.append(tantivy.Query.term_query(self.schema, "tags", tag))
        if filters.since_ms is not None:
            clauses.append(
                tantivy.Query.range_query(
                    self.schema, "created", tantivy.FieldType.Integer, filters.since_ms, None
                )
            )
        return [(tantivy.Occur.Must, tantivy.Query.const_score_query(c, 0.0)) for c in clauses]

    def search(
        self, words: Sequence[QueryWord], k: int, filters: Filters | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The top-k ordinals by BM25 and their scores (best first) among documents matching the filters."""
        words = searchable_words(words)
        if not words or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        should = [(tantivy.Occur.Should, self._word_query(w)) for w in words]
        query = tantivy.Query.boolean_query(should)
        if filters is not None and not filters.is_empty():
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, query), *self._filter_clauses(filters)]
            )
        return self._run(query, k)

    def search_and_score(
        self,
        words: Sequence[QueryWord],
        k: int,
        filters: Filters | None,
        candidates: Sequence[int] | np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The top-k by BM25 (like `search`) and the exact BM25 of each candidate, in one pass.

        Candidates are expected to pass the filters (the vector side applies the same ones); one
        that does not scores 0.

        The candidates' keys are an optional clause with a constant score of CANDIDATE_OFFSET,
        so all of them rank above every other match and one top-(k + candidates) cut returns
        both lists; a candidate's BM25 is its score minus the offset (float32: within 4e-6).
        Measured against a top-k search plus a second pass over the candidates: 2.7-3.5 ms
        against 5.0-6.1 ms at 100k memories. Should more than k other documents outscore the
        offset, the candidates cut off are scored exactly by a second pass.
        """
        words = searchable_words(words)
        cand = np.asarray(candidates, np.int64)
        cand_scores = np.zeros(cand.size, np.float32)
        if not words:
            return np.empty(0, np.int64), np.empty(0, np.float32), cand_scores
        query = tantivy.Query.boolean_query([(tantivy.Occur.Should, self._word_query(w)) for w in words])
        if filters is not None and not filters.is_empty():
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), *self._filter_clauses(filters)])
        if cand.size:
            keys = tantivy.Query.const_score_query(self._keys(cand.tolist()), CANDIDATE_OFFSET)
            query = tantivy.Query.boolean_query([(tantivy.Occur.Should, query), (tantivy.Occur.Should, keys)])
        wanted = k + int(cand.size)
        ords, scores = self._run(query, wanted)
        # Where each hit sits among the candidates (they are distinct), if it is one of them.
        by_ord = np.argsort(cand, kind="stable")
        at = np.minimum(np.searchsorted(cand[by_ord], ords), max(cand.size - 1, 0))
        is_cand = cand[by_ord[at]] == ords if cand.size else np.zeros(ords.size, bool)
        where = by_ord[at[is_cand]]
        # Exact in float32: a candidate scores CANDIDATE_OFFSET + BM25, within a factor of two of the offset.
        cand_scores[where] = np.maximum(scores[is_cand] - np.float32(CANDIDATE_OFFSET), np.float32(0.0))
        found = np.zeros(cand.size, bool)
        found[where] = True
        if len(ords) == wanted and not found.all():
            missing = np.flatnonzero(~found)
            cand_scores[missing] = self.scores(words, cand[missing].tolist())
        # The keyword top-k over everything: the other matches and the candidates that match.
        pool_ords = np.concatenate([ords[~is_cand], cand[cand_scores > 0]])
        pool_scores = np.concatenate([scores[~is_cand], cand_scores[cand_scores > 0]])
        order = np.argsort(-pool_scores, kind="stable")[:k]
        return pool_ords[order], pool_scores[order], cand_scores

    def _keys(self, ords: Sequence[int]) -> tantivy.Query:
        """A query matching exactly these ordinals (a union of their key terms)."""
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, self._key(int(o))) for o in ords])

    def _key(self, ord_: int) -> tantivy.Query:
        """The term query of one ordinal's key, built once (half the cost of a candidates' clause)."""
        query = self._key_queries.get(ord_)
        if query is None:
            if len(self._key_queries) >= _KEY_QUERY_CACHE:
                self._key_queries.clear()
            query = self._key_queries[ord_] = tantivy.Query.term_query(self.schema, "key", str(ord_))
        return query

    def scores(self, words: Sequence[QueryWord], ords: Sequence[int]) -> np.ndarray:
        """The exact BM25 score of each given ordinal (0 where no query word occurs)."""
        words = searchable_words(words)
        out = np.zeros(len(ords), np.float32)
        if not words or not len(ords):
            return out
        # The ordinals drive the iteration, so this costs O(candidates), not O(postings). A
        # union of key terms beats tantivy's term-set query here, which walks the dictionary
        # (0.9 vs 1.5 ms for 200 keys at 100k documents, bench notes in docs/design/engine.md).
        keys = self._keys(ords)
        query = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, tantivy.Query.const_score_query(keys, 0.0)),
                *[(tantivy.Occur.Should, self._word_query(w)) for w in words],
            ]
        )
        found_ords, found_scores = self._run(query, len(ords))
        where = {int(o): i for i, o in enumerate(ords)}
        for o, s in zip(found_ords.tolist(), found_scores.tolist()):
            out[where[o]] = s
        return out

    def _searcher(self) -> Any:
        """The searcher of the last commit (kept between searches; a commit or reload replaces it)."""
        searcher = self._current
        if searcher is None:
            with self._searcher_lock:  # so that a searcher from before a reload is never kept after it
                if self._current is None:
                    self._current = self.index.searcher()
                searcher = self._current
        return searcher

    def _run(self, query: tantivy.Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Run a query and map tantivy's addresses to our ordinals."""
        searcher = self._searcher()
        hits = searcher.search(query, k, count=False).hits
        if not hits:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        ords = searcher.fast_field_values("ord", [addr for _, addr in hits])
        return np.asarray(ords, np.int64), np.asarray([s for s, _ in hits], np.float32)

    def num_docs(self) -> int:
        """The number of committed, live documents."""
        return int(self._searcher().num_docs)
