"""The coarse vector scan and the keyword postings pass: this tree's kernels against another checkout's, in one process.

Loads the synthetic space bench/peers.py loads for engram-index (--data: built when missing), and
the other checkout's compiled `_kernels` beside this tree's (build it in place there first:
`python setup.py build_ext --inplace`). Then, query by query, alternating which goes first, each
kernel runs on the same inputs, with the caches flushed by a pass over 32 MB before each call, as a
search's other stages flush them: `nearest` (the hybrid's 1,032-row cut, unfiltered and under the
commonest tag) and `postings_top` (the keyword top 200), then whole hybrid searches with explanations
(limit 10), each run once on this tree's kernels and once on the other's: every engine module's
reference to `_kernels` is pointed at one or the other (their Python is this tree's; the two
modules must take the same arguments). The other checkout's `postings_top` gets
every query column with its idf, as its `TermCounts.matches` gave them; this tree's gets what its
`matches` now gives (the kernel works out the idf and leaves out the exact forms the postings know
their stems cover: engine/postings.py), learnt by one pass of every query first. The columns are
made before the timed calls: what the two trees' `matches` do around the kernel is not timed here
(bench/profile_hybrid.py times whole searches). Prints the CPU model and each kernel's median µs a call.

    python bench/ab_kernels.py --n 100000 --data DIR --other OTHER/src
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from synthetic_space import open_space, options  # noqa: I001 (first: the --src switch)

from engram_index.engine import _kernels, keyword_query
from engram_index.engine.analyzer import query_words
from engram_index.engine.termcounts import B, K1
from engram_index.engine.types import Filters, SearchRequest

MARGIN = 1e-6  # the keyword pass's (engine/keyword.py _EXACT_MARGIN)


def other_kernels(src: Path) -> Any:
    """The other checkout's compiled kernels, loaded as a module of their own."""
    built = sorted((src / "engram_index" / "engine").glob("_kernels.*.so"))
    if not built:
        raise SystemExit(f"no compiled _kernels under {src}: build it in place there first")
    spec = importlib.util.spec_from_file_location("engram_index.engine._kernels", built[0])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    """Load the space and both kernels, then time them call by call."""
    parser = options(__doc__)
    parser.add_argument("--other", type=Path, required=True, help="the other checkout's src")
    args = parser.parse_args()
    work, spaces, index = open_space(args)
    other = other_kernels(args.other)
    vectors, counts = index.vectors, index.keyword.counts
    size = vectors._size
    mask = index.columns.mask(Filters(tags=(work.tag,)))
    excluded = vectors.plan(200, mask, 1032).excluded
    queries = [vectors.prepare(np.asarray(v, np.float64)) for v in work.query_vectors]
    plans = [keyword_query.prepared(query_words(text)).plan for text in work.query_texts]
    for plan in plans:
        counts.matches(plan, None, 200, MARGIN)  # what the postings learn from one pass
    postings, _, stale = counts.inverted()
    acc, mark = counts._scratch()
    touched, values = np.empty(acc.size, np.int64), np.empty(acc.size)
    flush = np.random.default_rng(0).random(4_000_000)

    def columns(plan: Any, now: bool) -> tuple[Any, ...]:
        """The plan's term ids, kinds, groups, weights and idf, as this tree's matches (now: idf left to the
        kernel) or the other's gives them."""
        tids = np.array([counts._vocab.get(term, -1) for term, _, _, _ in plan.columns], np.int64)
        if now:
            return tids, plan.kinds, plan.groups, plan.weights, None
        idf = np.ones(tids.size)
        idf[tids >= 0] = counts._idf(tids[tids >= 0])
        return tids, plan.kinds, plan.groups, plan.weights, idf

    def keyword(module: Any, cols: tuple[Any, ...], allowed: np.ndarray | None, now: bool) -> None:
        extra = (postings.covered_by, counts._df, float(counts._live)) if now else ()
        module.postings_top(postings.starts, postings.ords, postings.tfs, counts._doc_lengths, postings.max_part,
                            postings.average, *cols, K1, B, counts._tokens / counts._live, stale, allowed, 200,
                            MARGIN, acc, mark, touched, values, postings.lengths, *extra)

    def scan(module: Any, i: int, cut: np.ndarray | None) -> None:
        module.nearest(queries[i].code, vectors._codes[:size], cut, np.empty(1032, np.int64))

    # Every module of the package that calls the kernels, so that a whole search can run on either.
    users = [m for name, m in list(sys.modules.items())
             if name.startswith("engram_index") and getattr(m, "_kernels", None) is _kernels]
    requests = [SearchRequest(mode="hybrid", q=text, vector=np.asarray(vector, np.float32), limit=10, explain=True)
                for text, vector in zip(work.query_texts, work.query_vectors)]

    def search(module: Any, i: int) -> None:
        for user in users:
            user._kernels = module
        try:
            index.search(requests[i])
        finally:
            for user in users:
                user._kernels = _kernels

    old_cols = [columns(plan, False) for plan in plans]
    new_cols = [columns(plan, True) for plan in plans]
    cases = [
        ("nearest, unfiltered", lambda m, i, now: scan(m, i, None)),
        ("nearest, commonest tag", lambda m, i, now: scan(m, i, excluded)),
        ("postings_top, unfiltered", lambda m, i, now: keyword(m, (new_cols if now else old_cols)[i], None, now)),
        ("postings_top, commonest tag", lambda m, i, now: keyword(m, (new_cols if now else old_cols)[i], mask, now)),
        ("hybrid search, explanations", lambda m, i, now: search(m, i)),
    ]
    print(f"{'kernel':30} {'other µs':>9} {'this µs':>9} {'ratio':>6}")
    for name, call in cases:
        spent: dict[bool, list[float]] = {False: [], True: []}
        for round_ in range(args.rounds):
            for i in range(len(queries)):
                for now in ((False, True) if (round_ + i) % 2 == 0 else (True, False)):
                    flush[::16].sum()
                    began = time.perf_counter()
                    call(_kernels if now else other, i, now)
                    spent[now].append(time.perf_counter() - began)
        before, after = (float(np.median(spent[now])) * 1e6 for now in (False, True))
        print(f"{name:30} {before:9.1f} {after:9.1f} {after / before:6.3f}")
    spaces.close()


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
