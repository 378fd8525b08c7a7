"""Where a v5 search's thread CPU goes, part by part: inclusive time of a dozen functions, wrapped.

Opens namespace `scale` of a bench/v5.py data directory in process (the search pool inline, the
query vectors cached beforehand so that the embedding is not counted), wraps the face's main steps
and a few engine calls they make, and prints each one's inclusive thread CPU per search (a part
inside another is indented under it). The wrappers cost a microsecond or so a call; a profiler's
per-call cost, by contrast, inflates the face's many small calls against the engine's few.

    python bench/v5_parts.py --data DIR [--queries 150]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

from profile_search import Inline  # noqa: E402
from v5 import UNLIMITED  # noqa: E402

import engram_index.collections as core  # noqa: E402
import engram_index.context_columns as context_columns  # noqa: E402
import engram_index.engine.columns as columns  # noqa: E402
import engram_index.engine.keyword as keyword  # noqa: E402
import engram_index.engine.search as search_engine  # noqa: E402
import engram_index.engine.vector as vector  # noqa: E402
import engram_index.supermemory.expiry as expiry_module  # noqa: E402
import engram_index.supermemory.face as face_module  # noqa: E402
import engram_index.supermemory.page as page  # noqa: E402
import engram_index.supermemory.context as context  # noqa: E402
import engram_index.supermemory.search as search  # noqa: E402
import engram_index.supermemory.why_fewer as why_fewer  # noqa: E402
from engram_index.app import create_app  # noqa: E402
from engram_index.embed.local import MiniLMEmbedder  # noqa: E402
from engram_index.engram.api.embedding import QueryEmbedding  # noqa: E402
from engram_index.engram.auth import InsecureOpen  # noqa: E402

SPENT: collections.Counter[str] = collections.Counter()
# (owner, attribute, label): the label's indent says which part it is inside.
PARTS: list[tuple[Any, str, str]] = [
    (search, "found", "found (the candidates)"), (core.Collections, "start_many", "  engine keyword passes (start_many)"),
    (search_engine.StartedSearch, "finish", "  engine searches' rest (StartedSearch.finish)"),
    (context, "in_context", "  in_context"), (context_columns, "in_context", "    context_columns.in_context"),
    (search, "query_words", "  query_words"), (expiry_module, "unswept", "  expiry.unswept"),
    (keyword.KeywordIndex, "holds", "  KeywordIndex.holds (engine, face's calls and its own)"),
    (columns.Columns, "documents", "  Columns.documents (engine, face's calls and its own)"),
    (vector.VectorIndex, "similarities", "  VectorIndex.similarities"), (keyword.KeywordIndex, "coverage", "  KeywordIndex.coverage"),
    (vector.VectorIndex, "prepare", "  VectorIndex.prepare (engine and face)"), (face_module.Face, "dates", "  Face.dates"),
    (page.Rows, "read", "Rows.read"), (page.Rows, "read_found", "Rows.read_found"),
    (face_module.Face, "memories", "  Face.memories (both reads')"),
    (face_module.Face, "chunks", "  Face.chunks"), (search, "found_rank", "rank (found.rank)"), (search, "shape", "shape"),
    (face_module.Face, "documents_metadata", "  Face.documents_metadata"), (why_fewer, "explain", "whyFewer"),
    (face_module.Face, "unfinished", "  Face.unfinished"),
]


def wrap(owner: Any, name: str, label: str) -> None:
    """Replace `owner.name` by a wrapper adding its inclusive thread CPU to SPENT[label]."""
    fn: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[label] += time.thread_time_ns() - began

    setattr(owner, name, timed)


@contextlib.asynccontextmanager
async def inline_face(data: Path, texts: Sequence[str]) -> AsyncIterator[Any]:
    """The v5 face over a bench/v5.py data directory in process, its search pool and embedding run inline
    (one thread's CPU covers a search), with `texts` in its query cache (no search embeds)."""
    app = create_app(data, "did:web:localhost", authenticator=InsecureOpen(), embedding=QueryEmbedding(None),
                     key_limits=UNLIMITED, face_embedder=MiniLMEmbedder(int8=True))
    async with app.router.lifespan_context(app):
        face = app.state.supermemory
        app.state.spaces.searches.executor = Inline()
        face.embedding_threads = Inline()
        for q in texts:
            face.embed_query(q)
        yield face


def main() -> None:
    """Run the searches with the parts wrapped and print each part's share."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=150)
    shared = Path(os.environ.get("ENGRAM_SHARED", _HERE.parents[1] / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    for owner, name, label in PARTS:
        wrap(owner, name, label)
    texts = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()][:args.queries + 10]
    async def run() -> None:
        async with inline_face(args.data, texts) as face:
            for q in texts[:10]:  # warm: masks, dates, caches
                search.search(face, "scale", {"query": q, "limit": 10}, False)
            SPENT.clear()
            began = time.thread_time_ns()
            for q in texts[10:]:
                search.search(face, "scale", {"query": q, "limit": 10}, False)
            n = len(texts[10:])
            total = (time.thread_time_ns() - began) / n
            print(f"| part (hybrid, limit 10) | µs a search | share |\n|---|---:|---:|\n| the whole search | {total / 1e3:.0f} | |")
            for owner, name, label in PARTS:
                spent = SPENT[label] / n
                print(f"| {label.replace('  ', '· ')} | {spent / 1e3:.0f} | {spent / total:.1%} |")

    asyncio.run(run())


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
