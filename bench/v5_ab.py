"""The v5 face's search of two source trees in one process, alternated search by search (thread CPU).

On a shared machine two runs one after the other differ by more than most changes do; here the
face's modules of an older tree (`--old SRC`: its `src` directory) are loaded beside this tree's,
over one app, one index and one data directory (namespace `scale` of a bench/v5.py directory),
and every query is searched by both, in turns (old first, then new first), with its vector in the
query cache beforehand so that the embedding is not counted. It prints each round's thread CPU
per search of each, their medians, and how many answers (without `searchTime`) differ.

    python bench/v5_ab.py --data DIR --old OLD/src [--queries 150] [--rounds 5] [--mode hybrid]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

from v5_parts import inline_face  # noqa: E402

import engram_index.supermemory.search as new_search  # noqa: E402

# The modules a face-side change touches, in import order: the old tree's are loaded as these names
# for the moment of loading, so that its search.py imports its own ranking, candidates and page.
FACE_MODULES = ["engram_index.ranking", "engram_index.supermemory.candidates", "engram_index.supermemory.found",
                "engram_index.supermemory.page", "engram_index.supermemory.context",
                "engram_index.supermemory.why_fewer", "engram_index.supermemory.search"]


def old_search(src: Path) -> ModuleType:
    """The old tree's supermemory search module, with the old tree's face modules beneath it."""
    names = [name for name in FACE_MODULES if (src / (name.replace(".", "/") + ".py")).exists()]  # (as it has them)
    saved = {name: sys.modules[name] for name in names}
    try:
        for name in names:
            spec = importlib.util.spec_from_file_location(name, src / (name.replace(".", "/") + ".py"))
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            parent, _, leaf = name.rpartition(".")
            setattr(sys.modules[parent], leaf, module)  # (`from package import module` reads the attribute)
            spec.loader.exec_module(module)
        return sys.modules[FACE_MODULES[-1]]
    finally:
        sys.modules.update(saved)
        for name, module in saved.items():
            parent, _, leaf = name.rpartition(".")
            setattr(sys.modules[parent], leaf, module)


def main() -> None:
    """Alternate the two trees' searches and print the thread CPU of each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--old", type=Path, required=True, help="the older tree's src directory")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mode", default="hybrid", choices=("hybrid", "memories", "chunks"))
    shared = Path(os.environ.get("ENGRAM_SHARED", _HERE.parents[1] / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    old = old_search(args.old)
    texts = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()][:args.queries + 10]
    def body(q: str) -> dict[str, Any]:
        return {"query": q, "limit": 10, "searchMode": args.mode}

    async def run() -> None:
        async with inline_face(args.data, texts) as face:  # the queries in its cache: neither side embeds
            for q in texts[:10]:  # warm: masks, dates, caches
                old.search(face, "scale", body(q), False)
                new_search.search(face, "scale", body(q), False)
            per: dict[str, list[float]] = {"old": [], "new": []}
            differ = 0
            for r in range(args.rounds):
                spent = {"old": 0, "new": 0}
                for i, q in enumerate(texts[10:]):
                    sides = [("old", old), ("new", new_search)]
                    answers: dict[str, bytes] = {}
                    for label, module in sides if (i + r) % 2 == 0 else sides[::-1]:
                        began = time.thread_time_ns()
                        out = module.search(face, "scale", body(q), False)
                        spent[label] += time.thread_time_ns() - began
                        out.pop("searchTime")
                        answers[label] = orjson.dumps(out)
                    differ += answers["old"] != answers["new"]
                for label, ns in spent.items():
                    per[label].append(ns / len(texts[10:]) / 1e3)
            print(f"| round | {' | '.join(str(r + 1) for r in range(args.rounds))} | median |")
            print(f"|---|{'---:|' * (args.rounds + 1)}")
            for label in ("old", "new"):
                print(f"| {label}, µs a search | {' | '.join(f'{x:.0f}' for x in per[label])} |"
                      f" {statistics.median(per[label]):.0f} |")
            print(f"\n{args.rounds * len(texts[10:])} searches each ({args.mode}); answers differing: {differ}")

    asyncio.run(run())


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
