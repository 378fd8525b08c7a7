"""What bench/explain_cost.py and bench/profile_hybrid.py share: the --src switch, their options, the space.

Import it before anything imports the package: with `--src OTHER/src` on the command line it puts
that checkout's `src` first on the path and imports the package from there at once, so that the
benches' own path to this checkout's src (peers_common) comes too late to win.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if "--src" in sys.argv:
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--src") + 1]).resolve()))
    import engram_index  # noqa: F401


def options(description: str | None) -> argparse.ArgumentParser:
    """The options both benches take: the space's size and directory, queries, rounds, --src, SciFact."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--data", type=Path, required=True, help="the space's directory (built when missing)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--src", type=Path, help="a checkout's src to import the engine from")
    parser.add_argument("--scifact", type=Path, default=HERE.parents[1] / "shared" / "data" / "scifact")
    return parser


def open_space(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The workload, the collections and the synthetic space's index (built when missing); prints the CPU line."""
    from engine import SPACE
    from peers_common import cpu_model, synthetic_workload
    from peers_engram import reused_space

    from engram_index.engine import search as engine_search

    work = synthetic_workload(args.n, args.queries, args.scifact)
    spaces = reused_space(args.data, work.corpus)
    model, usable = cpu_model()
    print(f"CPU: {model} ({usable} usable cores); {args.n:,} memories, {len(work.query_texts)} queries; "
          f"engine from {Path(engine_search.__file__).parents[2]}")
    return work, spaces, spaces.index(SPACE)
