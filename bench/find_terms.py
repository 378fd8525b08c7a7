"""The cost of finding a query's terms in the short texts of its hits, as explanations do per search.

On a synthetic space of --n memories (bench/synth.py, from SciFact) and --queries queries, each
query's wanted terms are built as a search builds them (query_words, searchable_words, the
Explainer's exact forms, "~stems" and identifier parts), and its 10 hits are taken two ways:
the 10 nearest texts by vector (exact cosine; many hold no query term) and the 10 texts holding
the most distinct wanted terms (every one holds some). For each, thread CPU ms per 10 texts
(one query's hits), median and min over --rounds rounds, the median of the rounds' ratios to
the old scan, and the 90th percentile and worst of the queries' ratios to it (each query's time
summed over the rounds); within a round the variants take turns by blocks of 20 queries, in
alternating order:
  - old: the one pass over every chunk that short texts took before TermFinder (the library's
    _find_by_scan, called directly);
  - find_terms(text, wanted), no finder: the same scan in the library (a control for noise);
  - find_terms(text, wanted, finder), one TermFinder per query, as Explainer does: probes and
    pieces are shared by the query's texts, and short texts are probed unless a probe is a
    single letter or the text has many non-ASCII characters;
  - the same, but probing short texts even when a probe is a single letter (what the rule saves
    shows in the queries' ratios);
  - the idea tried first, not adopted: split each text with a capturing twin of its chunk
    pattern, classify only the distinct chunks new to the query (a memo per query), return at
    once when no chunk holds a wanted term, else place the positive chunks by the parts' lengths.
Every variant's spans are checked equal on every hit first.

    python bench/find_terms.py [--n 3000] [--queries 200] [--rounds 15] [--scifact DIR]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path

import numpy as np
import regex

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from synth import make_queries, make_space  # noqa: E402

from engram_index.engine import analyzer, termfind  # noqa: E402
from engram_index.engine.analyzer import query_words, term_set  # noqa: E402
from engram_index.engine.termfind import TermFinder, find_terms  # noqa: E402
from engram_index.engine.explain import Explainer  # noqa: E402
from engram_index.engine.keyword import searchable_words  # noqa: E402

Spans = list[tuple[int, int, str]]
# One query's work: its wanted terms and its hits' texts.
Task = tuple[set[str], list[str]]
Pattern = regex.Pattern[str] | re.Pattern[str]
BLOCK = 20  # queries timed together


def run_old(tasks: list[Task]) -> list[Spans]:
    """Find every task's terms by the scan short texts took before TermFinder (the library's, called directly)."""
    return [termfind._find_by_scan(text, wanted) for wanted, texts in tasks for text in texts]


def run_plain(tasks: list[Task]) -> list[Spans]:
    """Find every task's terms with find_terms and no finder: the library's scan, a control."""
    return [find_terms(text, wanted) for wanted, texts in tasks for text in texts]


def run_finder(tasks: list[Task]) -> list[Spans]:
    """Find every task's terms with find_terms and one finder per query, as Explainer does."""
    out: list[Spans] = []
    for wanted, texts in tasks:
        finder = TermFinder(wanted)
        out += [find_terms(text, wanted, finder) for text in texts]
    return out


def capturing(pattern: Pattern) -> Pattern:
    """The same chunk pattern as one capturing group, so that split() alternates between-text and chunks."""
    source = pattern.pattern
    flag = "(?V1)" if source.startswith("(?V1)") else ""  # an inline flag must stay first
    if isinstance(pattern, regex.Pattern):
        return regex.compile(f"{flag}({source[len(flag):]})")
    return re.compile(f"({source})")


SPLITTERS = {p: capturing(p) for p in (analyzer._ASCII_CHUNK_RE, analyzer._UNICODE_CHUNK_RE, analyzer._CHUNK_RE)}


class ChunkMemo:
    """The chunks one query has classified, and the wanted spans of those holding a wanted term."""

    def __init__(self, wanted: set[str]) -> None:
        """Start with no chunk classified."""
        self.wanted = wanted
        self.seen: set[str] = set()
        self.found: dict[str, tuple[tuple[int, int, str], ...]] = {}


def split_find_terms(text: str, memo: ChunkMemo) -> Spans:
    """The idea tried first: split into chunks, classify each chunk new to the query, place the positive ones."""
    parts = SPLITTERS[analyzer._chunker(text)].split(text)
    chunks = parts[1::2]
    distinct = set(chunks)
    new = distinct.difference(memo.seen)
    get = analyzer._chunk_cache.get
    for chunk in new:
        terms, meta = get(chunk) or analyzer._analysis(chunk)
        if not memo.wanted.isdisjoint(terms):
            memo.found[chunk] = tuple((s, e, t) for t, (_, s, e) in zip(terms, meta) if t in memo.wanted)
    memo.seen.update(new)
    out: Spans = []
    if memo.found.keys().isdisjoint(distinct):
        return out
    starts = list(accumulate(map(len, parts), initial=0))
    for k, chunk in enumerate(chunks):
        spans = memo.found.get(chunk)
        if spans is not None:
            base = starts[2 * k + 1]
            out.extend((base + s, base + e, t) for s, e, t in spans)
    return out


def run_split(tasks: list[Task]) -> list[Spans]:
    """Find every task's terms by splitting, with one chunk memo per query."""
    out: list[Spans] = []
    for wanted, texts in tasks:
        memo = ChunkMemo(wanted)
        out += [split_find_terms(text, memo) for text in texts]
    return out


def run_finder_always(tasks: list[Task]) -> list[Spans]:
    """As run_finder, but probing short texts even when a probe is a single letter."""
    out: list[Spans] = []
    for wanted, texts in tasks:
        finder = TermFinder(wanted)
        finder.probe_short_texts = True
        out += [find_terms(text, wanted, finder) for text in texts]
    return out


OLD = "old: scan"
VARIANTS: dict[str, Callable[[list[Task]], list[Spans]]] = {
    OLD: run_old,
    "no finder (scan)": run_plain,
    "a finder per query": run_finder,
    "same, 1-letter probes too": run_finder_always,
    "split, chunk memo per query": run_split,
}


def hit_sets(n: int, queries: int, scifact: Path) -> dict[str, list[Task]]:
    """Each query's wanted terms with its 10 nearest texts, and with its 10 texts richest in its terms."""
    space = make_space(n, scifact_dir=scifact, seed=1)
    texts, vectors = make_queries(space, queries, seed=2)
    sims = vectors.astype(np.float32) @ space.vectors.astype(np.float32).T
    nearest = np.argsort(-sims, axis=1, kind="stable")[:, :10]
    held = [term_set(text) for text in space.texts]
    by_vector: list[Task] = []
    by_terms: list[Task] = []
    for q, row in zip(texts, nearest.tolist()):
        wanted = Explainer(searchable_words(query_words(q))).wanted
        by_vector.append((wanted, [space.texts[i] for i in row]))
        richest = sorted(range(n), key=lambda i: -len(held[i] & wanted))[:10]
        by_terms.append((wanted, [space.texts[i] for i in richest]))
    return {"10 nearest by vector": by_vector, "10 richest in query terms": by_terms}


def main() -> None:
    """Check the variants agree, then time them, alternating, and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="memories in the synthetic space")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    sets = hit_sets(args.n, args.queries, args.scifact)
    for label, tasks in sets.items():
        lengths = [len(text) for _, texts in tasks for text in texts]
        assert max(lengths) <= termfind._SCAN_CHARS, "every hit must take the short-text path"
        for text in (text for _, texts in tasks for text in texts):
            parts = SPLITTERS[analyzer._chunker(text)].split(text)
            assert "".join(parts) == text and parts[1::2] == analyzer._chunker(text).findall(text)
        results = {name: run(tasks) for name, run in VARIANTS.items()}  # also warms the caches
        assert all(got == results[OLD] for got in results.values()), label
        holding = sum(bool(spans) for spans in results[OLD])
        print(f"{label}: {len(lengths)} texts, median {statistics.median(lengths):.0f} chars, {holding} hold a wanted term")

    names = list(VARIANTS)
    samples: dict[tuple[str, str], list[float]] = {(label, name): [] for label in sets for name in names}
    # Each query's thread CPU seconds over all rounds, per hit set and variant.
    per_query = {(label, name): [0.0] * len(sets[label]) for label in sets for name in names}
    for round_ in range(args.rounds):
        for label, tasks in sets.items():
            spent = dict.fromkeys(names, 0.0)
            # Interleave the variants by blocks of queries, alternating their order, so that a
            # change in the machine's load falls on every variant alike.
            for block, first in enumerate(range(0, len(tasks), BLOCK)):
                for name in names if (round_ + block) % 2 == 0 else names[::-1]:
                    run, totals = VARIANTS[name], per_query[label, name]
                    for i in range(first, min(first + BLOCK, len(tasks))):
                        began = time.thread_time()
                        run(tasks[i : i + 1])
                        took = time.thread_time() - began
                        totals[i] += took
                        spent[name] += took
            for name in names:
                samples[label, name].append(spent[name] / len(tasks) * 1000)

    print(f"\nthread CPU ms per 10 texts (one query's hits), median (min) of {args.rounds} rounds; the median")
    print("of the rounds' ratios to the old scan; and per query, its time over all rounds against the old")
    print("scan's: the 90th percentile and the worst ratio")
    for label in sets:
        print(f"  {label}")
        old, old_queries = samples[label, OLD], per_query[label, OLD]
        for name in names:
            values = samples[label, name]
            line = f"    {name:28s}{statistics.median(values):8.3f}  ({min(values):.3f})"
            if name != OLD:
                ratio = statistics.median(v / o for v, o in zip(values, old))
                queries = sorted(v / o for v, o in zip(per_query[label, name], old_queries))
                line += f"  {ratio - 1:+4.0%}   {queries[int(0.9 * len(queries))]:.2f}  {queries[-1]:.2f}"
            print(line)

if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
