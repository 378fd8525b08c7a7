"""What a v5 chunk's or memory's embedded text carries of its document's metadata, and memories in context.

`pipeline.METADATA_WORDS_ONLY` on (the default): only metadata values that are words (a string with
a letter, under a key that does not name an identifier); off: every string and number, as before.
With words only, the memories are also asked without and with their conversation context
(`search.MEMORY_CONTEXT`, the default on), from the same data.
The embedded text is fixed at write time, so each setting writes its own data: LoCoMo dev (one
document per turn, metadata `diaId`, `speaker`, `session`, served in this process as
`engram-index eval locomo` serves it) and SciFact through the official SDK (`bench/v5_scifact.py`'s
run: metadata `{"scifact": "<its id>"}`), each mode of each.

    python bench/v5_embedded_text.py [--skip-scifact] [--queries 300]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from machine import print_machine  # noqa: E402
from v5_scifact import run as scifact_run  # noqa: E402

from engram_index.embed.local import MiniLMEmbedder  # noqa: E402
from engram_index.locomo import Scores, load  # noqa: E402
from engram_index.locomo_faces import serve  # noqa: E402
from engram_index.supermemory import pipeline, search  # noqa: E402

MODES = ("hybrid", "chunks", "memories")
# (metadata words only, memories in context): the metadata is fixed at write, the context at search
SETTINGS = ((False, False), (True, False), (True, True))


def locomo(data_dir: Path, contexts: Sequence[bool]) -> list[dict[str, float]]:
    """LoCoMo dev R@10 of each v5 mode, written under the current metadata setting, asked with memories
    in context or not (each of `contexts`)."""
    convs = load(data_dir)
    out: list[dict[str, float]] = []
    # (an embedder of its own: a server closes its embedder when it stops)
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp), MiniLMEmbedder()) as served:
        for conv in convs:
            served.write_v5(conv, lambda _n: None)
        for in_context in contexts:
            search.MEMORY_CONTEXT = in_context
            recall: dict[str, float] = {}
            for mode in MODES:
                scores = Scores()
                for conv in convs:
                    for q in conv.questions:
                        scores.add(served.ask("supermemory", mode, q), q)
                recall[mode] = scores.table()["R@10"]
            out.append(recall)
    return out


def main() -> None:
    """Print one row per setting."""
    shared = Path(os.environ.get("ENGRAM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--locomo", type=Path, default=shared / "data" / "locomo-dev")
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--skip-scifact", action="store_true")
    args = parser.parse_args()
    print_machine()
    rows: list[tuple[bool, bool, dict[str, float], dict[str, float]]] = []
    for words_only in (False, True):
        pipeline.METADATA_WORDS_ONLY = words_only
        contexts = [c for w, c in SETTINGS if w == words_only]
        recalls = locomo(args.locomo, contexts)
        ndcgs: list[dict[str, float]] = [{} for _ in contexts]
        if not args.skip_scifact:
            setters = [functools.partial(setattr, search, "MEMORY_CONTEXT", c) for c in contexts]
            for r in scifact_run(args.scifact, "auto", list(MODES), args.queries, setters):
                ndcgs[int(str(r["asked"]))][str(r["mode"])] = float(str(r["ndcg@10"]))
        for in_context, recall, ndcg in zip(contexts, recalls, ndcgs):
            rows.append((words_only, in_context, recall, ndcg))
            print(f"words only {words_only}, memories in context {in_context}: LoCoMo {recall}, SciFact {ndcg}",
                  file=sys.stderr, flush=True)
    print("\n| metadata embedded | memories in context | LoCoMo R@10 hybrid / chunks / memories |"
          " SciFact nDCG@10 hybrid / chunks / memories |")
    print("|---|---|---|---|")
    for words_only, in_context, recall, ndcg in rows:
        label = "words only" if words_only else "every string and number (before)"
        sci = " / ".join(f"{ndcg[m]:.4f}" for m in MODES) if ndcg else "—"
        print(f"| {label} | {'yes' if in_context else 'no'} | {' / '.join(f'{recall[m]:.3f}' for m in MODES)} | {sci} |")


if __name__ == "__main__":
    main()
