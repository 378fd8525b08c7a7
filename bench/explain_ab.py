"""Explained hybrid searches, another checkout's explainer against this one's, alternating search by search.

Opens (or builds, --data) the synthetic space bench/peers.py loads for engram-index and loads a second
copy of the explainer from another checkout's `src` (--base: its engine/explain.py and
engine/termfind.py, and its compiled _kernels built in place), beside this checkout's, in one
process: the search path, the indexes and the analyzer's caches are shared, only the explainer
differs. Every hit of the 300 hybrid top-10 searches (without and with the commonest tag) is
explained by both first, and the explanations that differ are counted (none may). Then per round,
search by search in alternating order: the search with the base's explainer, with this one's, and
without explanations (thread CPU of each, and of the explanations inside it); and the explanations
alone over the captured hits, the base's and this one's by turns. Prints the CPU model and the
medians over the rounds of each round's median (searches) or mean (explanations) in ms.

    python bench/explain_ab.py --n 10000 --data DIR --base OTHER/src [--rounds 5]
"""

from __future__ import annotations

import importlib.util
import sys
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from synthetic_space import open_space, options  # noqa: I001 (first: the path to this checkout's src)

from engram_index.engine import explain as this_explain
from engram_index.engine import search as engine_search
from engram_index.engine.keyword_query import searchable_words
from engram_index.engine.types import Filters, SearchRequest


def load_explainer(src: Path, package: str = "base_engine") -> Any:
    """The explain module of another checkout, with its own termfind and compiled kernels, as `package`.explain."""
    engine = src / "engram_index" / "engine"
    root = types.ModuleType(package)
    root.__path__ = []
    sys.modules[package] = root
    spec = importlib.util.spec_from_file_location(f"{package}._kernels", next(engine.glob("_kernels*.so")))
    assert spec is not None and spec.loader is not None
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    sys.modules[f"{package}._kernels"] = kernels
    for name in ("termfind", "explain"):  # the analyzer and the types stay this checkout's (shared caches)
        path = engine / f"{name}.py"
        code = path.read_text().replace("from engram_index.engine import _kernels", f"from {package} import _kernels")
        code = code.replace("from engram_index.engine.termfind import", f"from {package}.termfind import")
        module = types.ModuleType(f"{package}.{name}")
        module.__file__ = str(path)
        sys.modules[f"{package}.{name}"] = module
        exec(compile(code, str(path), "exec"), module.__dict__)
    return sys.modules[f"{package}.explain"]


def explained(explainer: Callable[[Any], Any], words: Sequence[Any], docs: Sequence[Any]) -> list[Any]:
    """One search's explanations of its hits, as SpaceIndex._explain makes them."""
    one = explainer(searchable_words(words))
    return [one.explain(doc.text, doc.tags, doc.source) for doc in docs]


def main() -> None:
    """Check that both explainers answer alike, then time them in turns."""
    parser = options(__doc__)
    parser.add_argument("--base", type=Path, required=True, help="the other checkout's src")
    args = parser.parse_args()
    work, spaces, index = open_space(args)
    explainers = {"base": load_explainer(args.base).Explainer, "this": this_explain.Explainer}
    with_tag = [Filters(), Filters(tags=(work.tag,))]
    requests = {explain: [SearchRequest(mode="hybrid", q=text, vector=vector, limit=10, explain=explain, filters=f)
                          for f in with_tag for text, vector in zip(work.query_texts, work.query_vectors)]
                for explain in (True, False)}
    captured: list[tuple[Any, list[Any]]] = []
    inner = index._explain
    spent = [0]

    def explain_hits(hits: list[Any], words: Any) -> None:
        """Explain as the search does, keeping the hits and the thread CPU it took."""
        captured.append((words, [hit.document for hit in hits]))
        began = time.thread_time_ns()
        inner(hits, words)
        spent[0] += time.thread_time_ns() - began

    index._explain = explain_hits
    for req in requests[True]:  # warm: the analyzer's caches, the pages; and the hits to compare
        index.search(req)
    hits = captured[:]
    differ = sum(explained(explainers["base"], words, docs) != explained(explainers["this"], words, docs)
                 for words, docs in hits)
    print(f"explanations compared: {len(hits)} searches' hits, {differ} explained differently")
    searches: dict[str, list[float]] = {"base": [], "this": [], "none": []}
    inside: dict[str, list[float]] = {"base": [], "this": []}
    alone: dict[str, list[float]] = {"base": [], "this": []}
    for round_ in range(args.rounds):
        cpu: dict[str, list[int]] = {name: [] for name in searches}
        within = {name: 0 for name in inside}
        for i, (explain_req, plain_req) in enumerate(zip(requests[True], requests[False])):
            order = ["base", "this", "none"] if (i + round_) % 2 == 0 else ["none", "this", "base"]
            for name in order:
                setattr(engine_search, "Explainer", explainers.get(name, this_explain.Explainer))
                spent[0] = 0
                began = time.thread_time_ns()
                index.search(plain_req if name == "none" else explain_req)
                cpu[name].append(time.thread_time_ns() - began)
                if name in within:
                    within[name] += spent[0]
        captured.clear()
        totals = {name: 0 for name in alone}
        for i, (words, docs) in enumerate(hits):
            for name in (("base", "this") if (i + round_) % 2 == 0 else ("this", "base")):
                began = time.thread_time_ns()
                explained(explainers[name], words, docs)
                totals[name] += time.thread_time_ns() - began
        for name, samples in cpu.items():
            searches[name].append(float(np.median(samples)) / 1e6)
        for name in inside:
            inside[name].append(within[name] / len(hits) / 1e6)
            alone[name].append(totals[name] / len(hits) / 1e6)
    setattr(engine_search, "Explainer", this_explain.Explainer)
    index._explain = inner
    m = {name: float(np.median(v)) for name, v in searches.items()}
    e = {name: float(np.median(v)) for name, v in inside.items()}
    a = {name: float(np.median(v)) for name, v in alone.items()}
    print(f"{len(hits)} hybrid top-10 searches, {args.rounds} rounds; thread CPU ms, medians over the rounds:")
    print(f"  search with explanations (median): base {m['base']:.3f}, this {m['this']:.3f} "
          f"({m['this'] / m['base']:.3f}x); without explanations {m['none']:.3f}")
    print(f"  explanations inside the searches (mean): base {e['base']:.3f}, this {e['this']:.3f} "
          f"({e['this'] / e['base']:.3f}x)")
    print(f"  explanations alone over the same hits (mean): base {a['base']:.3f}, this {a['this']:.3f} "
          f"({a['this'] / a['base']:.3f}x)")
    spaces.close()


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
