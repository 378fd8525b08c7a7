"""What a start costs the int8 all-MiniLM-L6-v2: quantizing the graph (no cache) against reading the cached bytes.

Each round starts the int8 embedder twice in a fresh cache folder: first with the folder empty (the
graph is quantized from the verified weights and written there), then with the file present (read
back and checked against the pinned digest). Prints process CPU and wall seconds per start.

    python bench/int8_start.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from engram_index.embed.local import MiniLMEmbedder  # noqa: E402


def start(cache: Path) -> tuple[float, float]:
    """Process CPU and wall seconds of one int8 embedder start with `cache` as its cache folder."""
    cpu, wall = time.process_time(), time.perf_counter()
    MiniLMEmbedder(int8=True, cache_dir=cache).close()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    runs: dict[str, list[tuple[float, float]]] = {"quantized (no cache)": [], "cached bytes read": []}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            runs["quantized (no cache)"].append(start(Path(tmp)))
            runs["cached bytes read"].append(start(Path(tmp)))
    print("\n| int8 start | CPU s p50 | wall s p50 |\n|---|---:|---:|")
    for name, got in runs.items():
        print(f"| {name} | {statistics.median(c for c, _ in got):.2f} | {statistics.median(w for _, w in got):.2f} |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from machine import print_machine

    print_machine()
    main()
