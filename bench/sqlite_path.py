"""The embedded (SQLite) path's own speed: one-memory writes a second and a keyword search's time.

Run at two revisions (e.g. before and after a store change, each on its own checkout with its
kernels built), alternating, to see whether the default path moved:

    python bench/sqlite_path.py [--writes 500] [--searches 300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent / "src"))

from engram_index.collections import Collections  # noqa: E402
from engram_index.engine.types import Document, SearchRequest  # noqa: E402
from engram_index.store.sqlite import StoredDocument  # noqa: E402
from machine import print_machine  # noqa: E402

URI = "at://did:plc:bench234bench234bench234be/space/garden.engram.space/s"


def main() -> None:
    """Time the writes, then the searches, on a fresh data directory."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writes", type=int, default=500)
    parser.add_argument("--searches", type=int, default=300)
    args = parser.parse_args()
    print_machine()
    with tempfile.TemporaryDirectory(prefix="engram-sqlite-path-") as tmp:
        spaces = Collections(Path(tmp))
        spaces.ensure_collection(URI)
        spaces.index(URI)
        began = time.perf_counter()
        for i in range(args.writes):
            spaces.write(URI, [StoredDocument(Document(id=f"m{i}", author="did:plc:a",
                                                       text=f"harbour lantern note {i}", created_ms=i))])
        writes_s = args.writes / (time.perf_counter() - began)
        began = time.perf_counter()
        for _ in range(args.searches):
            spaces.search(URI, SearchRequest(q="harbour note", mode="keyword"))
        search_ms = (time.perf_counter() - began) / args.searches * 1000
        spaces.close()
    print(f"writes/s {writes_s:.0f}  keyword search ms {search_ms:.2f}")


if __name__ == "__main__":
    main()
