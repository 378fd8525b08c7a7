"""The engine's compiled inner loops (_kernels.c): the coarse scan, the exact re-rank, the squared norms and the
BM25 parts; they take any C-contiguous buffer, numpy arrays here."""

from collections.abc import Callable, Collection, Mapping, Sequence, Set as AbstractSet
from typing import Any, TypeVar

import numpy as np

_M = TypeVar("_M")
_S = TypeVar("_S")

def hamming(query: np.ndarray, codes: np.ndarray, out: np.ndarray) -> None:
    """Write into out (uint16, one per row) the Hamming distance from query to each row of codes."""

def nearest(query: np.ndarray, codes: np.ndarray, excluded: np.ndarray | None, out: np.ndarray) -> int:
    """Write the ascending ordinals of the len(out) rows nearest to query (ties: lower ordinals); return how many."""

def bm25_parts(
    ords: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    doc_lengths: np.ndarray,
    ids: np.ndarray,
    tfs: np.ndarray,
    qids: np.ndarray,
    cols: np.ndarray,
    idf: np.ndarray,
    table: np.ndarray,
    k1: float,
    b: float,
    average: float,
    out: np.ndarray,
) -> None:
    """Write each query term's BM25 part for each ordinal into out (ordinals x columns, float64, zeroed)."""

def word_presence(
    ords: np.ndarray,
    prev: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    ids: np.ndarray,
    qids: np.ndarray,
    term_whole: np.ndarray,
    term_part: np.ndarray,
    table: np.ndarray,
    whole: np.ndarray,
    part: np.ndarray,
) -> None:
    """Mark in whole and part (bool, ordinals x words, zeroed) the words each ordinal's row, or the row at prev
    beside it (one per ordinal, or none at all; -1: none), holds."""

def word_coverage(
    ords: np.ndarray,
    prev: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    ids: np.ndarray,
    qids: np.ndarray,
    term_whole: np.ndarray,
    term_part: np.ndarray,
    table: np.ndarray,
    weights: np.ndarray,
    out: np.ndarray,
) -> None:
    """Write into out (float64, one per ordinal) the weights of the words each ordinal's row, or the row at prev
    beside it, holds whole plus half those it holds only in part, over all the weights, each sum word after word."""

def context_candidates(
    found: np.ndarray,
    live: np.ndarray,
    mask: np.ndarray | None,
    follow: bool,
    cands: np.ndarray,
    has_prev: np.ndarray,
) -> int:
    """Write into cands the hits at the ordinals found (-1: none) and, with follow, each usable ordinal just after
    a hit, ascending and each once, and into has_prev whether the one before each is usable; return how many."""

def build_postings(
    starts: np.ndarray,
    lengths: np.ndarray,
    ids: np.ndarray,
    tfs: np.ndarray,
    post_starts: np.ndarray,
    post_ords: np.ndarray,
    post_tfs: np.ndarray,
) -> None:
    """Invert the term counts' rows into per-term postings (ascending ordinals) and their counts."""

def postings_scores(
    post_starts: np.ndarray,
    post_ords: np.ndarray,
    post_tfs: np.ndarray,
    doc_lengths: np.ndarray,
    tids: np.ndarray,
    kinds: np.ndarray,
    groups: np.ndarray,
    weights: np.ndarray,
    idf: np.ndarray,
    k1: float,
    b: float,
    average: float,
    stale: np.ndarray | None,
    allowed: np.ndarray | None,
    acc: np.ndarray,
    mark: np.ndarray,
    touched: np.ndarray,
    values: np.ndarray,
) -> int:
    """Score every document holding a query term over the postings; write ordinals and scores, return how many."""

def ascii_spans(
    text: str,
    wanted: set[str],
    probes: tuple[str, ...],
    cache: Mapping[str, object],
    analyze: Callable[[str], object],
    stem: Callable[[str], str],
    stopwords: Collection[str],
) -> list[tuple[int, int, str]]:
    """The (start, end, term) spans, in order, of the ASCII text's tokens whose term is wanted."""

def fuse(
    vec_ords: np.ndarray,
    vec_sims: np.ndarray,
    vec_bm25: np.ndarray,
    kw_ords: np.ndarray,
    kw_bm25: np.ndarray,
    query: np.ndarray,
    vectors: np.ndarray,
    inv_norms: np.ndarray,
    live: np.ndarray,
    method: int,
    alpha: float,
    rrf_k: int,
    out_ords: np.ndarray,
    out_fused: np.ndarray,
    out_sims: np.ndarray,
    out_bm25: np.ndarray,
    out_has_sim: np.ndarray,
) -> int:
    """Union both stages' candidates, fuse them (0: convex z-scores, 1: RRF) and write the best; return how many."""

def combine_scores(
    parts: np.ndarray,
    plain: np.ndarray,
    stems: np.ndarray,
    exacts: np.ndarray,
    part_cols: np.ndarray,
    part_weight: float,
    out: np.ndarray,
) -> None:
    """Add up each row's BM25 parts into out (float32) as keyword._score's numpy sums did."""

def word_sums(parts: np.ndarray, counts: np.ndarray, cols: np.ndarray, part_weight: float, out: np.ndarray) -> None:
    """combine_scores for every word at once: word j's columns are the next counts[j] (plain, stems, exacts,
    parts) of cols, its sums column j of out (float32, rows x words), bit for bit."""

def select_top(ords: np.ndarray, values: np.ndarray, k: int, margin: float) -> int:
    """Move to the front of ords, in order, those within margin of the k-th largest value; return how many."""

def postings_bounds(
    post_starts: np.ndarray,
    post_ords: np.ndarray,
    post_tfs: np.ndarray,
    doc_lengths: np.ndarray,
    k1: float,
    b: float,
    average: float,
    max_part: np.ndarray,
) -> None:
    """Per term of the postings, its holders' largest tf / (tf + norm) at that average (MaxScore's bounds)."""

def postings_top(
    post_starts: np.ndarray,
    post_ords: np.ndarray,
    post_tfs: np.ndarray,
    doc_lengths: np.ndarray,
    max_part: np.ndarray,
    bound_average: float,
    tids: np.ndarray,
    kinds: np.ndarray,
    groups: np.ndarray,
    weights: np.ndarray,
    idf: np.ndarray | None,
    k1: float,
    b: float,
    average: float,
    stale: np.ndarray | None,
    allowed: np.ndarray | None,
    k: int,
    margin: float,
    acc: np.ndarray,
    mark: np.ndarray,
    touched: np.ndarray,
    values: np.ndarray,
    post_lengths: np.ndarray | None = None,
    covered_by: np.ndarray | None = None,
    df: np.ndarray | None = None,
    live: float = 0.0,
) -> tuple[int, int, int]:
    """postings_scores pruned for a top k (MaxScore), each entry's length read beside it when given; return
    how many were written, the entries not read, and the entries of exact forms left out as covered_by
    (per term, the stem known to cover it, learnt by the pass) says. idf None: from df over live."""

def rank_top(ords: np.ndarray, sims: np.ndarray, out_ords: np.ndarray, out_sims: np.ndarray) -> int:
    """Write the best len(out_ords) of the ascending ordinals by cosine (ties: the lower ordinal); return how many."""

def hybrid_rest(
    vector: tuple[object, ...],
    counts: tuple[object, ...],
    sums: tuple[object, ...],
    keyword: tuple[np.ndarray, np.ndarray],
    fusion: tuple[object, ...],
    out: tuple[np.ndarray, ...],
) -> int:
    """A started hybrid search's rest in one call (the vector side, its candidates' BM25, the fusion); return how many were written."""

def ascii_explain(
    text: str,
    wanted: set[str],
    probes: tuple[str, ...],
    cache: Mapping[str, object],
    analyze: Callable[[str], object],
    stem: Callable[[str], str],
    stopwords: Collection[str],
    stem_probes: tuple[str, ...],
    exact_terms: tuple[str, ...],
    stem_cache: dict[str, str],
    words: tuple[tuple[str, str | None, tuple[str, ...]], ...],
    others: Callable[[Sequence[str], str | None], tuple[AbstractSet[str], AbstractSet[str], AbstractSet[str]]],
    tags: Sequence[str],
    source: str | None,
    made: dict[Any, _M],
    match_type: Callable[..., _M],
    snippet_type: Callable[..., _S],
    max_chars: int,
) -> tuple[tuple[_M, ...], _S | None]:
    """An ASCII text's matched terms and its snippet (None when the best field is not the text)."""

def mostly_ascii_explain(
    text: str,
    wanted: set[str],
    probes: tuple[str, ...],
    cache: Mapping[str, object],
    analyze: Callable[[str], object],
    stem: Callable[[str], str],
    stopwords: Collection[str],
    stem_probes: tuple[str, ...],
    exact_terms: tuple[str, ...],
    stem_cache: dict[str, str],
    words: tuple[tuple[str, str | None, tuple[str, ...]], ...],
    others: Callable[[Sequence[str], str | None], tuple[AbstractSet[str], AbstractSet[str], AbstractSet[str]]],
    tags: Sequence[str],
    source: str | None,
    made: dict[Any, _M],
    match_type: Callable[..., _M],
    snippet_type: Callable[..., _S],
    max_chars: int,
    hits: Callable[[str], list[tuple[str, int, int]]],
    is_mark: Callable[[str], bool],
    few: int,
) -> tuple[tuple[_M, ...], _S | None] | None:
    """ascii_explain for a text with at most `few` space-free pieces of other characters (their tokens from
    hits), None when it has more."""

def match_terms(
    words: tuple[tuple[str, str | None, tuple[str, ...]], ...],
    in_text: set[str],
    others: Callable[[Sequence[str], str | None], tuple[AbstractSet[str], AbstractSet[str], AbstractSet[str]]],
    tags: Sequence[str],
    source: str | None,
    made: dict[Any, _M],
    match_type: Callable[..., _M],
) -> tuple[_M, ...]:
    """A text's matched terms from the wanted terms found in it (any script), as explain's match_terms."""

def snippet_bounds(body: str, spans: list[tuple[int, int, str]], max_chars: int) -> tuple[int, int]:
    """The snippet window (start, end) of an ASCII body around its spans, as explain chooses it."""

def cosines(
    query: np.ndarray,
    vectors: np.ndarray,
    inv_norms: np.ndarray,
    ords: np.ndarray,
    out: np.ndarray,
) -> None:
    """Write into out (float32) the cosine of the unit query (float64) with each ordinal's vector, summed in float64."""

def self_dots(vectors: np.ndarray, out: np.ndarray) -> None:
    """Write into out (float64) the squared norm of each float16 row, summed in float64."""

def use_portable(flag: bool) -> None:
    """Run every kernel's plain C loop (True) or the fastest the CPU runs (False, the default)."""

def use_avx512(flag: bool) -> None:
    """Let the coarse scan run its AVX-512 VPOPCNTDQ loop where the CPU has it (True, the default) or the next below it (False)."""

def use_avx2(flag: bool) -> None:
    """Let the coarse scan run a vector loop where the CPU has one (True, the default) or its popcnt loop (False)."""

def loops() -> dict[str, str]:
    """Name the loop each kernel runs now: {"scan": ..., "dot": ...}."""
