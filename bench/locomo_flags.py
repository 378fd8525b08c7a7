"""LoCoMo dev R@k of garden.engram, Kindgi and v5 with a ranking flag at each value, from one load.

The faces are served in this process (locomo_faces.serve), so a module flag flipped here is the
served code's. Measures levers before `engram-index eval locomo` confirms them:

    .venv/bin/python bench/locomo_flags.py --data-dir ../shared/data/locomo-dev --flag ranking.NEXT_CONTEXT
    .venv/bin/python bench/locomo_flags.py --data-dir ../shared/data/locomo-dev --faces kindgi \
        --flag kindgi.retrieve.MIN_LEG_DEPTH --values 20,40,60
"""

from __future__ import annotations

import argparse
import ast
import importlib
import tempfile
from pathlib import Path

from engram_index.embed.local import MiniLMEmbedder
from engram_index.locomo import Scores, load
from engram_index.locomo_faces import import_garden, serve, wait_loaded
from machine import print_machine

ASKED = (("kindgi", "both"), ("kindgi", "keyword"), ("garden.engram", "hybrid"), ("garden.engram", "keyword"),
         ("supermemory", "hybrid"), ("supermemory", "chunks"), ("supermemory", "memories"))


def main() -> None:
    """Print R@5/R@10/R@20 per face and mode with the flag at each value (False, then True unless told)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--flag", required=True, help="module.NAME under engram_index, e.g. ranking.NEXT_CONTEXT")
    ap.add_argument("--values", default="False,True", help="comma-separated Python literals to set it to")
    ap.add_argument("--faces", default="kindgi,garden.engram", help="comma-separated: kindgi, garden.engram, supermemory")
    args = ap.parse_args()
    print_machine()
    values = [ast.literal_eval(v) for v in args.values.split(",")]
    asked = [(face, mode) for face, mode in ASKED if face in args.faces.split(",")]
    module_name, _, flag = args.flag.rpartition(".")
    module = importlib.import_module(f"engram_index.{module_name}")
    convs = load(args.data_dir)
    questions = [q for c in convs for q in c.questions]
    embedder = MiniLMEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        if any(face == "garden.engram" for face, _ in asked):
            import_garden(Path(tmp), convs, embedder)
        with serve(Path(tmp), embedder) as served:
            for conv in convs if any(face == "kindgi" for face, _ in asked) else ():
                served.write_kindgi(conv, lambda _n: None)
            for conv in convs if any(face == "supermemory" for face, _ in asked) else ():
                served.write_v5(conv, lambda _n: None)
            if any(face == "garden.engram" for face, _ in asked):
                wait_loaded(served, convs)
            for value in values:
                setattr(module, flag, value)
                for face, mode in asked:
                    scores = Scores()
                    for q in questions:
                        scores.add(served.ask(face, mode, q), q)
                    t = scores.table()
                    print(f"{args.flag}={value} {face} {mode} R@5 {t['R@5']:.3f} R@10 {t['R@10']:.3f} "
                          f"R@20 {t['R@20']:.3f}", flush=True)


if __name__ == "__main__":
    main()
