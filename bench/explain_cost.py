"""What explaining one hybrid search's hits costs, the explainer alone, on a synthetic space.

Opens (or builds, --data) the synthetic space bench/peers.py loads for engram-index, runs its 300
hybrid top-10 searches once to capture each one's hits, then explains those hits again as a search
does (a new Explainer per search), several rounds. Prints the CPU model and the thread-CPU ms a
search: the whole explanation, and its parts (finding the terms in the text, the matched terms,
the snippet). `--src` imports the package from another checkout's `src` (its C module built in
place), so that two revisions compare on the same hits.

    python bench/explain_cost.py --n 10000 --data DIR [--rounds 3] [--src OTHER/src]
"""

from __future__ import annotations

import time
from typing import Any

from synthetic_space import open_space, options  # noqa: I001 (first: the --src switch)

from engram_index.engine.explain import Explainer, snippet
from engram_index.engine.keyword_query import searchable_words
from engram_index.engine.termfind import find_terms
from engram_index.engine.types import SearchRequest


def main() -> None:
    """Capture the searches' hits, then time their explanations."""
    args = options(__doc__).parse_args()
    work, spaces, index = open_space(args)
    captured: list[tuple[list[Any], Any]] = []
    explain = index._explain

    def capture(hits: list[Any], words: Any) -> None:
        """Keep each search's hits and words, then explain them as usual."""
        captured.append(([h.document for h in hits], words))
        explain(hits, words)

    requests = [SearchRequest(mode="hybrid", q=text, vector=vector, limit=10, explain=True)
                for text, vector in zip(work.query_texts, work.query_vectors)]
    for req in requests:  # warm: the analyzer's caches, the pages
        index.search(req)
    index._explain = capture
    for req in requests:
        index.search(req)
    index._explain = explain
    searches = len(captured)
    for round_ in range(1, args.rounds + 1):
        began = time.thread_time()
        for docs, words in captured:
            explainer = Explainer(searchable_words(words))
            for doc in docs:
                explainer.explain(doc.text, doc.tags, doc.source)
        whole = (time.thread_time() - began) / searches * 1000
        parts = {"find": 0.0, "match": 0.0, "snippet": 0.0}
        for docs, words in captured:
            explainer = Explainer(searchable_words(words))
            for doc in docs:
                t0 = time.thread_time()
                spans = find_terms(doc.text, explainer.wanted, explainer.finder)
                t1 = time.thread_time()
                matches = explainer.match_terms(doc.text, doc.tags, doc.source, {t for _, _, t in spans})
                t2 = time.thread_time()
                snippet(doc.text, doc.tags, doc.source, matches, explainer.words, text_spans=spans)
                t3 = time.thread_time()
                parts["find"] += t1 - t0
                parts["match"] += t2 - t1
                parts["snippet"] += t3 - t2
        split = ", ".join(f"{k} {v / searches * 1000:.3f}" for k, v in parts.items())
        print(f"round {round_}: explanations {whole:.3f} ms a search (thread CPU); parts: {split}")
    spaces.close()


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
