"""LoCoMo dev R@k of engine-level ranking variants: the measurements behind docs/design/ranking.md's levers.

Each conversation becomes one collection (a document per turn, MiniLM vectors of the turn's
text); every answerable question is asked in each variant. Faster than `engram-index eval
locomo` (no HTTP, no v5 pipeline), so levers can be compared before they go into the faces.

    .venv/bin/python bench/locomo_levers.py --data-dir ../shared/data/locomo-dev [--cache vecs.npz]
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engram_index.collections import Collections
from engram_index.embed.local import MiniLMEmbedder
from engram_index.engine.types import Document, SearchRequest
from engram_index.locomo import Conversation, load, recall_at
from engram_index.ranking import CONTENT_STOPWORDS
from engram_index.store.sqlite import StoredDocument
from machine import print_machine

_WORD = re.compile(r"[\w']+")


def content_query(q: str) -> str:
    """The question without its question and function words (all of it when nothing else is left)."""
    kept = [w for w in _WORD.findall(q) if w.lower() not in CONTENT_STOPWORDS]
    return " ".join(kept) or q


def vectors(convs: list[Conversation], cache: Path | None, texts_of: Callable[[Conversation], list[str]],
            tag: str) -> dict[str, np.ndarray]:
    """MiniLM vectors of each conversation's texts (read from / written to the cache when given)."""
    path = None if cache is None else cache.with_name(f"{cache.stem}-{tag}.npz")
    if path is not None and path.exists():
        saved = np.load(path)
        return {k: saved[k] for k in saved.files}
    emb = MiniLMEmbedder()
    out = {c.name: emb.embed_documents(texts_of(c)).astype(np.float16) for c in convs}
    if path is not None:
        np.savez(path, **out)  # type: ignore[arg-type]
    return out


def main() -> None:
    """Print R@5/R@10/R@20 of each variant."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--cache", type=Path, default=None, help="where to keep the turn vectors between runs")
    args = ap.parse_args()
    print_machine()
    convs = load(args.data_dir)
    plain = vectors(convs, args.cache, lambda c: [t.text for t in c.turns], "plain")
    emb = MiniLMEmbedder()
    questions = [q for c in convs for q in c.questions]
    qv = emb.embed_queries([q.text for q in questions])
    qv_content = emb.embed_queries([content_query(q.text) for q in questions])

    def neighbour_text(c: Conversation, i: int) -> str:
        """The turn, then the turn before it in the same session."""
        turns = c.turns
        prev = turns[i - 1].text if i > 0 and turns[i - 1].session == turns[i].session else ""
        return f"{turns[i].text} {prev}".strip()

    context = vectors(convs, args.cache, lambda c: [neighbour_text(c, i) for i in range(len(c.turns))], "context")
    layouts = {"plain": lambda c, i: c.turns[i].text, "with previous turn": neighbour_text,
               "previous turn embedded too": neighbour_text}
    vecs_of = {"plain": plain, "with previous turn": plain, "previous turn embedded too": context}
    with tempfile.TemporaryDirectory() as tmp:
        spaces = Collections(Path(tmp))
        try:
            from engram_index.evaluation import MINILM

            for layout, text_of in layouts.items():
                names = {}
                for c in convs:
                    uri = f"at://did:plc:locomolevers000000000000/space/garden.engram.space/{c.name}-{len(names)}{layout[0]}"
                    names[c.name] = uri
                    spaces.ensure_collection(uri, MINILM)
                    spaces.write(uri, [StoredDocument(Document(
                        id=t.dia_id, author="did:plc:locomolevers000000000000", text=text_of(c, i),
                        created_ms=i, vector=vecs_of[layout][c.name][i].astype("<f2").tobytes())) for i, t in enumerate(c.turns)])
                variants = {
                    "keyword": ("keyword", "convex", False), "keyword, content words": ("keyword", "convex", True),
                    "vector": ("vector", "convex", False), "vector, content words": ("vector", "convex", True),
                    "hybrid convex": ("hybrid", "convex", False), "hybrid convex, content words": ("hybrid", "convex", True),
                    "hybrid rrf": ("hybrid", "rrf", False), "hybrid rrf, content words": ("hybrid", "rrf", True),
                }
                for name, (mode, fusion, content) in variants.items():
                    sums = dict.fromkeys((5, 10, 20), 0.0)
                    for n, q in enumerate(questions):
                        req = SearchRequest(mode, q=content_query(q.text) if content else q.text,  # type: ignore[arg-type]
                                            vector=(qv_content if content else qv)[n], limit=20,
                                            fusion=fusion, explain=False)  # type: ignore[arg-type]
                        found = [h.document.id for h in spaces.index(names[q.conversation]).search(req).hits]
                        for k in sums:
                            sums[k] += recall_at(found, q.evidence, k)
                    print(f"{layout:20} {name:32} " + " ".join(f"R@{k} {v / len(questions):.3f}" for k, v in sums.items()),
                          flush=True)
        finally:
            spaces.close()


if __name__ == "__main__":
    main()
