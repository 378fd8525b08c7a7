"""A v5 search of a namespace where most memories expired: before a sweep tags them, and after.

Fills two namespaces of a data directory (`--data DIR`, filled on first use and reused) with the same
`--docs` SciFact abstracts through the face's own pipeline (the int8 MiniLM face embedder), all but
one in `--live` of them with a `forgetAfter` in the past, so that their memories are expired. Then
sweeps one namespace (supermemory/expiry.py tags its expired memories in the index) and not the
other, and asks both, alternately query by query, `--queries` SciFact claims in hybrid mode (limit
10, threshold 0.3, in process: `search.search`, the route's call): the unswept namespace's search
reads the id of every expired memory and asks the engine for that many more candidates, which is
what every search paid before the sweep existed. Prints how long the sweep took; the CPU (of the
whole process: the search runs on more than one thread) and wall p50 of each namespace's searches,
and how many ids each read; and to how many of the claims the swept namespace gave the same results
before its sweep and after (it asks the engine for fewer candidates after: see
docs/design/supermemory.md, *Expiry*), and after it when asked for as many candidates as before.

    python bench/v5_expired.py --data DIR [--docs 1500] [--live 5] [--queries 300] [--src CHECKOUT]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))

from in_process import parsed  # noqa: E402

UNSWEPT, SWEPT = "unswept", "swept"
PAST = "2000-01-01T00:00:00Z"


def _body(claim: str) -> dict[str, Any]:
    """A hybrid search of a claim, limit 10, threshold 0.3."""
    return {"query": claim, "searchMode": "hybrid", "limit": 10, "threshold": 0.3}


def _answer(out: dict[str, Any]) -> list[tuple[str, float]]:
    """A search's results as (id, similarity)."""
    return [(r["id"], r["similarity"]) for r in out["results"]]


def main() -> None:
    """Fill, sweep one namespace, time both and print the table."""
    args = parsed(__doc__, docs=1500, live=5, queries=300, scifact=str(_HERE.parents[1] / "shared/data/scifact"))
    from engram_index.collections import Collections
    from engram_index.embed.local import MiniLMEmbedder
    from engram_index.keys import KeyStore
    from engram_index.supermemory import documents, expiry, search
    from engram_index.supermemory.face import Face, stamp
    from engram_index.supermemory.pipeline import Pipeline

    scifact = Path(args.scifact)
    corpus = [json.loads(line) for line in (scifact / "corpus.jsonl").open()][:args.docs]
    claims = [json.loads(line)["text"] for line in (scifact / "queries.jsonl").open()][:args.queries]
    collections = Collections(args.data)
    face = Face(collections, KeyStore(args.data), MiniLMEmbedder(int8=True))
    pipeline = Pipeline(face)
    face.on_queued = pipeline.submit
    pipeline.start()
    try:
        began = time.perf_counter()
        for ns in (UNSWEPT, SWEPT):
            have = face.store.query("SELECT count(*) FROM sm_documents WHERE ns=?", (ns,))[0][0]
            for i, doc in enumerate(corpus[have:], start=have):
                metadata = {} if i % args.live == 0 else {"forgetAfter": PAST}
                documents.add(face, ns, {"content": f"{doc['title']} {doc['text']}",
                                         "id": f"d{i}", "metadata": metadata}, None)
        while not pipeline.idle():
            time.sleep(0.2)
        print(f"filled in {time.perf_counter() - began:.0f} s", flush=True)
        real_sweep_later = expiry.sweep_later
        expiry.sweep_later = lambda face, ns: None  # until the sweep below: each namespace as it was filled
        before = [_answer(search.search(face, SWEPT, _body(claim), False, face.query_cache.vector(face.embedder, claim)))
                  for claim in claims]
        expiry.sweep_later = lambda face, ns: None if ns == UNSWEPT else real_sweep_later(face, ns)
        began = time.perf_counter()
        swept = expiry.sweep(face, SWEPT, stamp())
        print(f"the sweep tagged {swept:,} memories in {time.perf_counter() - began:.2f} s"
              f" ({expiry.SWEEP_BATCH} a transaction, the namespace's lock let go between them)", flush=True)
        held = {ns: face.store.query("SELECT count(*) FROM sm_memories WHERE ns=?", (ns,))[0][0]
                for ns in (UNSWEPT, SWEPT)}
        read = {ns: len(expiry.unswept(face, ns, stamp())) for ns in (UNSWEPT, SWEPT)}
        cpu: dict[str, list[float]] = {UNSWEPT: [], SWEPT: []}
        wall: dict[str, list[float]] = {UNSWEPT: [], SWEPT: []}
        after: list[list[tuple[str, float]]] = []
        for n, claim in enumerate(claims):
            for ns in ((UNSWEPT, SWEPT) if n % 2 else (SWEPT, UNSWEPT)):
                vector = face.query_cache.vector(face.embedder, claim)  # the same vector both sides, not timed
                t, w = time.process_time(), time.perf_counter()
                out = search.search(face, ns, _body(claim), False, vector)
                cpu[ns].append((time.process_time() - t) * 1000)
                wall[ns].append((time.perf_counter() - w) * 1000)
                if ns == SWEPT:
                    after.append(_answer(out))
        same = sum(a == b for a, b in zip(before, after))
        # The swept namespace asked as deep as before its sweep: ids that name no memory, as many as it read then.
        real_unswept = expiry.unswept
        expiry.unswept = lambda face, ns, at_ms: {f"none-{i}" for i in range(read[UNSWEPT])}
        deep = [_answer(search.search(face, SWEPT, _body(claim), False, face.query_cache.vector(face.embedder, claim)))
                for claim in claims]
        expiry.unswept = real_unswept
        print(f"\n{len(claims)} hybrid searches of each namespace, alternated. The swept namespace gave the same"
              f" results (ids and similarities) after its sweep as before it to {same} of them; asked for as many"
              f" candidates as before, to {sum(a == b for a, b in zip(before, deep))}.\n")
        print("| namespace | memories held | expired ids read a search | process CPU p50 ms | wall p50 ms |")
        print("|---|---:|---:|---:|---:|")
        for ns in (UNSWEPT, SWEPT):
            print(f"| {ns} | {held[ns]:,} | {read[ns]:,} | {statistics.median(cpu[ns]):.2f} |"
                  f" {statistics.median(wall[ns]):.2f} |")
    finally:
        pipeline.stop()
        face.close()
        collections.close()


if __name__ == "__main__":
    main()
