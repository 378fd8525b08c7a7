"""The keyword index: tantivy holds our terms durably; the term counts rank and score.

We feed tantivy the analyzer's terms joined by spaces under a whitespace tokenizer (postings,
segments, deletes, filters, durable commits), and the same terms to a forward index
(termcounts.py). Search ranks from the term counts: `exact_top` scores every document holding a
query term over their inverted postings, so keyword search is the exact top-k by our BM25, which a
window of tantivy's own ranking was not (docs/design/engine.md). A word counts once: by its stem
where the document holds it (every inflection, the exact form included), else by its exact form
(an identifier is indexed whole without a stem), plus 0.6 × each identifier part.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from engram_index.engine import _kernels, keyword_query
from engram_index.engine.analyzer import ANALYZER_VERSION, QueryWord, index_terms
from engram_index.errors import StorageError
# Re-exported: callers import the query's words from here.
from engram_index.engine.keyword_query import PART_WEIGHT as PART_WEIGHT
from engram_index.engine.keyword_query import query_terms
from engram_index.engine.keyword_query import searchable_words as searchable_words
from engram_index.engine.termcounts import TermCounts
from engram_index.engine.types import Document, Filters

SCHEMA_VERSION = 1
_META = "keyword.meta.json"
_WRITER_HEAP = 64 * 1024 * 1024
# The term counts are saved beside the index, at most this often while writes go on (and on
# close): after a crash, the writes since the last save are counted again from the records.
COUNTS_SAVE_S = 300.0
_COUNTS = "counts"


def document_terms(doc: Document) -> list[str]:
    """The terms of a document's text, tags and source, in order (one BM25 field)."""
    terms = index_terms(doc.text)
    for tag in doc.tags:
        terms.extend(index_terms(tag))
    if doc.source:
        terms.extend(index_terms(doc.source))
    return terms



# The postings' sums and _score's differ only by float64 rounding (~1e-15 of the score); anything
# within this share of the k-th best is scored again exactly, float32 ties included.
_EXACT_MARGIN = 1e-6


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
        heap_bytes: int = _WRITER_HEAP,
        read_only: bool = False,
        counts: tuple[TermCounts, int] | None = None,
    ) -> None:
        """Open the index at `path` (None: in memory); an index of another version starts empty.

        `counts`: term counts to adopt (up to date with the index) and the sequence of their
        saved copy, instead of opening the saved copy.

        A read-only index has no writer (tantivy allows one per index), so several processes can
        search it while none writes; it refuses writes and never changes its files.
        """
        self.read_only = read_only
        self.path = path
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
        if self._writer is not None and path is not None:
            # A process killed inside a commit leaves files its commit point never named (a segment's
            # deletes, `<segment>.<opstamp>.del`); the same operations after a restart reach the same
            # opstamp and name, and tantivy refuses to write a file that exists. Its collection removes
            # every file the last commit does not use.
            self._writer.garbage_collect_files()
        self._pending = False
        # Ordinals written (or deleted) since the last commit: searched from the term counts until then.
        self._pending_ords: set[int] = set()
        self._current: Any = None  # the searcher of the last commit, once asked for
        self._searcher_lock = threading.Lock()
        self.counts, self.counts_seq = counts if counts is not None else self._open_counts()
        self._counts_saved = time.monotonic()

    # -- writes -----------------------------------------------------------------------------

    def upsert(self, ord_: int, doc: Document, replace: bool = True) -> None:
        """Add a document, replacing any earlier version at the same ordinal (unless told there is none)."""
        self.write([(ord_, doc, replace)])

    def delete(self, ord_: int) -> None:
        """Remove the document at this ordinal."""
        self.write([(ord_, None, True)])

    def write(self, changes: Iterable[tuple[int, Document | None, bool]]) -> None:
        """Apply changes in order, as (ordinal, document or None to delete it, whether an earlier
        version may be there to replace): tantivy one by one, the term counts in one batch."""
        changes = list(changes)
        if not changes:
            return
        rows: list[tuple[int, list[str] | None]] = []
        with self._lock:
            writer = self._writable()
            for ord_, doc, replace in changes:
                self._pending_ords.add(ord_)
                if doc is None:
                    writer.delete_documents_by_term("key", str(ord_))
                    rows.append((ord_, None))
                    continue
                terms = document_terms(doc)
                tdoc = tantivy.Document()
                tdoc.add_unsigned("ord", ord_)
                tdoc.add_text("key", str(ord_))
                tdoc.add_text("body", " ".join(terms))
                tdoc.add_text("author", doc.author)
                for tag in doc.tags:
                    tdoc.add_text("tags", tag)
                tdoc.add_integer("created", doc.created_ms)
                if replace:
                    writer.delete_documents_by_term("key", str(ord_))
                writer.add_document(tdoc)
                rows.append((ord_, terms))
            self.counts.put_many(rows)
            self._pending = True

    def count_only(self, changes: Iterable[tuple[int, Document | None]]) -> None:
        """Bring the term counts up to date with changes that tantivy already holds (None: deleted)."""
        self.counts.put_many((ord_, None if doc is None else document_terms(doc)) for ord_, doc in changes)

    def _open_counts(self) -> tuple[TermCounts, int]:
        """The saved term counts and the sequence they reflect (empty at 0 when none fit the index)."""
        if self.path is None:
            return TermCounts(), 0
        opened = TermCounts.open(self.path / _COUNTS, shared=self.read_only)
        if opened is None or opened[1] > self.committed_seq:
            return TermCounts(), 0
        return opened

    def save_counts(self, seq: int) -> None:
        """Save the term counts as of `seq` (the caller holds off writes)."""
        if self.path is None or self.read_only:
            return
        self.counts.save(self.path / _COUNTS, seq)
        self.counts_seq = seq
        self._counts_saved = time.monotonic()

    def freeze_counts_if_due(self, seq: int) -> Callable[[], None] | None:
        """When a save is due (changed, none for COUNTS_SAVE_S): copy the counts as of `seq` (the
        caller holds off writes) and return what writes the copy (to call after letting go)."""
        if self.path is None or self.read_only or not self.counts.changed:
            return None
        if time.monotonic() - self._counts_saved < COUNTS_SAVE_S:
            return None
        frozen, path = self.counts.frozen(), self.path / _COUNTS
        self.counts.changed = False
        self._counts_saved = time.monotonic()

        def write() -> None:
            try:
                frozen.write(path, seq)
            except BaseException:
                self.counts.changed = True  # due again next time
                raise
            self.counts_seq = seq

        return write

    @property
    def pending(self) -> bool:
        """Whether writes are waiting for a commit."""
        return self._pending

    def pending_ords(self) -> np.ndarray:
        """The ordinals written or deleted since the last commit (which tantivy cannot find yet)."""
        with self._lock:
            return np.fromiter(self._pending_ords, np.int64, len(self._pending_ords))

    def commit(self, seq: int) -> None:
        """Make every write so far durable and searchable, and record `seq` as applied."""
        if self.read_only:
            return
        with self._lock:
            committed = set(self._pending_ords)
            self._writable().commit()
            self._pending = False
            if self.path is not None:
                self._write_meta(seq)
            self.committed_seq = seq
        self.index.reload()
        with self._searcher_lock:
            self._current = None
        # Only now, with searchers that see them: until here a search still scores them itself.
        with self._lock:
            self._pending_ords -= committed

    def reset(self) -> None:
        """Drop every document (durably), as before a full rebuild."""
        with self._lock:
            self._writable().delete_all_documents()
            self.counts.clear()
            self.counts_seq = 0
            self._pending = True
            if self.path is not None:
                shutil.rmtree(self.path / _COUNTS, ignore_errors=True)  # never to be opened again
        self.commit(0)

    def close(self, save_counts: bool = True) -> None:
        """Save the term counts (when every write is committed), let background merges finish, release the writer."""
        if save_counts and self.counts.changed and not self._pending:
            self.save_counts(self.committed_seq)
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

    def _words_query(self, terms: Sequence[str]) -> tantivy.Query:
        """The scoring part of a query: a sum of plain term clauses (which block-max WAND can prune)."""
        term = tantivy.Query.term_query
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, term(self.schema, "body", t)) for t in terms])

    def _filter_clauses(
        self, filters: Filters, allowed: np.ndarray | None
    ) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        """Filters as clauses that must (or must not) match and add nothing to the score; `allowed`
        holds the ordinals of `filters.ids`, which only the caller's columns can resolve."""
        term = tantivy.Query.term_query
        must: list[tantivy.Query] = []
        must_not: list[tantivy.Query] = []
        if filters.author is not None:
            must.append(term(self.schema, "author", filters.author))
        for tag in filters.tags:
            must.append(term(self.schema, "tags", tag))
        for group in filters.any_tags:
            must.append(tantivy.Query.term_set_query(self.schema, "tags", list(group)))
        for tag in filters.none_tags:
            must_not.append(term(self.schema, "tags", tag))
        if filters.ids is not None:
            keys = [str(o) for o in (allowed if allowed is not None else ())]
            must.append(tantivy.Query.term_set_query(self.schema, "key", keys) if keys else tantivy.Query.empty_query())
        if filters.since_ms is not None or filters.until_ms is not None:
            # tantivy's range is inclusive at both ends; our window ends before until_ms.
            upper = filters.until_ms - 1 if filters.until_ms is not None else None
            must.append(
                tantivy.Query.range_query(self.schema, "created", tantivy.FieldType.Integer, filters.since_ms, upper)
            )
        return [(tantivy.Occur.Must, tantivy.Query.const_score_query(c, 0.0)) for c in must] + [
            (tantivy.Occur.MustNot, c) for c in must_not
        ]

    def _query(self, terms: Sequence[str], filters: Filters | None, allowed: np.ndarray | None = None) -> tantivy.Query:
        """The terms' query, restricted to documents matching the filters (which add nothing to the score)."""
        query = self._words_query(terms)
        if filters is not None and not filters.is_empty():
            query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), *self._filter_clauses(filters, allowed)])
        return query

    def search(
        self, words: Sequence[QueryWord], k: int, filters: Filters | None = None, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The top-k ordinals by BM25 and their scores (best first) among documents matching the filters."""
        ords, scores, _ = self.search_and_score(words, k, filters, (), allowed)
        return ords, scores

    def search_and_score(
        self,
        words: Sequence[QueryWord],
        k: int,
        filters: Filters | None,
        candidates: Sequence[int] | np.ndarray,
        allowed: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The top-k by BM25 (like `search`) and the BM25 of each candidate, scored together.

        tantivy picks the k best matches by its own (length-quantized) BM25; the term counts
        score them and the candidates, which are expected to pass the filters (the vector side
        applies the same ones). Matches deleted since the last commit score 0 and are dropped.
        """
        words = searchable_words(words)
        terms = query_terms(words)
        cand = np.asarray(candidates, np.int64).reshape(-1)
        if not terms:
            return np.empty(0, np.int64), np.empty(0, np.float32), np.zeros(cand.size, np.float32)
        found = self._find(self._query(terms, filters, allowed), k) if k > 0 else np.empty(0, np.int64)
        scores = self._score(words, terms, np.concatenate([found, cand]))
        top, cand_scores = scores[: found.size], scores[found.size :]
        order = np.argsort(-top, kind="stable")
        order = order[top[order] > 0]
        return found[order], top[order], cand_scores

    def exact_top(
        self, words: Sequence[QueryWord], k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The exact top-k by our BM25 (`exact_top_and_score` without other candidates)."""
        ords, scores, _ = self.exact_top_and_score(words, k, allowed, np.empty(0, np.int64))
        return ords, scores

    def exact_top_and_score(
        self, words: Sequence[QueryWord], k: int, allowed: np.ndarray | None, candidates: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The exact top-k by our BM25 (and every document tied with the k-th) among the documents the
        term counts hold and `allowed` (a mask over ordinals, None: all) lets through: ordinals
        ascending, scores as `scores` gives them; may hold more than k, never fewer than there are.

        Every document holding a query term is scored over the postings; the best are scored again
        from their rows, so that the reported scores are exactly `scores`' (and the ranking theirs).
        Documents written since the postings were inverted are scored from their rows alone. The
        third array is the BM25 of each of `candidates` (ordinals, the vector side's), scored in
        the same pass over the rows.
        """
        query = keyword_query.prepared(words)  # what depends on the words alone, once per query text
        if not query.terms or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32), np.zeros(candidates.size, np.float32)
        ords = self.top_rows(query, k, allowed)
        scores = self.score_query(query, np.concatenate([ords, candidates]))
        top, candidate_scores = scores[: ords.size], scores[ords.size :]
        keep = top > 0
        return ords[keep], top[keep], candidate_scores

    def top_rows(self, query: keyword_query.KeywordQuery, k: int, allowed: np.ndarray | None) -> np.ndarray:
        """The ordinals `exact_top_and_score` scores from their rows (ascending, distinct): the postings
        pass's best within the margin of the k-th, and the documents written since the postings."""
        # MaxScore: documents that cannot reach the margin of the k-th best may be left out.
        ords, approx, stale = self.counts.matches(query.plan, allowed, k, _EXACT_MARGIN)
        # Those within the margin of the k-th best, in one compiled pass (numpy's partition and mask).
        ords = ords[: _kernels.select_top(ords, approx, k, _EXACT_MARGIN)]
        if stale.size:
            if allowed is not None:
                inside = stale[stale < allowed.size]
                stale = inside[allowed[inside]]
            return np.unique(np.concatenate([ords, stale]))
        return np.sort(ords)  # distinct already: each document is met once

    def scores(self, words: Sequence[QueryWord], ords: Sequence[int] | np.ndarray) -> np.ndarray:
        """The BM25 score of each given ordinal (0 where no query word occurs)."""
        words = searchable_words(words)
        return self._score(words, query_terms(words), np.asarray(ords, np.int64))

    def word_scores(self, words: Sequence[QueryWord], ords: np.ndarray) -> np.ndarray:
        """Each word's own BM25 in each ordinal, float32 of shape (ordinals, words): column j is
        `scores([words[j]], ords)` bit for bit, from one pass over the ordinals' term counts."""
        ords = np.asarray(ords, np.int64)
        out = np.zeros((ords.size, len(words)), np.float32)
        if not words or not ords.size:
            return out
        query = keyword_query.word_columns_of(words)  # once per query's words, while cached
        parts = self.counts.term_scores(query.terms, ords)  # a term's part is its own, whichever terms are asked
        # Every word's sums in one compiled call, each word's as combine_scores gives it alone.
        _kernels.word_sums(parts, query.counts, query.cols, keyword_query.PART_WEIGHT, out)
        return out

    def holds(self, words: Sequence[QueryWord], ords: np.ndarray,
              prev: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Which documents hold each (searchable) query word, from the term counts: booleans of shape
        (ordinals, words), `whole` where the word's exact form or stem occurs, `part` where one of its
        identifier parts does; with `prev` (an ordinal beside each, -1: none), what either holds. An
        ordinal outside the counts (-1 among them) holds nothing of its own."""
        held = keyword_query.held_columns_of(words)
        return self.counts.presence(held.terms, held.whole, held.part, ords, prev)

    def coverage(self, words: Sequence[QueryWord], ords: np.ndarray, prev: np.ndarray | None = None,
                 weights: np.ndarray | None = None) -> np.ndarray:
        """Each document's keyword coverage of these (searchable) query words, float64: the weights of the
        words `holds` says it holds whole, plus half those it holds only in part, over all words' weights
        (each word weighs 1 without weights, or with none above 0); 0 with no word. Summed word after word
        in one compiled pass, so the same on every CPU."""
        ords = np.ascontiguousarray(ords, np.int64).reshape(-1)
        if not words:
            return np.zeros(ords.size)
        if weights is None or not weights.sum() > 0:
            weights = np.ones(len(words))
        held = keyword_query.held_columns_of(words)
        return self.counts.coverage(held.terms, held.whole, held.part, ords, prev,
                                    np.ascontiguousarray(weights, np.float64))

    def _score(self, words: Sequence[QueryWord], terms: list[str], ords: np.ndarray) -> np.ndarray:
        """The BM25 of each ordinal for these (searchable) words and their query_terms: per word its
        stem's part where the document holds the stem, else its exact form's, plus PART_WEIGHT × each
        identifier part's."""
        del terms  # query_terms(words): the prepared query has them
        return self.score_query(keyword_query.prepared(words), ords)

    def score_query(self, query: keyword_query.KeywordQuery, ords: np.ndarray) -> np.ndarray:
        """_score for a prepared query (its term columns by role worked out once)."""
        parts = self.counts.term_scores(query.terms, ords)
        # One compiled pass adds them up as numpy's sums over the columns did (bit for bit).
        out = np.empty(ords.size, np.float32)
        _kernels.combine_scores(parts, query.plain, query.stems, query.exacts, query.part_columns,
                                keyword_query.PART_WEIGHT, out)
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

    def _find(self, query: tantivy.Query, k: int) -> np.ndarray:
        """The ordinals of tantivy's top-k for a query, best first."""
        searcher = self._searcher()
        hits = searcher.search(query, k, count=False).hits
        if not hits:
            return np.empty(0, np.int64)
        return np.asarray(searcher.fast_field_values("ord", [addr for _, addr in hits]), np.int64)

    def num_docs(self) -> int:
        """The number of committed, live documents."""
        return int(self._searcher().num_docs)
