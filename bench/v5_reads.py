"""The v5 face's reads of one document's or one memory's rows, in process, at the size of a bench/v5.py
namespace: what GET /document/{id}?include=memories, POST /list/documents/memory-counts, a profile and a
memory's related lists cost the store.

Opens a data directory filled by bench/v5.py (`--data DIR`; give it a copy: the checkout's migrations
run on it), picks its largest namespace and `--docs` of its documents, and times, over `--rounds`
rounds after one that warms them: a document's memories (`documents.memories_of`), the count of its
recallable memories (`documents.recallable_count`), the memory counts of all the picked documents at
once (`documents.memory_counts`, the route's answer), every document's filterable metadata read afresh
(`Face.metadata` after `Face.changed`: what a filtered search pays once the namespace's documents
changed), the same of one document (`Face.changed` naming it, as a write of one document does where
the checkout has it), a profile (`memories.profile`, without buckets, then with two buckets put in the
namespace: their members' counts and a digest of the answer are printed, to compare checkouts), a deep page of the unfiltered
memories list (nine tenths of the way through), the first page of memories listed with a
filter only the picked documents pass (their metadata marked for it: `memories.list_items`), when
the namespace holds relations, a memory's related lists (`related.related`), and what a read-only
process (a `--workers` reader; a node over a shared store reads as one) knows of the documents' metadata once
another changed one document's (`Face.metadata` after `documents.patch`), and a filter compiled again after a write
of one document (`search.doc_filter` after `Face.changed` naming it; the write untimed), in this process and
in the read-only one. `--src` picks the checkout whose code runs.

    python bench/v5_reads.py --data DIR [--docs 100] [--rounds 5] [--src CHECKOUT]
"""

from __future__ import annotations

import hashlib
import inspect
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))

from in_process import parsed  # noqa: E402

BUCKETS = {"diet": "food, meals, allergies", "work": "job, career, colleagues"}  # the profile's, when it has buckets


def p50_ms(run: Callable[[], object], rounds: int, before: Callable[[], object] | None = None) -> float:
    """The median wall milliseconds of `rounds` calls after one that warms them (`before`, untimed, ahead of
    each)."""
    if before is not None:
        before()
    run()
    spent = []
    for _ in range(rounds):
        if before is not None:
            before()
        began = time.perf_counter()
        run()
        spent.append((time.perf_counter() - began) * 1000)
    return statistics.median(spent)


def main() -> None:
    """Time each read and print the table."""
    args = parsed(__doc__, docs=100, rounds=5)
    from engram_index.collections import Collections
    from engram_index.keys import KeyStore
    from engram_index.supermemory import documents, memories, related
    from engram_index.supermemory.face import Face

    collections = Collections(args.data)
    face = Face(collections, KeyStore(args.data), None)
    try:
        query = face.store.query
        ns, held = query("SELECT ns, count(*) FROM sm_memories GROUP BY ns ORDER BY 2 DESC LIMIT 1")[0]
        docs = [r[0] for r in query("SELECT doc_id FROM sm_memories WHERE ns=? GROUP BY doc_id ORDER BY doc_id"
                                    " LIMIT ?", (ns, args.docs))]
        linked = query("SELECT src FROM sm_relations WHERE ns=? LIMIT 1", (ns,))
        face.store.execute([("DELETE FROM sm_buckets WHERE ns=?", (ns,))])  # (a copy this bench ran on has some)
        print(f"\nnamespace {ns!r}: {held:,} memories; `{args.src.resolve().name}`'s code;"
              f" {len(docs)} documents picked\n")
        befores: dict[str, Callable[[], object]] = {}  # run untimed before each timed call of a read
        reads: dict[str, Callable[[], object]] = {
            "a document's memories (each picked document in turn), per document":
                lambda: [documents.memories_of(face, ns, d) for d in docs],
            "a document's recallable memories counted, per document":
                lambda: [documents.recallable_count(face, ns, 0, doc_id=d) for d in docs],
            f"the memory counts of all {len(docs)} documents (one request's answer)":
                lambda: documents.memory_counts(face, ns, docs),
        }
        reads["a profile (the namespace has no buckets)"] = lambda: memories.profile(face, ns, {})
        reads[f"a profile with the buckets {', '.join(BUCKETS)}"] = lambda: memories.profile(face, ns, {})
        deep = max(1, held * 9 // 100)  # a page of 10 nine tenths of the way through the memories
        reads[f"memories listed, page {deep:,} of 10 (unfiltered)"] = \
            lambda: memories.list_items(face, ns, "memories", {"page": deep, "limit": 10}, {})
        # The picked documents are marked in their metadata, and a list filtered to them pages their memories.
        face.store.execute([("UPDATE sm_documents SET metadata=? WHERE ns=? AND id=?", ('{"picked": true}', ns, d))
                            for d in docs])
        face.changed(ns)
        picked = {"filter": {"field": "picked", "operator": "eq", "value": True}}
        reads[f"memories listed with a filter that {len(docs)} documents pass (first page of 10)"] = \
            lambda: memories.list_items(face, ns, "memories", {}, picked)

        def fresh_metadata() -> object:
            face.changed(ns)  # as a write of the namespace's documents does
            return face.metadata(ns)

        reads["every document's metadata read afresh (a filtered search's, once its documents changed)"] = \
            fresh_metadata
        if "documents" in inspect.signature(face.changed).parameters:  # (a checkout that reads one alone)
            face.metadata(ns)
            reads["one written document's metadata read again (Face.changed naming it)"] = \
                lambda: face.changed(ns, docs[:1])  # type: ignore[call-arg]
        if "documents" in inspect.signature(face.changed).parameters:
            from engram_index.supermemory import search

            label = f"a filter {len(docs)} documents pass, compiled again after a write of one (the write untimed)"
            reads[label] = lambda: search.doc_filter(face, ns, picked["filter"])
            befores[label] = lambda: face.changed(ns, docs[:1])  # type: ignore[call-arg]  # (as a write does)
        if linked:
            reads["a memory's related lists"] = lambda: related.related(face, ns, linked[0][0], 10, 0)
        print("| read | p50 ms |\n|---|---:|")
        for label, run in reads.items():
            if label.startswith("a profile with the buckets"):
                from engram_index.supermemory import buckets

                buckets.put_buckets(face, ns, BUCKETS)
                answer = memories.profile(face, ns, {})
                counts = {name: len(held) for name, held in answer["profile"]["buckets"].items()}
                digest = hashlib.sha256(json.dumps(answer, sort_keys=True).encode()).hexdigest()[:12]
                label += f" (members {counts}, answer {digest})"
            spent = p50_ms(run, args.rounds, befores.get(label))
            per = spent / len(docs) if label.endswith("per document") else spent
            print(f"| {label} | {per:.3f} |")
        # A process that does not make every write (a --workers reader; a node over a shared store): what filters
        # know of the documents, once another process changed one document's metadata.
        readers = Collections(args.data, read_only=True, lock=False)
        reader = Face(readers, KeyStore(args.data), None, read_only=True)
        try:
            reader.metadata(ns)
            spent = []
            for i in range(args.rounds + 1):
                documents.patch(face, ns, docs[0], {"metadata": {"picked": True, "round": i}})
                began = time.perf_counter()
                reader.metadata(ns)
                spent.append((time.perf_counter() - began) * 1000)
            print(f"| what another process knows of the documents after one document's metadata changed |"
                  f" {statistics.median(spent[1:]):.3f} |")
            from engram_index.supermemory import search as searching

            searching.doc_filter(reader, ns, picked["filter"])
            spent = []
            for i in range(args.rounds + 1):
                documents.patch(face, ns, docs[0], {"metadata": {"picked": True, "round": -i}})
                began = time.perf_counter()
                searching.doc_filter(reader, ns, picked["filter"])
                spent.append((time.perf_counter() - began) * 1000)
            print(f"| another process's filter that {len(docs)} documents pass, after one document's metadata"
                  f" changed | {statistics.median(spent[1:]):.3f} |")
        finally:
            reader.close()
            readers.close()
    finally:
        face.close()
        collections.close()


if __name__ == "__main__":
    main()
