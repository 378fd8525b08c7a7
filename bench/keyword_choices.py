"""The measurements behind the keyword index's design choices, on one synthetic space.

For 200 SciFact claims (about 12 words each) against n synthetic memories, p50 of:
  - top-200 with each word as a disjunction-max of its alternatives (what we ran before), against
    plain sums of terms (which tantivy can prune with block-max WAND; ours: exact + stem + parts);
  - scoring 200 given candidates: tantivy's term-set query, a union of key terms, or our term
    counts (what hybrid search runs);
  - the top 200 and the candidates' scores together (what hybrid search runs);
  - a periodic save of the term counts: the copy taken while writes wait, and writing it;
  - all of the above with the segments that incremental commits leave, then after compaction.

    python bench/keyword_choices.py --n 100000
"""

from __future__ import annotations

import argparse
import sys
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tantivy

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from synth import keyword_collection, make_queries, make_space  # noqa: E402

from engram_index.engine.analyzer import query_words  # noqa: E402
from engram_index.engine.keyword import query_terms, searchable_words  # noqa: E402
from engram_index.collections import Collections  # noqa: E402

SPACE = "at://did:plc:kwbench/space/garden.engram.space/kw"


def p50(fn: Callable[[int], object], runs: int = 200, warmup: int = 20) -> float:
    """Median milliseconds of fn(i) over i in range(runs), after `warmup` warm-up calls."""
    for i in range(warmup):
        fn(i)
    samples = []
    for i in range(runs):
        began = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - began)
    return float(np.median(samples) * 1000)


def measure(spaces: Collections, words: list, candidates: list[list[int]]) -> dict[str, float]:
    """Every variant's p50 on the space's current keyword index."""
    kw = spaces.index(SPACE).keyword
    schema, term, Should = kw.schema, tantivy.Query.term_query, tantivy.Occur.Should
    Must, boost = tantivy.Occur.Must, tantivy.Query.boost_query

    def run(query: tantivy.Query, k: int = 200) -> object:
        return kw.index.searcher().search(query, k, count=False)

    def summed(pick: Callable) -> Callable[[int], object]:
        return lambda i: run(tantivy.Query.boolean_query(
            [(Should, term(schema, "body", t)) for w in words[i] for t in pick(w)]))

    def dismax(w: object) -> tantivy.Query:
        """A word as the best of its exact form, stem and parts (the shape we ran before)."""
        alternatives = [term(schema, "body", w.exact)] + ([boost(term(schema, "body", w.stem), 1.0)] if w.stem else [])
        parts = [p for p in dict.fromkeys(w.parts) if p != w.exact]
        if parts:
            alternatives.append(boost(tantivy.Query.boolean_query([(Should, term(schema, "body", p)) for p in parts]), 0.6))
        return tantivy.Query.disjunction_max_query(alternatives)

    def keys(i: int) -> tantivy.Query:
        return tantivy.Query.boolean_query([(Should, term(schema, "key", str(c))) for c in candidates[i]])

    def with_keys(i: int, key_query: tantivy.Query) -> object:
        return run(tantivy.Query.boolean_query([(Must, tantivy.Query.const_score_query(key_query, 0.0))]
                                               + [(Should, term(schema, "body", t)) for t in query_terms(words[i])]))

    frozen, scratch = kw.counts.frozen(), Path(tempfile.mkdtemp())
    row = {
        "segments": kw.segments(),
        "top-200 dismax per word (before)": p50(lambda i: run(tantivy.Query.boolean_query(
            [(Should, dismax(w)) for w in words[i]]))),
        "top-200 sum of stems": p50(summed(lambda w: [w.stem or w.exact])),
        "top-200 sum of exact + stem + parts (ours)": p50(summed(lambda w: query_terms([w]))),
        "score 200 candidates: tantivy term-set": p50(lambda i: with_keys(i, tantivy.Query.term_set_query(
            schema, "key", [str(c) for c in candidates[i]]))),
        "score 200 candidates: tantivy key union": p50(lambda i: with_keys(i, keys(i))),
        "score 200 candidates: term counts (ours)": p50(lambda i: kw.scores(words[i], candidates[i])),
        "top-200 + 200 candidates scored (ours)": p50(
            lambda i: kw.search_and_score(words[i], 200, None, candidates[i])),
        # A periodic save copies the counts while writes wait, then writes the copy while they go on.
        "term counts: copy for a save (writes wait)": p50(lambda i: kw.counts.frozen(), runs=5, warmup=1),
        "term counts: write the copy (writes go on)": p50(
            lambda i: frozen.write(scratch / "counts", 1), runs=5, warmup=1),
    }
    shutil.rmtree(scratch)
    return row


def main() -> None:
    """Build the space through the real write path, measure, compact, measure again."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    synth = make_space(args.n, scifact_dir=args.scifact, seed=1)
    texts, _ = make_queries(synth, 200, seed=2)
    words = [searchable_words(query_words(t)) for t in texts]
    rng = np.random.default_rng(0)
    candidates = [rng.choice(args.n, 200, replace=False).tolist() for _ in range(200)]
    with tempfile.TemporaryDirectory() as tmp:
        spaces = keyword_collection(Path(tmp), SPACE, synth, args.n)
        before = measure(spaces, words, candidates)
        spaces.maintain()
        after = measure(spaces, words, candidates)
        spaces.close()
    print(f"keyword index, {args.n:,} memories, 200 SciFact claims, p50 ms")
    print(f"{'':42}{'as written':>12}{'compacted':>12}")
    for key in before:
        fmt = "{:>12.0f}" if key == "segments" else "{:>12.2f}"
        print(f"{key:42}" + fmt.format(before[key]) + fmt.format(after[key]))


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
