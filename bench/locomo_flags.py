"""LoCoMo dev R@k of garden.engram and Kindgi with a ranking flag off and on, from one load.

The faces are served in this process (locomo_faces.serve), so a module flag flipped here is the
served code's. Measures levers before `engram-index eval locomo` confirms them:

    .venv/bin/python bench/locomo_flags.py --data-dir ../shared/data/locomo-dev --flag ranking.NEXT_CONTEXT
"""

from __future__ import annotations

import argparse
import importlib
import tempfile
from pathlib import Path

from engram_index.embed.local import MiniLMEmbedder
from engram_index.locomo import Scores, load
from engram_index.locomo_faces import import_garden, serve, wait_loaded

ASKED = (("kindgi", "both"), ("kindgi", "keyword"), ("garden.engram", "hybrid"), ("garden.engram", "keyword"))


def main() -> None:
    """Print R@5/R@10/R@20 per face and mode with the flag False, then True."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--flag", required=True, help="module.NAME under engram_index, e.g. ranking.NEXT_CONTEXT")
    args = ap.parse_args()
    module_name, _, flag = args.flag.rpartition(".")
    module = importlib.import_module(f"engram_index.{module_name}")
    convs = load(args.data_dir)
    questions = [q for c in convs for q in c.questions]
    embedder = MiniLMEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        import_garden(Path(tmp), convs, embedder)
        with serve(Path(tmp), embedder) as served:
            for conv in convs:
                served.write_kindgi(conv, lambda _n: None)
            wait_loaded(served, convs)
            for value in (False, True):
                setattr(module, flag, value)
                for face, mode in ASKED:
                    scores = Scores()
                    for q in questions:
                        scores.add(served.ask(face, mode, q), q)
                    t = scores.table()
                    print(f"{args.flag}={value} {face} {mode} R@5 {t['R@5']:.3f} R@10 {t['R@10']:.3f} "
                          f"R@20 {t['R@20']:.3f}", flush=True)


if __name__ == "__main__":
    main()
