"""Instructions per v5 search, or per search in its hits' takes, counted by callgrind: a CPU measure that
another process's load does not move (thread CPU on a shared 2-core machine moves by more than a small
change between runs of the same code).

Opens namespace `scale` of a bench/v5.py data directory in process (its search pool and embedding
inline, the query vectors cached beforehand so that no embedding is counted; give it a copy), warms
it with 20 searches, then runs `--searches` more (SciFact queries none repeats, hybrid, limit 10,
Python's cyclic garbage collector off so that where its passes fall does not move the count).
`--part search` counts the whole searches inside one functools.reduce call, which `valgrind
--tool=callgrind --toggle-collect=functools_reduce` counts alone; `--part take` counts only each
collection's take (search._take, each wrapped in a reduce of its own). `--src` picks the checkout
whose code runs (its compiled kernels built beside it). valgrind has no AVX-512: the kernels take
their AVX2 or portable loops there.

    python bench/v5_callgrind.py --data DIR [--searches 20] [--part search|take] [--src DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))

from callgrind_count import count, measured_setup  # noqa: E402


def measured(src: Path, data: Path, searches: int, part: str) -> None:
    """Under valgrind: the face in process, warmed, then the counted searches."""
    texts = measured_setup(src)[:20 + searches]
    import asyncio
    import functools
    import gc
    from typing import Any

    import engram_index.supermemory.search as search
    from v5_parts import inline_face


    async def run() -> None:
        async with inline_face(data, texts) as face:
            def one(q: str) -> None:
                search.search(face, "scale", {"query": q, "limit": 10}, False)

            for q in texts[:20]:
                one(q)
            gc.collect()
            gc.disable()
            if part == "take":
                take = search._take

                def counted(*args: Any) -> Any:
                    return functools.reduce(lambda _, __: take(*args), [0], None)
                search._take = counted  # type: ignore[assignment]
                for q in texts[20:]:
                    one(q)
            else:
                functools.reduce(lambda _, q: one(q), texts[20:], None)
            os._exit(0)  # counted; the app's lifespan was entered in another task than this could leave it from

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--searches", type=int, default=20)
    parser.add_argument("--part", default="search", choices=("search", "take"))
    parser.add_argument("--src", type=Path, default=_HERE.parent, help="the checkout whose code runs")
    parser.add_argument("--measured", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measured:
        measured(args.src, args.data, args.searches, args.part)
        return
    total, out = count(__file__, ["--data", str(args.data), "--searches", str(args.searches), "--part", args.part,
                                  "--src", str(args.src)], args.src, "v5-callgrind-")
    what = "whole search" if args.part == "search" else "search in its hits' takes"
    print(f"code of {args.src}: {total / args.searches / 1e6:.3f} M instructions per {what}"
          f" ({args.searches} searches; profile: {out})")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
