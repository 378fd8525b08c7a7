"""Where a Kindgi `both` retrieve's thread CPU goes, step by step: bench/profile_faces.py with timers.

Wraps the retrieve's steps (the searches, the keyword leg's context, the cross-leg rankings and the
fusion of kindgi/ranked.py, the facts' bodies, the route's checks) with thread-CPU accumulators, runs `profile_faces.py --face kindgi`
(every hop inline, so one thread's CPU covers the request) with the arguments given after `--`,
and prints each step's inclusive CPU per retrieve. `--src` picks the checkout whose code runs.

    python bench/retrieve_parts.py [--src DIR] -- --data DIR/n100000 [--requests 200]
"""

from __future__ import annotations

import argparse
import atexit
import collections
import importlib
import runpy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
STEPS = [("engram_index.kindgi.retrieve", "Retriever", n)
         for n in ("answer", "_keyword_leg", "_fused", "_semantic_leg")] + [
    ("engram_index.kindgi.ranked", None, n) for n in ("by_words", "by_meaning", "stable", "fused")] + [
    ("engram_index.kindgi.retrieve", None, "keyword_in_context"), ("engram_index.kindgi.retrieve", None, "content_query"),
    ("engram_index.kindgi.facts", "Facts", "retrievable"), ("engram_index.engine.search", "SpaceIndex", "search"),
    ("engram_index.engine.keyword", "KeywordIndex", "word_scores"), ("engram_index.embed.query_cache", "QueryCache", "vector"),
    ("engram_index.kindgi.idempotency", "Idempotency", "begin"), ("engram_index.kindgi.routes", None, "authenticate")]
spent: collections.Counter[str] = collections.Counter()
calls: collections.Counter[str] = collections.Counter()


def timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, adding its thread CPU to `spent[label]`."""
    def run(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += time.thread_time_ns() - began
            calls[label] += 1
    return run


def report() -> None:
    """Each step's inclusive thread CPU per retrieve, costliest first."""
    n = calls["Retriever.answer"] or 1
    print(f"code of {Path(sys.modules['engram_index'].__file__ or '').parents[2]}")
    print("| step | µs per retrieve | calls per retrieve |\n|---|---:|---:|")
    for label, ns in spent.most_common():
        print(f"| {label} | {ns / n / 1000:.0f} | {calls[label] / n:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=_HERE.parent, help="the checkout whose code runs")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- then profile_faces.py's arguments")
    args = parser.parse_args()
    sys.path.insert(0, str(args.src / "src"))
    for module, owner, name in STEPS:
        holder = importlib.import_module(module)
        target = getattr(holder, owner) if owner else holder
        setattr(target, name, timed(f"{owner}.{name}" if owner else name, getattr(target, name)))
    atexit.register(report)
    rest = [a for a in args.rest if a != "--"]
    sys.argv = [str(_HERE / "profile_faces.py"), "--face", "kindgi", *rest]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
