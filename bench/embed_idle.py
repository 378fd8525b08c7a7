"""What one query's forward pass costs after the thread was idle: why a served embedding is slower than alone.

The faces' benches divide a served p50 by the engine's and the embedding's in-process p50s, which
are measured back to back: each pass right after the one before, the core busy and its caches
holding the last pass's weights. A served request comes after a gap (the client's round trip, the
next request's reading), so its pass starts on a core that idled or did other work. This times the
int8 all-MiniLM-L6-v2 pass (thread CPU, SciFact queries, tokenised beforehand) after each kind of
gap, the kinds alternating within each round so that all meet the same machine: none, a 2 ms
busy spin (the core stays busy, its caches mostly kept), a 64 MB read (the caches lose the
weights), a 2 ms and a 20 ms sleep (the core may idle). Prints the median per kind, per round; then
the Python around a query's pass the same way (back to back, after a 2 ms sleep): tokenising it and
finishing its vector (`embed.base.finish`: checked, normalised, rounded through float16), and a
whole query's embedding (wall time) by `embed_queries`, which takes one text straight to its pass,
and by the batch path it took before (`_embed`: a batch plan and pooling weights), alternating.

    python bench/embed_idle.py [--rounds 3] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from machine import print_machine  # noqa: E402

from engram_index.embed.base import finish  # noqa: E402
from engram_index.embed.local import MiniLMEmbedder  # noqa: E402

_BIG = np.random.default_rng(0).random(8_000_000)  # 64 MB: more than the caches hold


def _spin(seconds: float = 0.002) -> None:
    """Stay busy for `seconds`."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


GAPS: dict[str, Callable[[], object]] = {
    "none (back to back)": lambda: None,
    "2 ms busy spin": _spin,
    "64 MB read": lambda: _BIG.sum(),
    "2 ms sleep": lambda: time.sleep(0.002),
    "20 ms sleep": lambda: time.sleep(0.02),
}


def main() -> None:
    """Print the table."""
    shared = Path(os.environ.get("ENGRAM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    print_machine()
    model = MiniLMEmbedder(int8=True)
    texts = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()][: args.queries]
    ids = [enc.ids for enc in model._tokenizer.encode_batch(texts, add_special_tokens=True)]
    for row in ids[:20]:  # warm: the session's first passes allocate
        model.forward([row])
    print(f"\nint8 forward pass, thread CPU ms p50 over {len(ids)} queries, after each gap "
          f"(load average {os.getloadavg()[0]:.1f} at start)\n")
    print("| round | " + " | ".join(GAPS) + " |")
    print("|---:|" + "---:|" * len(GAPS))
    for r in range(1, args.rounds + 1):
        cpu: dict[str, list[float]] = {name: [] for name in GAPS}
        for row in ids:
            for name, gap in GAPS.items():
                gap()
                began = time.thread_time()
                model.forward([row])
                cpu[name].append((time.thread_time() - began) * 1000)
        print(f"| {r} | " + " | ".join(f"{statistics.median(v):.2f}" for v in cpu.values()) + " |")
    raw = model.forward([ids[0]])
    steps: dict[str, Callable[[str], object]] = {
        "tokenise one query": lambda text: model._tokenizer.encode_batch([text], add_special_tokens=True),
        "finish its vector": lambda text: finish(raw, model.identity.dims, 1),
        "embed one query, the batch path (`_embed`)": lambda text: model._embed([text], "query"),
        "embed one query, `embed_queries`": lambda text: model.embed_queries([text]),
    }
    befores: dict[str, Callable[[], object]] = {"none": lambda: None, "sleep": lambda: time.sleep(0.002),
                                                "read": GAPS["64 MB read"]}
    print("\n| the pass's Python, and whole embeddings, µs p50 | back to back | after a 2 ms sleep | after a 64 MB read |"
          "\n|---|---:|---:|---:|")
    times: dict[str, dict[str, list[float]]] = {name: {kind: [] for kind in befores} for name in steps}
    for text in texts:  # every step after every gap, in turn: all meet the same machine
        for kind, before in befores.items():
            for name, step in steps.items():
                before()
                began = time.perf_counter()
                step(text)
                times[name][kind].append((time.perf_counter() - began) * 1e6)
    for name, kinds in times.items():
        print(f"| {name} | " + " | ".join(f"{statistics.median(v):.0f}" for v in kinds.values()) + " |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
