"""The long fuzzing run by hand: a face's generated calls and malformed HTTP heads for a while.

The same generators and checks as tests/reliability/test_fuzz.py (the faces table in
tests/reliability/faces.py), in rounds of fresh random seeds until the time is up; prints a table
of what came back (statuses, error names), every violation (each shrunk to a small call by
hypothesis), whether the server is alive, and its RSS at the start and the end.

    python bench/fuzz.py --face engram --seconds 600 [--raw-share 0.2]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.reliability.faces import FACES  # noqa: E402
from tests.reliability.fuzzkit import Tally, alive, fuzz, fuzz_raw, rss_mb, rounds  # noqa: E402

ROUND = 200  # calls per hypothesis run; each round has a fresh seed


def main() -> None:
    """Fuzz one face for --seconds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--face", choices=sorted(FACES), default="engram")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--raw-share", type=float, default=0.2, help="Share of rounds that send raw HTTP heads.")
    args = parser.parse_args()
    face = FACES[args.face]
    calls, raw = Tally(), Tally()
    rng = random.Random()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, face.serve(Path(tmp)) as served:
        fuzz(face, served, Tally(), examples=50, seed=1)  # warm up before the first RSS reading
        rss_start = rss_mb(served.pid)
        for n in rounds(args.seconds, ROUND):
            raw_round = rng.random() < args.raw_share
            try:
                if raw_round:
                    fuzz_raw(face, served, raw, examples=ROUND // 4)
                else:
                    fuzz(face, served, calls, examples=ROUND)
            except AssertionError as exc:  # hypothesis shrank a violation: it is in the tally too
                (raw if raw_round else calls).violations.append(f"round {n}: {str(exc)[:500]}")
            if not alive(served, face.paths[-1]):
                break
        rss_end = rss_mb(served.pid)
        up = alive(served, face.paths[-1])
    elapsed = time.monotonic() - started
    print(f"\n### fuzz: face {face.name}, {elapsed:.0f} s\n")
    print("| what | requests | 2xx | 4xx | 5xx | violations |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, tally in (("contract calls", calls), ("malformed HTTP heads", raw)):
        by = {k: sum(v for s, v in tally.statuses.items() if s // 100 == k) for k in (2, 4, 5)}
        print(f"| {label} | {tally.requests} | {by[2]} | {by[4]} | {by[5]} | {len(set(tally.violations))} |")
    print(f"\nstatuses: {dict(sorted((calls.statuses + raw.statuses).items()))}")
    print(f"error names: {dict((calls.errors + raw.errors).most_common())}")
    print(f"server alive at the end: {up}; RSS {rss_start:.0f} MB after warm-up, {rss_end:.0f} MB at the end")
    for violation in sorted(set(calls.violations + raw.violations))[:30]:
        print(f"- {violation}")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
