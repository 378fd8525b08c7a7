"""LoCoMo dev vector-only R@k with each turn embedded as different texts: what in garden.engram's
embedded text (`embed_text`: the text, then `Tags: speaker:X, session:N`) lifts recall.

Each turn is embedded (all-MiniLM-L6-v2) as its text alone, or with one set of tags; every
answerable question is embedded whole and ranks its conversation's turns by cosine (exact).
The tags stand for what each face's write carries: garden.engram's tags, a Kindgi fact's type and
subjects, a v5 document's metadata.

    .venv/bin/python bench/locomo_embed_text.py --data-dir ../shared/data/locomo-dev [--only plain,...]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from engram_index.embed.local import MiniLMEmbedder
from engram_index.embed.text import embed_text
from engram_index.locomo import Turn, load, recall_at


def _day(t: Turn) -> str:
    """The session's date, as a day."""
    return datetime.fromtimestamp(t.date_ms / 1000, timezone.utc).strftime("%Y-%m-%d")


VARIANTS: dict[str, Callable[[Turn], str]] = {
    "plain": lambda t: t.text,
    "blank line only": lambda t: t.text + "\n\n",
    "tags: turn (structure only)": lambda t: embed_text("", t.text, ["turn"]),
    "speaker": lambda t: embed_text("", t.text, [f"speaker:{t.speaker}"]),
    "session": lambda t: embed_text("", t.text, [f"session:{t.session}"]),
    "date": lambda t: embed_text("", t.text, [f"date:{_day(t)}"]),
    "garden: speaker, session": lambda t: embed_text("", t.text, [f"speaker:{t.speaker}", f"session:{t.session}"]),
    "kindgi: subject": lambda t: embed_text("", t.text, [f"participant:{t.speaker}"]),
    "kindgi: type, subject": lambda t: embed_text("", t.text, ["type:turn", f"participant:{t.speaker}"]),
    "kindgi: type, subject, observed": lambda t: embed_text("", t.text, ["type:turn", f"participant:{t.speaker}",
                                                                         f"observedAt:{_day(t)}"]),
    "v5: metadata": lambda t: embed_text("", t.text, [f"diaId:{t.dia_id}", f"speaker:{t.speaker}",
                                                      f"session:{t.session}"]),
    "v5: metadata, date": lambda t: embed_text("", t.text, [f"diaId:{t.dia_id}", f"speaker:{t.speaker}",
                                                            f"session:{t.session}", f"date:{_day(t)}"]),
}


def main() -> None:
    """Print R@5/R@10/R@20 of vector-only retrieval for each embedded text."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    args = ap.parse_args()
    convs = load(args.data_dir)
    emb = MiniLMEmbedder()
    questions = [q for c in convs for q in c.questions]
    qv = emb.embed_queries([q.text for q in questions])
    ids = {c.name: [t.dia_id for t in c.turns] for c in convs}
    for name in [n for n in args.only.split(",") if n] or list(VARIANTS):
        text_of = VARIANTS[name]
        vecs = {c.name: emb.embed_documents([text_of(t) for t in c.turns]) for c in convs}
        sums = dict.fromkeys((5, 10, 20), 0.0)
        for n, q in enumerate(questions):
            order = np.argsort(-(vecs[q.conversation] @ qv[n]), kind="stable")[:20]
            found = [ids[q.conversation][i] for i in order]
            for k in sums:
                sums[k] += recall_at(found, q.evidence, k)
        print(f"{name:34} " + " ".join(f"R@{k} {v / len(questions):.3f}" for k, v in sums.items()), flush=True)


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
