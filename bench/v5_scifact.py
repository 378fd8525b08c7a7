"""SciFact through the supermemory v5 face as its users drive it: the official SDK, the face's own embedder.

Serves a fresh data directory in process with the v5 face embedding with `--face-embedder` (auto:
the int8 all-MiniLM-L6-v2 graph; local: the float32 one), adds every SciFact abstract (title and
text) as a v5 document through the official `supermemory` SDK (its chunks and memories embedded
by the face's pipeline, not the reference vectors), waits until all are done, then asks each
SciFact query through the SDK's `search` in each search mode (limit 100) and scores the documents
the results name, in their order (a document counted once, at its first result): nDCG@10 and
Recall@100 as `engram-index eval scifact` computes them. One line per face embedder and mode.

`--embed-heading` (a lever, not the face's behaviour) embeds every sentence and memory of a document
whose first paragraph is a short heading (a SciFact title) as "heading\n\nsentence", as contextual
chunk headers do, and the chunks pool those.

    python bench/v5_scifact.py [--face-embedders auto,local] [--modes hybrid,chunks,memories] [--queries 300]
                               [--embed-heading]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from machine import print_machine  # noqa: E402
from supermemory import Supermemory  # noqa: E402
from v5 import local_app, wait_all_done  # noqa: E402

from engram_index.evaluation import load_scifact, ndcg_at, recall_at  # noqa: E402
from engram_index.supermemory import pipeline  # noqa: E402
from engram_index.supermemory.forming import Job  # noqa: E402
from engram_index.testkit.serve import serving  # noqa: E402

NS = "scifact"
BATCH = 100  # documents per batch_add


def ranked_documents(results: list[object]) -> list[str]:
    """The SciFact ids the results name, best first, each once."""
    out: list[str] = []
    for r in results:
        meta = getattr(r, "metadata", None) or {}
        doc = str(meta.get("scifact", "")) if isinstance(meta, dict) else ""
        if doc and doc not in out:
            out.append(doc)
    return out


def heading(text: str) -> str | None:
    """A document's first paragraph when it is a short heading (2 words to 250 characters) before more text."""
    head, gap, rest = text.strip().partition("\n\n")
    head = " ".join(head.split())
    return head if gap and rest.strip() and len(head) <= 250 and len(head.split()) >= 2 else None


def embed_under_headings() -> None:
    """Make this process's pipeline embed each sentence and memory under its document's heading (`--embed-heading`)."""
    face_text = pipeline.in_context

    def in_context(job: Job, text: str) -> str:
        head, own = heading(job.text), " ".join(text.split())
        return face_text(job, f"{head}\n\n{own}" if head and not own.startswith(head) else text)

    pipeline.in_context = in_context  # type: ignore[assignment]


def run(scifact: Path, face_spec: str, modes: list[str], n_queries: int,
        asked: Sequence[Callable[[], None]] = ()) -> list[dict[str, object]]:
    """Fill a namespace with SciFact through the SDK under one face embedder; each mode's scores (once
    after each of `asked`, a setting made before asking, when given: row key `asked`, its index)."""
    corpus, queries, qrels = load_scifact(scifact)
    queries = [q for q in queries if q["_id"] in qrels][:n_queries]
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="engram-v5-scifact-") as tmp:
        data = Path(tmp)
        app, key = local_app(data, face_spec)
        with serving(app) as url:
            client = Supermemory(api_key=key, base_url=url, max_retries=0, timeout=300)
            began = time.perf_counter()
            for start in range(0, len(corpus), BATCH):
                client.documents.batch_add(NS, documents=[
                    {"content": (d["title"] + "\n\n" + d["text"]).strip(), "metadata": {"scifact": d["_id"]}}
                    for d in corpus[start:start + BATCH]])
                print(f"\r{face_spec}: {min(start + BATCH, len(corpus))}/{len(corpus)} documents sent",
                      end="", file=sys.stderr, flush=True)
            wait_all_done(app.state.supermemory, NS, len(corpus))
            fill_s = time.perf_counter() - began
            print(f"\r{face_spec}: {len(corpus)} documents done in {fill_s:.0f} s", file=sys.stderr)
            for setting, mode in [(k, m) for k in range(max(1, len(asked))) for m in modes]:
                if asked:
                    asked[setting]()
                ndcg, recall, took = [], [], []
                for q in queries:
                    t = time.perf_counter()
                    found = client.search(NS, query=q["text"], search_mode=mode, limit=100)  # type: ignore[arg-type]
                    took.append((time.perf_counter() - t) * 1000)
                    docs = ranked_documents(list(found.results))
                    ndcg.append(ndcg_at(docs, qrels[q["_id"]]))
                    recall.append(recall_at(docs, qrels[q["_id"]]))
                rows.append({"embedder": app.state.face_embedder.identity.model, "mode": mode,
                             "ndcg@10": statistics.fmean(ndcg), "recall@100": statistics.fmean(recall),
                             "p50_ms": statistics.median(took), "fill_s": fill_s, "asked": setting})
                print(f"{face_spec} {mode}: nDCG@10 {rows[-1]['ndcg@10']:.4f}", file=sys.stderr)
    return rows


def main() -> None:
    """Print the table."""
    shared = Path(os.environ.get("ENGRAM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--face-embedders", default="auto,local", help="v5 face embedders, comma-separated")
    parser.add_argument("--modes", default="hybrid,chunks,memories")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    parser.add_argument("--embed-heading", action="store_true", help="embed sentences under their document's heading")
    args = parser.parse_args()
    print_machine()
    if args.embed_heading:
        embed_under_headings()
    rows = [row for spec in args.face_embedders.split(",") if spec
            for row in run(args.scifact, spec, [m for m in args.modes.split(",") if m], args.queries)]
    print("\n| face embedder | searchMode | nDCG@10 | Recall@100 | search p50 ms (limit 100) | fill s |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['embedder']} | {r['mode']} | {r['ndcg@10']:.4f} | {r['recall@100']:.4f} | "
              f"{r['p50_ms']:.2f} | {r['fill_s']:.0f} |")


if __name__ == "__main__":
    main()
