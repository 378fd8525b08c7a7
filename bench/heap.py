"""Where a face's resident memory goes under the fuzzer: Python heap, allocator free pages, or neither.

Serves a face as tests/reliability does, but through bench/heap_hooks.py; runs its fuzz rounds
for --seconds, sampling the anonymous resident memory; then reads the Python heap (tracemalloc,
with --trace: slower; its highest since the last reading too) and the anonymous memory again after a malloc_trim. Memory that a trim
gives back was freed and kept by the allocator; memory the Python heap holds is objects; the rest
is native memory in use (indexes, SQLite caches).

    python bench/heap.py --face kindgi --seconds 60 [--trace]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.reliability import fuzzkit  # noqa: E402
from tests.reliability.faces import FACES  # noqa: E402
from tests.reliability.fuzzkit import Tally, fuzz, rounds  # noqa: E402


def anon_mb(pid: int) -> float:
    """A process's anonymous resident memory (heap, not mapped files) in MB."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) / 1024
    return 0.0


def python_heap(pid: int, out: Path) -> str:
    """The served process's traced Python heap, in MB (or "not traced")."""
    before = out.read_text().count("\n") if out.exists() else 0
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not out.exists() or out.read_text().count("\n") == before):
        time.sleep(0.1)
    size, peak = map(float, out.read_text().splitlines()[-1].split())
    return "not traced" if size < 0 else f"{size:.0f} MB (highest before: {peak:.0f} MB)"


def main() -> None:
    """Fuzz one face, sampling its memory, and print where it went."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--face", choices=sorted(FACES), default="kindgi")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--trace", action="store_true", help="Trace the Python heap (tracemalloc).")
    args = parser.parse_args()
    face = FACES[args.face]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "python-heap"
        os.environ["ENGRAM_HEAP_OUT"] = str(out)
        if args.trace:
            os.environ["ENGRAM_HEAP_TRACE"] = "1"
        fuzzkit.SERVER[:] = [sys.executable, str(ROOT / "bench" / "heap_hooks.py")]
        with face.serve(Path(tmp) / "data") as served:
            calls = Tally()
            fuzz(face, served, Tally(), examples=50, seed=1)
            start, heap_start = anon_mb(served.pid), python_heap(served.pid, out)
            samples = [start]
            for _ in rounds(args.seconds, 200):
                fuzz(face, served, calls, examples=100)
                samples.append(anon_mb(served.pid))
            heap_end = python_heap(served.pid, out)
            end = anon_mb(served.pid)
            os.kill(served.pid, signal.SIGUSR2)
            time.sleep(2)
            trimmed = anon_mb(served.pid)
    print(f"\n### memory: face {face.name}, {args.seconds:.0f} s, {calls.requests} calls\n")
    print("| reading | anonymous resident MB | Python heap |")
    print("|---|---:|---:|")
    print(f"| after warm-up | {start:.0f} | {heap_start} |")
    print(f"| highest sample (one per 100 calls) | {max(samples):.0f} | |")
    print(f"| at the end | {end:.0f} | {heap_end} |")
    print(f"| after malloc_trim(0) | {trimmed:.0f} | |")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
