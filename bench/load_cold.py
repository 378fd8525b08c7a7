"""How long a collection's index takes to load on its first use in a process: after a start, or after
the collection was evicted (`serve --max-collections`).

Opens a data directory filled by bench/v5.py or bench/retrieve.py (`--data DIR`; give it a copy: a load
saves the keyword index's term counts) and, in `--rounds` fresh processes one after another, loads the
largest collections (`--collections`, by records held) one by one, timing each load's wall and process
CPU. The first round also finds pages the operating system has not cached yet; the median is over all
rounds. `--src` picks the checkout whose code runs.

    python bench/load_cold.py --data DIR [--rounds 5] [--collections 2] [--src CHECKOUT]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))

from in_process import parsed  # noqa: E402

# One fresh process: the collections' loads, timed, as JSON (the checkout's code first on the path).
_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from engram_index.collections import Collections
spaces = Collections(Path(sys.argv[2]))
try:
    out = {}
    for uri in json.loads(sys.argv[3]):
        wall, cpu = time.perf_counter(), time.process_time()
        records = len(spaces.index(uri))
        out[uri] = [records, (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000]
    print(json.dumps(out))
finally:
    spaces.close()
"""


def largest(data: Path, n: int) -> list[str]:
    """The `n` collections holding the most records (the checkout's code is first on the path: `parsed`)."""
    from engram_index.collections import Collections

    spaces = Collections(data)
    try:
        sizes = {uri: spaces.store.count(spaces.store.collection(uri).id) for uri in spaces.store.collections()}
    finally:
        spaces.close()
    return sorted(sizes, key=lambda uri: -sizes[uri])[:n]


def main() -> None:
    """Load the collections in fresh processes and print the table."""
    args = parsed(__doc__, rounds=5, collections=2)
    uris = largest(args.data, args.collections)
    runs: dict[str, list[list[float]]] = {uri: [] for uri in uris}
    for _ in range(args.rounds):
        done = subprocess.run([sys.executable, "-c", _CHILD, str(args.src / "src"), str(args.data), json.dumps(uris)],
                              capture_output=True, text=True, check=True)
        for uri, timed in json.loads(done.stdout.strip().splitlines()[-1]).items():
            runs[uri].append(timed)
    print(f"\n`{args.src.resolve().name}`'s code; {args.rounds} fresh processes\n")
    print("| collection | records | load wall p50 ms | load CPU p50 ms | first round's wall ms |\n|---|---:|---:|---:|---:|")
    for uri, timed in runs.items():
        print(f"| {uri} | {int(timed[0][0]):,} | {statistics.median(t[1] for t in timed):.0f} |"
              f" {statistics.median(t[2] for t in timed):.0f} | {timed[0][1]:.0f} |")


if __name__ == "__main__":
    main()
