"""Exact-cosine vector search over float16 vectors, sped up by a 1-bit sign-code coarse scan.

Each vector is kept exactly as received (float16), beside its packed sign bits and its inverse
norm. A search computes the Hamming distance from the query's sign bits to every live code
and keeps the best 400 + 20k + 2 sqrt(size) in one compiled pass (`_kernels.nearest`: ~2-5 ns
a vector, half simsimd's per-row call), then re-ranks them by exact cosine (`_kernels.cosines`:
float16 rows converted in hardware against the float64 unit query, read where they lie).
Filters are exact: a narrow filter is scored exhaustively, a broad one applies before the cut.
Every sum (norms, cosines, the graph's pairs) is taken in float64 by our own code, so answers are
the same on every CPU: no library kernel that may accumulate in half precision is called.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engram_index.bounded import Bounded
from engram_index.engine import _kernels
from engram_index.engine.saved import read_saved, write_saved

# Candidates: max(MIN_CANDIDATES, CANDIDATES_PER_K * k) + CANDIDATES_PER_SQRT_SIZE * sqrt(size).
# Measured recall@10 against exact cosine: 0.998 on SciFact (5k), 0.985 / 0.983 / 0.984 on the
# synthetic 100k / 200k / 1M spaces of bench/synth.py, for ~0.3-1.2 ms of exact re-ranking.
MIN_CANDIDATES = 400
CANDIDATES_PER_K = 20
CANDIDATES_PER_SQRT_SIZE = 2.0
# Exact scoring costs ~40-60x a coarse code comparison per vector (a scattered 768-byte gather
# and a dot product, against a 48-byte code compare): measured break-even between size / 32 and
# size / 16 allowed at 100k and 1M, so fewer than size / 32 are scored exhaustively (and exactly).
EXACT_FILTER_DIVISOR = 32
# Re-rank in chunks so that a deadline passing mid-way is noticed within a fraction of a ms.
RERANK_CHUNK = 4096
# Gathering and scoring in chunks bounds the temporaries of the bulk path.
BULK_CHUNK = 65536
_MIN_CAPACITY = 1024
# The distance given to excluded ordinals when the coarse estimate is all there is time for:
# beyond any Hamming distance.
_FAR = np.float32(1e9)
# Queries prepared lately, by their float64 values: a v5 search prepares its query for each collection's
# search and again for each one's candidates (~25 us each, ten array steps), a Kindgi retrieve twice.
# Bounded (a few searches' worth), started over when full; shared by the threads (dict steps are atomic).
_PREPARED_LIMIT = 32
_prepared: Bounded[bytes, PreparedQuery] = Bounded(_PREPARED_LIMIT)
# Saved vectors (save / open): one .npy file per array, their sequence in meta.json, the saver's notes.
_FILES = ("vectors", "codes", "inv_norms", "live")
# Version 2: inverse norms are float64 (version 1's float32 ones made a vector's cosine with
# itself 0.99999994 for about half of all vectors; those files are rebuilt from the records).
# Version 3: notes.json beside them (the space's unusable vectors, which a process mapping the files
# cannot find without checking every record's).
_FILES_VERSION = 3


@dataclass(frozen=True, slots=True)
class VectorHits:
    """A search's results: ordinals best first, their cosines, and whether they are approximate."""

    ords: np.ndarray  # int64, best first
    sims: np.ndarray  # float32 cosine (exact; or the coarse estimate when approximate)
    approximate: bool  # True when exact re-ranking missed the deadline


@dataclass(frozen=True, slots=True)
class PreparedQuery:
    """A query made ready once for several calls: the unit query (float64) and its sign code."""

    unit: np.ndarray  # (dims,) float64, norm 1 (or all zeros for a zero query)
    code: np.ndarray  # packed sign bits


@dataclass(frozen=True, slots=True)
class ScanPlan:
    """What a search scores before its query is known: how many the scan keeps, the re-rank's pool when
    known up front (None: the scan's), and the rows the scan skips (None: none)."""

    wanted: int
    pool: np.ndarray | None
    excluded: np.ndarray | None


def _empty_hits() -> VectorHits:
    """Return a result with no hits."""
    return VectorHits(np.zeros(0, np.int64), np.zeros(0, np.float32), False)


def vector_problem(values: np.ndarray, dims: int | None = None) -> str | None:
    """Say why a vector cannot be searched with (None when it can): the wrong size, a NaN or
    infinite component (as float16), or all zeros (no direction for a cosine)."""
    if dims is not None and values.size != dims:
        return f"vector has {values.size} components, the space's model has {dims}"
    if not np.isfinite(values).all():
        return "vector holds NaN or infinite values"
    if not values.any():
        return "vector is all zeros: it has no direction"
    return None


def _sign_codes(vectors: np.ndarray) -> np.ndarray:
    """Return the packed sign bits (1 where a component is > 0) of float16 rows."""
    # Reading float16 as int16 keeps the sign test exact and avoids a float conversion;
    # finite positive halves are exactly the positive int16 patterns (-0.0 is negative).
    return np.packbits(vectors.view(np.int16) > 0, axis=-1)


def _self_dots(vectors: np.ndarray) -> np.ndarray:
    """Return the squared norms (float64) of contiguous float16 rows, summed in float64."""
    # Not simsimd's float16 `dot`: on CPUs with AVX-512 FP16 it accumulates in half precision,
    # and a row of norm 256 or more (|x| ~ 13 in 384 dimensions) comes out infinite.
    out = np.empty(len(vectors), dtype=np.float64)
    _kernels.self_dots(vectors, out)
    return out


def _inverse_norms(squared: np.ndarray) -> np.ndarray:
    """Return 1/|v| as float64, with 0 for zero vectors so that their cosine is 0."""
    # float64, not float32: a cosine is rounded to float32 once, after the scaling, so that a
    # vector's cosine with itself is exactly 1.
    out = np.zeros(squared.shape, dtype=np.float64)
    positive = squared > 0
    out[positive] = 1.0 / np.sqrt(squared[positive])
    return out


def _smallest(values: np.ndarray, count: int) -> np.ndarray:
    """Return the indices of `count` smallest values, in no order (ties at the cut: any)."""
    n = len(values)
    if count >= n:
        return np.arange(n)
    if n > 65536:
        # A threshold estimated from a strided sample, then one compare pass, is several times
        # faster than argpartition over a million values; fall back when the guess is short.
        sample = values[:: n // 16384]
        rank = min(len(sample) - 1, 2 * (count * len(sample)) // n + 16)
        limit = np.partition(sample, rank)[rank]
        picked = np.flatnonzero(values <= limit)
        if len(picked) >= count:
            return picked[np.argpartition(values[picked], count - 1)[:count]]
    return np.argpartition(values, count - 1)[:count]


class VectorIndex:
    """Float16 vectors of one space addressed by dense ordinals: a coarse scan finds candidates, an exact pass re-ranks them."""

    # Not safe for a write concurrent with any other call: the caller serialises writes.

    def __init__(self, dims: int) -> None:
        """Create an empty index for vectors of `dims` components."""
        if dims <= 0:
            raise ValueError(f"dims must be positive, got {dims}")
        self.dims = dims
        self.min_candidates = MIN_CANDIDATES
        self.candidates_per_k = CANDIDATES_PER_K
        self.candidates_per_sqrt_size = CANDIDATES_PER_SQRT_SIZE
        self.exact_filter_divisor = EXACT_FILTER_DIVISOR
        self.rerank_chunk = RERANK_CHUNK
        self._code_bytes = (dims + 7) // 8
        self._vectors = np.zeros((0, dims), dtype=np.float16)
        self._codes = np.zeros((0, self._code_bytes), dtype=np.uint8)
        self._inv_norms = np.zeros(0, dtype=np.float64)
        self._live = np.zeros(0, dtype=bool)
        self._size = 0
        self._count = 0
        self.mapped = False  # True: the arrays are read-only maps of saved files
        self.notes: Any = None  # what was saved beside the mapped files (`save`'s notes)

    def __len__(self) -> int:
        """Return the number of live vectors."""
        return self._count

    @property
    def size(self) -> int:
        """Return the highest ordinal ever stored, plus one (arrays are sized by it)."""
        return self._size

    # -- writes -------------------------------------------------------------------------------

    def _reserve(self, needed: int) -> None:
        """Grow the arrays geometrically so that ordinals below `needed` fit."""
        capacity = len(self._live)
        if needed <= capacity:
            return
        capacity = max(needed, 2 * capacity, _MIN_CAPACITY)
        used = self._size
        vectors = np.zeros((capacity, self.dims), dtype=np.float16)
        codes = np.zeros((capacity, self._code_bytes), dtype=np.uint8)
        inv_norms = np.zeros(capacity, dtype=np.float64)
        live = np.zeros(capacity, dtype=bool)
        vectors[:used] = self._vectors[:used]
        codes[:used] = self._codes[:used]
        inv_norms[:used] = self._inv_norms[:used]
        live[:used] = self._live[:used]
        self._vectors, self._codes, self._inv_norms, self._live = vectors, codes, inv_norms, live

    def _as_rows(self, vectors: np.ndarray) -> np.ndarray:
        """Return vectors as contiguous float16 rows of `dims`, or raise ValueError."""
        rows = np.ascontiguousarray(vectors, dtype=np.float16)
        if rows.ndim != 2 or rows.shape[1] != self.dims:
            raise ValueError(f"expected vectors of {self.dims} dims, got shape {np.shape(vectors)}")
        return rows

    def put(self, ord: int, vector: np.ndarray) -> None:
        """Store a float16 vector at an ordinal, replacing any vector already there."""
        self.put_many(np.array([ord], dtype=np.int64), np.asarray(vector).reshape(1, -1))

    def put_many(self, ords: np.ndarray, vectors: np.ndarray) -> None:
        """Store many float16 vectors at once (the last wins for a repeated ordinal)."""
        self._writable()
        ords = np.asarray(ords).reshape(-1).astype(np.int64, copy=False)
        rows = self._as_rows(vectors)
        if len(ords) != len(rows):
            raise ValueError(f"{len(ords)} ordinals for {len(rows)} vectors")
        if len(ords) == 0:
            return
        if ords.min() < 0:
            raise ValueError("ordinals must be non-negative")
        unique_ords, last = np.unique(ords[::-1], return_index=True)
        if len(unique_ords) < len(ords):
            keep = len(ords) - 1 - last
            ords, rows = ords[keep], rows[keep]
        squared = _self_dots(rows)
        # An infinite or NaN component makes the squared norm non-finite: one check covers both.
        if not np.isfinite(squared).all():
            raise ValueError("vectors must be finite")
        self._reserve(int(ords.max()) + 1)
        # Ascending consecutive ordinals (a bulk load) are written by slices, ~3x faster at 1M.
        first = int(ords[0])
        run = bool(np.array_equal(ords, unique_ords)) and int(ords[-1]) - first == len(ords) - 1
        target: slice | np.ndarray = slice(first, first + len(ords)) if run else ords
        self._count += int(np.count_nonzero(~self._live[target]))
        self._vectors[target] = rows
        for start in range(0, len(rows), BULK_CHUNK):
            stop = min(start + BULK_CHUNK, len(rows))
            where = slice(first + start, first + stop) if run else ords[start:stop]
            self._codes[where] = _sign_codes(rows[start:stop])
        self._inv_norms[target] = _inverse_norms(squared)
        self._live[target] = True
        self._size = max(self._size, int(ords.max()) + 1)

    def remove(self, ord: int) -> None:
        """Forget the vector at an ordinal; nothing happens if there is none."""
        if self.has(ord):
            self._writable()
            self._live[ord] = False
            self._inv_norms[ord] = 0.0
            self._count -= 1

    def _writable(self) -> None:
        """Raise ValueError for an index mapped from saved files (they are never written through a map)."""
        if self.mapped:
            raise ValueError("this vector index maps saved files read-only")

    # -- files --------------------------------------------------------------------------------

    def save(self, path: Path, seq: int, notes: Any = None) -> None:
        """Write the arrays as files that other processes can map read-only, stamped with `seq`, and the
        caller's `notes` (JSON) beside them."""
        size = self._size
        arrays = (self._vectors[:size], self._codes[:size], self._inv_norms[:size], self._live[:size])
        write_saved(path, dict(zip(_FILES, arrays)),
                    {"version": _FILES_VERSION, "seq": seq, "dims": self.dims, "size": size}, {"notes": notes})

    @classmethod
    def open(cls, path: Path, seq: int) -> VectorIndex | None:
        """Map vectors saved at sequence `seq` read-only (their notes in `notes`); None when there are none,
        or of another sequence."""
        saved = read_saved(path, _FILES, ("notes",), mapped=True)
        if saved is None:
            return None  # missing or torn: the caller rebuilds from the records
        meta, (vectors, codes, inv_norms, live), (notes,) = saved
        if meta.get("version") != _FILES_VERSION or meta.get("seq") != seq:
            return None
        try:
            index = cls(int(meta["dims"]))
            size = int(meta["size"])
        except (ValueError, KeyError, TypeError):
            return None
        expected = [((size, index.dims), np.float16), ((size, index._code_bytes), np.uint8),
                    ((size,), np.float64), ((size,), np.bool_)]
        if any(a.shape != shape or a.dtype != dtype for a, (shape, dtype) in zip((vectors, codes, inv_norms, live), expected)):
            return None
        index._vectors, index._codes, index._inv_norms, index._live = vectors, codes, inv_norms, live
        index._size, index._count = size, int(np.count_nonzero(live))
        index.mapped = True
        index.notes = notes
        return index

    # -- reads --------------------------------------------------------------------------------

    def has(self, ord: int) -> bool:
        """Say whether a vector is stored at an ordinal."""
        return 0 <= ord < self._size and bool(self._live[ord])

    def vector(self, ord: int) -> np.ndarray | None:
        """Return a copy of the float16 vector stored at an ordinal, or None."""
        return self._vectors[ord].copy() if self.has(ord) else None

    def prepare(self, query: np.ndarray | PreparedQuery) -> PreparedQuery:
        """Return the query ready for search and similarities (a prepared one as it is)."""
        if isinstance(query, PreparedQuery):
            return query
        q = np.asarray(query, dtype=np.float64)
        if q.shape != (self.dims,):
            raise ValueError(f"expected a query of {self.dims} dims, got shape {q.shape}")
        key = q.tobytes()
        made = _prepared.get(key)
        if made is not None:
            return made
        if not np.isfinite(q).all():
            raise ValueError("query must be finite")
        # Scaled by its largest component first, so that no square overflows or underflows
        # (a float64 query may hold 1e200 or 1e-200).
        scale = float(np.abs(q).max()) if q.size else 0.0
        if scale == 0.0:
            unit = np.zeros(self.dims)
        else:
            scaled = q / scale
            unit = np.ascontiguousarray(scaled / math.sqrt(float(scaled @ scaled)))
        code = np.packbits(q > 0)
        unit.flags.writeable = code.flags.writeable = False  # shared by every search that asks again
        made = PreparedQuery(unit, code)
        return _prepared.keep(key, made)

    def _cosines(self, unit: np.ndarray, ords: np.ndarray) -> np.ndarray:
        """Return the exact cosines (float32) of a unit query against stored ordinals."""
        if len(ords) == 0:
            return np.zeros(0, dtype=np.float32)
        # One compiled pass reads each row where it lies: a numpy gather, then simsimd's dot
        # products over the copy, cost 4x more for the re-rank's 1,032 rows.
        out = np.empty(len(ords), dtype=np.float32)
        _kernels.cosines(unit, self._vectors, self._inv_norms, np.ascontiguousarray(ords, dtype=np.int64), out)
        return out

    def fuse(self, query: PreparedQuery, vec_ords: np.ndarray, vec_sims: np.ndarray, vec_bm25: np.ndarray,
             kw_ords: np.ndarray, kw_bm25: np.ndarray, method: int, alpha: float, rrf_k: int,
             ords: np.ndarray, fused: np.ndarray, sims: np.ndarray, bm25: np.ndarray, has_sim: np.ndarray) -> int:
        """Fuse a hybrid search's candidates in one compiled call (_kernels.fuse, with this index's vectors for
        the keyword-only ones' cosines) and write the best len(ords); return how many."""
        return _kernels.fuse(np.ascontiguousarray(vec_ords, np.int64), vec_sims, vec_bm25,
                             np.ascontiguousarray(kw_ords, np.int64), kw_bm25, query.unit, self._vectors,
                             self._inv_norms, self._live[: self._size], method, alpha, rrf_k,
                             ords, fused, sims, bm25, has_sim)

    def rest(self, query: PreparedQuery, plan: ScanPlan, n: int, counts: tuple[object, ...], sums: tuple[object, ...],
             keyword: tuple[np.ndarray, np.ndarray], fusion: tuple[int, float, int, int],
             out: tuple[np.ndarray, ...]) -> int:
        """A started hybrid search's rest over this index's vectors in one compiled call (_kernels.hybrid_rest):
        the plan's best n by exact cosine, their BM25 (`counts`, `sums`), their fusion with the keyword side's
        top (`keyword`; `fusion`: method, alpha, rrf_k, limit) written into `out`; return how many."""
        size = self._size
        return _kernels.hybrid_rest((query.code, self._codes[:size], plan.excluded, plan.pool, plan.wanted,
                                     query.unit, self._vectors, self._inv_norms, n), counts, sums, keyword,
                                    (self._live[:size], *fusion), out)

    def similarities(self, query: np.ndarray | PreparedQuery, ords: np.ndarray) -> np.ndarray:
        """Return the exact cosine (float32) of the query with each ordinal, NaN where none."""
        unit = self.prepare(query).unit
        ords = np.asarray(ords).reshape(-1).astype(np.int64, copy=False)
        out = np.full(len(ords), np.nan, dtype=np.float32)
        inside = (ords >= 0) & (ords < self._size)
        valid = np.flatnonzero(inside)
        valid = valid[self._live[ords[valid]]]
        out[valid] = self._cosines(unit, ords[valid])
        return out

    def pairwise(self, ords: np.ndarray) -> np.ndarray:
        """Return the cosine (float32) between every two of these ordinals: an n x n matrix.

        Rows of ordinals without a vector are all 0. Meant for a few hundred ordinals (a graph
        of neighbours): the gathered vectors are multiplied once in float64, then scaled by
        their inverse norms, as the re-rank's cosines are (a float32 product's sums would
        depend on the CPU's BLAS kernel, ~1e-6 apart from one CPU to the next).
        """
        ords = np.asarray(ords).reshape(-1).astype(np.int64, copy=False)
        inside = (ords >= 0) & (ords < self._size)
        valid = np.flatnonzero(inside)
        valid = valid[self._live[ords[valid]]]
        rows = np.zeros((len(ords), self.dims), dtype=np.float64)
        rows[valid] = np.take(self._vectors, ords[valid], axis=0)
        inv = np.zeros(len(ords), dtype=np.float64)
        inv[valid] = self._inv_norms[ords[valid]]
        dots = rows @ rows.T
        dots *= inv[:, None]
        dots *= inv[None, :]
        sims: np.ndarray = np.clip(dots, -1.0, 1.0).astype(np.float32)
        return sims

    def default_candidates(self, k: int) -> int:
        """Return the candidate count that holds the recall target for this k and index size."""
        base = max(self.min_candidates, self.candidates_per_k * k)
        # A larger index crowds more vectors into the Hamming distances of the true neighbours,
        # so the cut widens with size: a fixed 1000 gives recall@10 0.98 at 100k but 0.96 at 1M.
        return base + int(self.candidates_per_sqrt_size * math.sqrt(self._size))

    def _distances(self, code: np.ndarray, ords: np.ndarray | None) -> np.ndarray:
        """Return the Hamming distances (float32) from a sign code to all codes, or to some ords."""
        codes = self._codes[: self._size] if ords is None else self._codes[ords]
        out = np.empty(len(codes), dtype=np.uint16)
        if len(codes):
            _kernels.hamming(code, codes, out)
        return out.astype(np.float32)

    def _coarse_hits(self, distances: np.ndarray, ords: np.ndarray | None, k: int) -> VectorHits:
        """Return the top k by Hamming distance (ties by ordinal) with estimated cosines."""
        picked = _smallest(distances, k)
        picked = picked[distances[picked] < _FAR]
        if len(picked) == 0:
            return VectorHits(np.zeros(0, np.int64), np.zeros(0, np.float32), True)
        # Widen to the whole tie group at the cut so that ties resolve by ordinal, not at random.
        picked = np.flatnonzero(distances <= distances[picked].max())
        found = picked if ords is None else ords[picked]
        order = np.lexsort((found, distances[picked]))[:k]
        sims = np.cos(np.pi * distances[picked[order]] / self.dims).astype(np.float32)
        return VectorHits(found[order].astype(np.int64), sims, True)

    def plan(self, k: int, allowed: np.ndarray | None = None, candidates: int | None = None) -> ScanPlan | None:
        """What a search for the k nearest among allowed ordinals scores, whatever its query (`search`'s
        arguments); None when it can find nothing."""
        if k <= 0 or self._count == 0:
            return None
        size = self._size
        wanted = self.default_candidates(k) if candidates is None else max(k, candidates)
        excluded: np.ndarray | None = None  # a bool mask over [0, size) of ordinals to skip
        pool: np.ndarray | None = None  # the ordinals to score exactly, when known up front
        if allowed is not None:
            given = np.asarray(allowed, dtype=bool).reshape(-1)[:size]
            if given.size == size:  # (a mask over every ordinal: one pass makes the admitted)
                mask = np.logical_and(given, self._live[:size])
            else:
                mask = np.zeros(size, dtype=bool)
                mask[: len(given)] = given
                mask &= self._live[:size]
            admitted = int(np.count_nonzero(mask))
            if admitted == 0:
                return None
            if admitted <= max(wanted, size // self.exact_filter_divisor):
                pool = np.flatnonzero(mask)
            else:
                excluded = np.logical_not(mask, out=mask)
        elif self._count <= wanted:
            pool = np.flatnonzero(self._live[:size])
        if pool is None and excluded is None and self._count < size:
            excluded = ~self._live[:size]
        return ScanPlan(wanted, pool, excluded)

    def search(
        self,
        query: np.ndarray | PreparedQuery,
        k: int,
        *,
        allowed: np.ndarray | None = None,
        candidates: int | None = None,
        deadline: float | None = None,
    ) -> VectorHits:
        """Return the k live vectors most cosine-similar to the query, among allowed ordinals."""
        prepared = self.prepare(query)
        unit, code = prepared.unit, prepared.code
        plan = self.plan(k, allowed, candidates)
        if plan is None:
            return _empty_hits()
        size, pool, excluded = self._size, plan.pool, plan.excluded
        if pool is None:
            if _passed(deadline):
                distances = self._distances(code, None)
                if excluded is not None:
                    distances[excluded] = _FAR
                return self._coarse_hits(distances, None, k)
            # One compiled pass: distances, the cut, and the ordinals under it (ascending).
            chosen = np.empty(plan.wanted, dtype=np.int64)
            pool = chosen[: _kernels.nearest(code, self._codes[:size], excluded, chosen)]
        elif _passed(deadline):
            return self._coarse_hits(self._distances(code, pool), pool, k)

        # Exact re-rank in chunks, checking the deadline before each one.
        sims = np.empty(len(pool), dtype=np.float32)
        for start in range(0, len(pool), self.rerank_chunk):
            if _passed(deadline):
                return self._coarse_hits(self._distances(code, pool), pool, k)
            stop = start + self.rerank_chunk
            sims[start:stop] = self._cosines(unit, pool[start:stop])
        # The best k by cosine, ties by ordinal (the pool ascends), in one compiled sort.
        best, best_sims = np.empty(min(k, len(pool)), np.int64), np.empty(min(k, len(pool)), np.float32)
        _kernels.rank_top(np.ascontiguousarray(pool, np.int64), sims, best, best_sims)
        return VectorHits(best, best_sims, False)


def _passed(deadline: float | None) -> bool:
    """Say whether a monotonic-clock deadline is set and has passed."""
    return deadline is not None and time.monotonic() >= deadline


def neighbor_pairs(sims: np.ndarray, neighbors: int, min_similarity: float) -> list[tuple[int, int, float]]:
    """Return the edges of a nearest-neighbour graph from an n x n similarity matrix.

    Each row keeps its `neighbors` most similar other rows whose similarity is at least
    `min_similarity` (ties: the lower index first). An unordered pair chosen from either end
    comes back once, as (chooser, chosen, similarity), in the order rows choose.
    """
    n = len(sims)
    out: list[tuple[int, int, float]] = []
    seen: set[tuple[int, int]] = set()
    if n < 2 or neighbors <= 0:
        return out
    indices = np.arange(n)
    for i in range(n):
        row = sims[i]
        keep = np.flatnonzero((row >= min_similarity) & (indices != i))
        if len(keep) == 0:
            continue
        best = keep[np.lexsort((keep, -row[keep]))][:neighbors]
        for j in best.tolist():
            pair = (min(i, j), max(i, j))
            if pair not in seen:
                seen.add(pair)
                out.append((i, j, float(row[j])))
    return out
