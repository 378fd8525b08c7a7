"""Where one in-process hybrid search's CPU goes, stage by stage, on a synthetic space (no HTTP).

Builds (or reuses, --data) the synthetic space bench/peers.py loads for engram-index (its adapter,
the service's write path, then the keyword compaction), and runs the same hybrid top-10 searches
as bench/peers.py, with and without explanations, several rounds (`--tag`: each filtered by the
space's commonest tag, as its "+ tag" column). Prints the CPU model, the median
wall-clock and thread-CPU ms per search, and per stage the mean thread-CPU ms a search (the vector
stage, the keyword stage, the fusion, the fetch of the results, the explanations, the query's
analysis; "rest" is the search's own glue). `--src` imports the package from another checkout's
`src` (its C module built in place: `python setup.py build_ext --inplace` there) instead of the
installed one, to compare two revisions of the engine on the same space.

    python bench/profile_hybrid.py --n 100000 --data DIR [--rounds 3] [--src OTHER/src] [--tag]

`--answers FILE` also writes every hit of 2,400 searches (both fusions, with and without a tag
filter and explanations) to FILE as JSON, or, when FILE exists, compares them with it and says
how many searches answer differently: two revisions must give the same answers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from synthetic_space import open_space, options  # noqa: I001 (first: the --src switch)

from engram_index.engine import search as engine_search
from engram_index.engine.types import Filters, SearchRequest

spent: dict[str, float] = {}


def timed(owner: Any, name: str, label: str) -> None:
    """Add the thread CPU time of every call of owner.name to spent[label] (when owner has it)."""
    original: Callable[..., Any] | None = getattr(owner, name, None)
    if original is None:
        return
    call = original

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time()
        try:
            return call(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.thread_time() - began
    setattr(owner, name, wrapper)


def main() -> None:
    """Load or reuse the space, then time the searches."""
    parser = options(__doc__)
    parser.add_argument("--answers", type=Path, help="write the searches' answers here, or compare with them")
    parser.add_argument("--tag", action="store_true", help="filter every search by the space's commonest tag "
                        "(bench/peers.py's '+ tag' column)")
    args = parser.parse_args()
    work, spaces, index = open_space(args)
    filters = Filters(tags=(work.tag,)) if args.tag else Filters()

    def requests(explain: bool) -> list[SearchRequest]:
        """The hybrid top-10 searches bench/peers.py sends."""
        return [SearchRequest(mode="hybrid", q=text, vector=vector, limit=10, explain=explain, filters=filters)
                for text, vector in zip(work.query_texts, work.query_vectors)]

    for req in requests(True):  # warm: the analyzer's caches, the postings, the pages
        index.search(req)
    if args.answers is not None:
        answers(index, work, args.answers)
    timed(index.keyword, "exact_top_and_score", "keyword")
    timed(index.vectors, "search", "vector")
    timed(index.vectors, "fuse", "fusion")
    timed(index, "fetch", "fetch")
    timed(index, "_explain", "explain")
    timed(engine_search, "query_words", "query analysis")
    for round_ in range(1, args.rounds + 1):
        for explain in (True, False):
            spent.clear()
            walls, cpus = [], []
            for req in requests(explain):
                wall, cpu = time.perf_counter(), time.thread_time()
                index.search(req)
                cpus.append(time.thread_time() - cpu)
                walls.append(time.perf_counter() - wall)
            count = len(walls)
            parts = " ".join(f"{label} {total / count * 1000:.3f}" for label, total in spent.items())
            rest = (sum(cpus) - sum(spent.values())) / count * 1000
            print(f"round {round_}, {'explanations' if explain else 'no explanations':15}: p50 "
                  f"{np.median(walls) * 1000:.3f} ms, CPU p50 {np.median(cpus) * 1000:.3f} ms; mean CPU ms: "
                  f"{parts} rest {rest:.3f}")
    spaces.close()


def answers(index: Any, work: Any, path: Path) -> None:
    """Write every hit of the searches to path (JSON), or compare them with the ones written there."""
    found = []
    for fusion in ("convex", "rrf"):
        for tag in (None, work.tag):
            for explain in (True, False):
                for text, vector in zip(work.query_texts, work.query_vectors):
                    req = SearchRequest(mode="hybrid", q=text, vector=vector, limit=10, explain=explain,
                                        fusion=fusion, filters=Filters(tags=(tag,)) if tag else Filters())
                    found.append([[h.document.id, h.score, h.similarity, h.bm25, h.vector_rank, h.keyword_rank,
                                   h.fusion, [[t.term, t.kind, t.field] for t in h.terms],
                                   None if h.snippet is None else [h.snippet.field, h.snippet.text,
                                                                  [list(r) for r in h.snippet.highlights]]]
                                  for h in index.search(req).hits])
    if not path.exists():
        path.write_text(json.dumps(found))
        print(f"answers of {len(found)} searches written to {path}")
        return
    before = json.loads(path.read_text())
    different = sum(a != b for a, b in zip(before, json.loads(json.dumps(found))))
    print(f"answers compared with {path}: {len(found)} searches, {different} answer differently"
          + ("" if len(before) == len(found) else f" (it holds {len(before)})"))


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
