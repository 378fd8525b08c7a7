"""What `KeywordIndex.holds` costs a v5 search's collection, against the twelfth pass's array formula.

Opens namespace `scale` of a bench/v5.py data directory (read only) and, for each SciFact query,
draws as many candidates as a search's take meets (random ordinals of the collection, most with
the turn before them beside) and times, alternated query by query, `KeywordIndex.holds(words,
ords, prev)` (one compiled pass, `_kernels.word_presence`) and the formula it replaced: the rows'
BM25 parts above zero, multiplied by which words each term holds, the turns before concatenated
and OR-ed in after. It checks that both give the same booleans, and times the making of a query's
`HeldColumns` both ways (from the words' roles as lists, and from `WordColumns`' arrays as before).
Medians in µs, one line per collection.

    python bench/holds.py --data DIR [--queries 300] [--candidates 120]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

from machine import print_machine  # noqa: E402

from engram_index.collections import Collections  # noqa: E402
from engram_index.engine import keyword_query  # noqa: E402
from engram_index.engine.analyzer import QueryWord, query_words  # noqa: E402
from engram_index.engine.search import SpaceIndex  # noqa: E402
from engram_index.ranking import content_query, content_words  # noqa: E402
from engram_index.supermemory.tables import chunks_collection, memories_collection  # noqa: E402


def former_held(words: Sequence[QueryWord]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """The twelfth pass's HeldColumns: float32 0/1 matrices (terms x words) from WordColumns' arrays."""
    roles = keyword_query.WordColumns(words)
    whole = np.zeros((len(roles.terms), len(words)), np.float32)
    part = np.zeros((len(roles.terms), len(words)), np.float32)
    for j, (plain, stems, exacts, parts) in enumerate(roles.columns):
        whole[plain, j] = whole[stems, j] = whole[exacts, j] = 1.0
        part[parts, j] = 1.0
    return roles.terms, whole, part


def former_holds(index: SpaceIndex, held: tuple[tuple[str, ...], np.ndarray, np.ndarray], ords: np.ndarray,
                 prev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What a candidate and the turn before it hold, as the twelfth pass worked it out."""
    terms, term_whole, term_part = held
    both = np.concatenate([ords, prev])
    known = both >= 0
    whole = np.zeros((both.size, term_whole.shape[1]), bool)
    part = np.zeros_like(whole)
    present = (index.keyword.counts.term_scores(terms, both[known]) > 0).astype(np.float32)
    whole[known] = present @ term_whole > 0
    part[known] = present @ term_part > 0
    n = ords.size
    return whole[:n] | whole[n:], part[:n] | part[n:]


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """fn(*args) and its wall µs."""
    began = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - began) * 1e6, out


def main() -> None:
    """Time both ways for each collection and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--candidates", type=int, default=120, help="a take's candidates in one collection")
    shared = Path(os.environ.get("ENGRAM_SHARED", _HERE.parents[1] / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    texts = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()][:args.queries]
    spaces = Collections(args.data, read_only=True, lock=False)
    rng = np.random.default_rng(0)
    print("| collection | holds now µs p50 | the array formula µs p50 | HeldColumns now µs p50 | as before µs p50 |")
    print("|---|---:|---:|---:|---:|")
    try:
        for name in (chunks_collection("scale"), memories_collection("scale")):
            index = spaces.index(name)
            size = index.vectors.size if index.vectors is not None else 0
            now: list[float] = []
            before: list[float] = []
            made: list[float] = []
            made_before: list[float] = []
            for k, text in enumerate(texts):
                words = content_words(query_words(content_query(text)), text)
                ords = np.sort(rng.choice(size, min(args.candidates, size), replace=False)).astype(np.int64)
                prev = np.where(rng.random(ords.size) < 0.8, ords - 1, -1)
                keyword_query._held_columns.clear()  # (each query made afresh, as a search meets its own)
                spent, _ = timed(keyword_query.held_columns_of, words)
                made.append(spent)
                spent, held = timed(former_held, words)
                made_before.append(spent)
                with index.reading():
                    ways: list[tuple[list[float], Callable[..., Any], tuple[Any, ...]]] = [
                            (now, index.keyword.holds, (words, ords, prev)),
                            (before, former_holds, (index, held, ords, prev))]
                    answers = []
                    for out, fn, fn_args in (ways if k % 2 else ways[::-1]):  # which goes first alternates
                        spent, answer = timed(fn, *fn_args)
                        out.append(spent)
                        answers.append(answer)
                    assert all((a == b).all() for a, b in zip(answers[0], answers[1])), "the two ways differ"
            med = statistics.median
            print(f"| {name} | {med(now):.1f} | {med(before):.1f} | {med(made):.1f} | {med(made_before):.1f} |")
    finally:
        spaces.close()


if __name__ == "__main__":
    print_machine()
    main()
