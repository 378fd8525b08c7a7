"""Why SciFact scores lower through the v5 face than on the engine's path: its candidates re-ranked other ways.

Fills a namespace with SciFact through the official SDK (as bench/v5_scifact.py does; kept in
`--data` to run again without filling), then, in process, takes each query's hybrid candidates (or `--mode`'s) as
the face finds them (limit 100, threshold 0.3) and ranks them with the face's own ranking
(`found.rank`) under other per-candidate scores: the vector's weight, and keyword coverage taken
over more of the candidate's document (its whole document; its document's first chunk, which holds
the title), and the face's score with each result backed by the best other result of its document
(a document found several times ranks higher), a memory and the chunk that holds it backing each
other more or less than the face's `1 - (1 - own)(1 - other)`, the candidate's own BM25 saturated into 0-1 in place
of coverage or beside it, each kind (memory, chunk) with weights of its own (also together with the first chunk's
coverage, the best of a grid), and (`--idf-power`) coverage's word weights as a power of their idf.
`--chunk-target` fills a new `--data` with chunks of another size (the whole abstract, say), and
`--embed-whole` one whose chunks are embedded whole (as with an LLM) instead of pooling their
sentences' vectors. A document counts at its first result, as in bench/v5_scifact.py. Each line
is one score; the first is the face's. Then the same candidates above the face's threshold in the
order of the engine's fusion (z-scores of cosine and BM25), and the engine's own searches over
each of the face's collections, without the face: what the collections themselves hold of SciFact.

    python bench/v5_scifact_levers.py --data DIR [--queries 300] [--idf-power 1] [--chunk-target 800]
                                      [--embed-whole] [--mode hybrid|chunks|memories]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from machine import print_machine  # noqa: E402
from supermemory import Supermemory  # noqa: E402
from v5 import local_app, wait_all_done  # noqa: E402

from engram_index.engine.analyzer import query_words  # noqa: E402
from engram_index.engine import fusion  # noqa: E402
from engram_index.engine.fusion import CONVEX_ALPHA  # noqa: E402
from engram_index.engine.types import Filters, SearchRequest  # noqa: E402
from engram_index.evaluation import load_scifact, ndcg_at  # noqa: E402
from engram_index.ranking import content_words  # noqa: E402
from engram_index.supermemory import chunking, context, pipeline  # noqa: E402
from engram_index.supermemory import found as found_module  # noqa: E402
from engram_index.supermemory import search as v5search  # noqa: E402
from engram_index.supermemory.face import Face, stamp  # noqa: E402
from engram_index.supermemory.found import Found, either, rank  # noqa: E402
from engram_index.supermemory.page import Rows  # noqa: E402
from engram_index.supermemory.tables import chunk_document, chunks_collection, memories_collection  # noqa: E402
from engram_index.testkit.serve import serving  # noqa: E402

NS = "scifact"
Score = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]  # cosine, own, document, lead, BM25


def fill(scifact: Path, data: Path, target: int, whole: bool) -> None:
    """Add every abstract through the SDK, chunked to `target` characters (each chunk embedded whole when
    `whole`), unless `data` holds them already (so: a directory filled otherwise is refused)."""
    corpus, _, _ = load_scifact(scifact)
    marker = data / "filled"
    wanted = f"{target}{' whole' if whole else ''}"
    if marker.exists():
        held = marker.read_text() or "800"  # (an empty marker: filled before targets were noted, at 800)
        if held != wanted:
            raise SystemExit(f"{data} was filled as {held!r} (the chunk target, 'whole' when the chunks were"
                             f" embedded whole): give a new --data for {wanted!r}")
        return
    chunking.TARGET = target  # (the pipeline's chunks, made in this process)
    if whole:  # (the pipeline's embedding without an LLM, as with one)
        pipeline._embed_pooled = pipeline._embed_whole  # type: ignore[assignment]
    app, key = local_app(data, "auto")
    with serving(app) as url:
        client = Supermemory(api_key=key, base_url=url, max_retries=0, timeout=300)
        began = time.perf_counter()
        for start in range(0, len(corpus), 100):
            client.documents.batch_add(NS, documents=[
                {"content": (d["title"] + "\n\n" + d["text"]).strip(), "metadata": {"scifact": d["_id"]}}
                for d in corpus[start:start + 100]])
        wait_all_done(app.state.supermemory, NS, len(corpus))
        print(f"filled in {time.perf_counter() - began:.0f} s", file=sys.stderr)
    marker.write_text(wanted)


def doc_coverage(face: Face, query: str, docs: list[str], chunks: dict[str, int], lead: bool) -> dict[str, float]:
    """Each document's keyword coverage over all its chunks (or its first only, `lead`)."""
    index = face.collections.index(chunks_collection(NS))
    topic = content_words(query_words(query), query)
    out: dict[str, float] = {}
    with index.reading():
        weights = context.word_weights(index, topic)
        for d in docs:
            ords = index.columns.ids_to_ords([f"{d}c{p}" for p in range(1 if lead else chunks.get(d, 0))])
            whole, part = index.keyword.holds(topic, ords)
            out[d] = union_coverage(whole.any(0), part.any(0), weights)
    return out


def union_coverage(whole: np.ndarray, part: np.ndarray, weights: np.ndarray | None) -> float:
    """The face's keyword coverage (KeywordIndex.coverage) of the words any of a document's chunks holds."""
    w = np.ones(whole.size) if weights is None or not weights.sum() > 0 else weights
    held = half = 0.0
    for j, weight in enumerate(w.tolist()):  # (word after word, as the face sums them)
        if whole[j]:
            held += weight
        elif part[j]:
            half += weight
    return (held + 0.5 * half) / float(w.sum()) if whole.size else 0.0


def main() -> None:
    """Print nDCG@10 per score."""
    shared = Path(os.environ.get("ENGRAM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--chunk-target", type=int, default=chunking.TARGET,
                        help="fill --data with chunks of about this many characters (the face's: chunking.TARGET)")
    parser.add_argument("--mode", choices=("hybrid", "chunks", "memories"), default="hybrid",
                        help="the face's search mode whose candidates are ranked (the goal's: hybrid)")
    parser.add_argument("--embed-whole", action="store_true",
                        help="fill --data with chunks embedded whole, not pooled from their sentences")
    parser.add_argument("--idf-power", type=float, default=context.IDF_POWER,
                        help="each word's coverage weight is its idf to this power (the face's: 1)")
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    context.IDF_POWER = args.idf_power  # (the candidates are found again with it: their coverage changes)
    print_machine()
    args.data.mkdir(parents=True, exist_ok=True)
    fill(args.scifact, args.data, args.chunk_target, args.embed_whole)
    _, queries, qrels = load_scifact(args.scifact)
    queries = [q for q in queries if q["_id"] in qrels][:args.queries]
    app, _ = local_app(args.data, "auto")
    taken: list[tuple[str, Found, list[int], list[str | None], np.ndarray, np.ndarray, np.ndarray, list[str]]] = []
    with serving(app):
        face: Face = app.state.supermemory
        sci = {i: json.loads(m or "{}").get("scifact") for i, m in
               face.store.query("SELECT id, metadata FROM sm_documents WHERE ns=?", (NS,))}
        mem_doc = dict(face.store.query("SELECT id, doc_id FROM sm_memories WHERE ns=?", (NS,)))
        chunks = {d: int(n) for d, n in face.store.query(
            "SELECT doc_id, count(*) FROM sm_chunks WHERE ns=? GROUP BY doc_id", (NS,))}
        own = engine_alone(face, queries, qrels, sci, mem_doc)
        for q in queries:
            cols = v5search.found(face, NS, q["text"], args.mode, 100, Filters(), False, stamp())
            sharing = cols.sharing_a_document()
            Rows(face, NS).read_found(cols, sharing)
            docs = [chunk_document(i) if k == 0 else mem_doc.get(i, "") for k, i in zip(cols.kinds.tolist(), cols.ids)]
            whole = doc_coverage(face, q["text"], list(dict.fromkeys(docs)), chunks, lead=False)
            lead = doc_coverage(face, q["text"], list(dict.fromkeys(docs)), chunks, lead=True)
            cosine = np.maximum(np.nan_to_num(cols.sims, nan=0.0), 0.0)
            taken.append((q["_id"], cols, sharing, [sci.get(d) for d in docs], cosine,
                          np.array([whole[d] for d in docs]), np.array([lead[d] for d in docs]), docs))

    def ndcg(score: Score, backing: float = 0.0, memory_weight: float | None = None, pair: float = 1.0,
             memory_lead: bool = False) -> float:
        """nDCG@10 of the candidates ranked by `score` (`memory_weight`: a memory's cosine weight in the face's
        form, the rest coverage (with `memory_lead`, the better of its own and its document's first chunk's),
        in place of `score`'s for memories; `pair`: the weight of the other's score when a memory and the
        chunk that holds it are one result, 1 - (1 - own)(1 - min(pair × other, 1)))."""
        if pair != 1.0:
            found_module.either = lambda own, other: either(own, np.minimum(pair * np.clip(other, 0.0, 1.0), 1.0))
        try:
            return statistics.fmean(scored(score, backing, memory_weight, memory_lead))
        finally:
            found_module.either = either

    def scored(score: Score, backing: float, memory_weight: float | None, memory_lead: bool) -> list[float]:
        """Each query's nDCG@10 (`ndcg`)."""
        out = []
        for qid, cols, sharing, scifact_ids, cosine, whole, lead, docs in taken:
            own = cols.own.copy()
            cols.own = np.clip(score(cosine, cols.coverage, whole, lead, np.nan_to_num(cols.bm25, nan=0.0)), 0.0, 1.0)
            if memory_weight is not None:  # (kinds: 0 a chunk, 1 a memory)
                memory = cols.kinds == 1
                keyword = np.maximum(cols.coverage, lead) if memory_lead else cols.coverage
                cols.own[memory] = memory_weight * cosine[memory] + (1 - memory_weight) * keyword[memory]
            if backing:
                cols.own = by_document(cols.own, docs, backing)
            ranked: list[str] = []
            for p in rank(cols, sharing, 100, 0.3).places:
                d = scifact_ids[p]
                if d and d not in ranked:
                    ranked.append(d)
            cols.own = own
            out.append(ndcg_at(ranked, qrels[qid]))
        return out

    def by_document(own: np.ndarray, docs: list[str], weight: float) -> np.ndarray:
        """Each candidate backed by `weight` × the best other candidate of its document (found.either)."""
        top: dict[str, list[float]] = {}  # each document's best two scores
        for d, s in zip(docs, own.tolist()):
            top[d] = sorted([*top.get(d, []), s], reverse=True)[:2]
        # The best other: its document's best unless this is it, else the second best (its equal on a tie).
        other = np.array([t[0] if s < t[0] else (t[1] if len(t) > 1 else np.nan)
                          for s, t in zip(own.tolist(), (top[d] for d in docs))])
        backed = ~np.isnan(other)
        out = own.copy()
        out[backed] = either(own[backed], weight * other[backed])
        return out

    def weighted(w: float, keyword: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> Score:
        return lambda c, own, whole, lead, bm25: w * c + (1 - w) * keyword(own, whole, lead)

    rows: list[tuple[str, Score]] = [("the face's: 0.7 × cosine + 0.3 × coverage (its own, in context)",
                                      lambda c, own, whole, lead, bm25: 0.7 * c + 0.3 * own)]
    rows += [(f"{w} × cosine + {1 - w:.1f} × coverage", weighted(w, lambda own, whole, lead: own))
             for w in (0.5, 0.6, 0.8, 0.9, 1.0)]
    rows.append(("coverage alone", lambda c, own, whole, lead, bm25: own))
    rows += [(f"{w} × cosine + {1 - w:.1f} × the whole document's coverage", weighted(w, lambda own, whole, lead: whole))
             for w in (0.7, 0.8)]
    rows += [(f"{w} × cosine + {1 - w:.1f} × (own + whole document's) / 2",
              weighted(w, lambda own, whole, lead: (own + whole) / 2)) for w in (0.6, 0.7, 0.8)]
    rows += [(f"{w} × cosine + {1 - w:.1f} × the better of its coverage and its document's first chunk's",
              weighted(w, lambda own, whole, lead: np.maximum(own, lead))) for w in (0.7,)]
    # BM25 of the candidate alone (the engine's; 0 for a turn that joined as context), saturated into 0-1.
    rows += [(f"{w} × cosine + {1 - w:.1f} × BM25 / (BM25 + {k:g})",
              (lambda w, k: lambda c, own, whole, lead, bm25: w * c + (1 - w) * bm25 / (bm25 + k))(w, k))
             for k in (10.0, 20.0) for w in (0.6, 0.7)]
    rows += [(f"0.7 × cosine + 0.3 × (coverage + BM25 / (BM25 + {k:g})) / 2",
              (lambda k: lambda c, own, whole, lead, bm25: 0.7 * c + 0.3 * (own + bm25 / (bm25 + k)) / 2)(k))
             for k in (3.0, 20.0)]
    print(f"\n| candidate score ({args.mode}, limit 100, threshold 0.3) | SciFact nDCG@10 |\n|---|---:|")
    for label, score in rows:
        print(f"| {label} | {ndcg(score):.4f} |")
    # Each kind its own weights: a memory (one sentence) and a chunk (several) hold a query differently.
    for memories, chunks in ((0.75, 0.65), (0.8, 0.6), (0.65, 0.75), (0.6, 0.8)):
        print(f"| memories {memories} × cosine, chunks {chunks} × cosine (the rest coverage) | "
              f"{ndcg(weighted(chunks, lambda own, whole, lead: own), memory_weight=memories):.4f} |")
    # The two levers above that each gained most, together, over a grid of both kinds' weights: its best.
    grid = {(m, c): ndcg(weighted(c, lambda own, whole, lead: np.maximum(own, lead)), memory_weight=m, memory_lead=True)
            for m in (0.7, 0.75, 0.8, 0.85) for c in (0.55, 0.6, 0.65, 0.7)}
    (m, c), best = max(grid.items(), key=lambda kv: kv[1])
    print(f"| each kind its own weight (memories 0.7-0.85, chunks 0.55-0.7 × cosine), the rest the better of its"
          f" coverage and its document's first chunk's: the best of 16, memories {m}, chunks {c} | {best:.4f} |")
    face_score = rows[0][1]
    for weight in (0.1, 0.2, 0.3, 0.5):
        print(f"| the face's, each backed by {weight} × the best other result of its document | "
              f"{ndcg(face_score, weight):.4f} |")
    for pair in (0.0, 0.5, 0.75, 1.25, 1.5):  # (1: the face's own)
        print(f"| the face's, a memory and the chunk that holds it backing each other at {pair} × the other's score | "
              f"{ndcg(face_score, pair=pair):.4f} |")
    print(f"| the face's, above its threshold, in the order of the engine's fusion (z-scores, alpha {CONVEX_ALPHA}) | "
          f"{ndcg(lambda c, own, whole, lead, bm25: fusion_order(0.7 * c + 0.3 * own, c, bm25)):.4f} |")
    print("\n| the engine's own search over one of the face's collections (limit 100) | hybrid | vector | keyword |"
          "\n|---|---:|---:|---:|")
    for kind, modes in own.items():
        print(f"| {kind} | {modes['hybrid']:.4f} | {modes['vector']:.4f} | {modes['keyword']:.4f} |")


def fusion_order(face: np.ndarray, cosine: np.ndarray, bm25: np.ndarray) -> np.ndarray:
    """Scores in 0.3-1 above the face's threshold (0.3), ranked as the engine's convex fusion ranks them (z-scores
    of cosine and BM25 over the candidates), 0 below it: the threshold the face's, the order the engine's."""
    scaled = fusion.minmax(fusion.convex(cosine, bm25))
    out: np.ndarray = np.where(face >= 0.3, 0.3 + 0.7 * scaled, 0.0)
    return out


def engine_alone(face: Face, queries: list[dict], qrels: dict, sci: dict, mem_doc: dict) -> dict[str, dict[str, float]]:
    """nDCG@10 of the engine's own searches (the face's keyword query and query vector) over each collection."""
    out: dict[str, dict[str, float]] = {}
    for kind, name, document in (("chunks", chunks_collection(NS), chunk_document),
                                 ("memories", memories_collection(NS), lambda i: mem_doc.get(i, ""))):
        index = face.collections.index(name)
        out[kind] = {}
        for mode in ("hybrid", "vector", "keyword"):
            scores = []
            for q in queries:
                vector = face.embed_query(q["text"]) if mode != "keyword" else None
                asked = v5search.content_query(q["text"], query_words(q["text"]))
                result = index.search(SearchRequest(mode, q=asked, vector=vector, limit=100, explain=False,  # type: ignore[arg-type]
                                                    documents=False))
                ranked: list[str] = []
                for hit in result.hits:
                    d = sci.get(document(hit.document.id))
                    if d and d not in ranked:
                        ranked.append(d)
                scores.append(ndcg_at(ranked, qrels[q["_id"]]))
            out[kind][mode] = statistics.fmean(scores)
    return out


if __name__ == "__main__":
    main()
