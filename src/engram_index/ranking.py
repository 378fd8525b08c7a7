"""The ranking core every face shares: content words, stable tie-breaks, one place per source, rank fusion.

It knows no face. A face finds candidates through the engine, maps its own options (a
threshold, a search mode, filters) onto these steps and shapes its own response:

- `content_words`: the query words that say what is asked about. Question and function words
  ("what", "did", "I", "how") are in nearly every question and in many short turns of a
  conversation ("Cool! What did it look like?"), so a result holding them is no closer to the
  answer. `CONTENT_STOPWORDS` is the analyzer's own stopword list (which the index already
  leaves unstemmed) plus the question and function words of English questions; a query of
  nothing else keeps all its words.
- `stable_order`: best score first, ties by a key that two identical runs agree on (insertion
  order: the store's ordinal), never by a random id.
- `one_per_source`: a list never spends two places on one source (a memory and the chunk it
  came from): the better ranked one stays.
- `rrf`: reciprocal rank fusion, Σ 1/(k + rank) with 1-based ranks per leg, ties in the order
  the legs first found them (the first leg first).
docs/design/ranking.md has the measurements behind each step.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

import numpy as np

from engram_index.engine.analyzer import STOPWORDS, QueryWord
from engram_index.engine.search import SpaceIndex

T = TypeVar("T")

# English question and function words beyond the analyzer's list: interrogatives, auxiliaries,
# pronouns, determiners and prepositions that carry no topic of their own.
QUESTION_WORDS: frozenset[str] = frozenset(
    "what when where which who whom whose why how whats hows "
    "do does did done doing have has had having am were been being can could would should shall may might must "
    "i me my mine myself we us our ours you your yours he him his she her hers its they them theirs "
    "about from up down out over after before during since some any all each other both "
    "so than too very just also ever much many more most kind sort type get got".split()
)
CONTENT_STOPWORDS: frozenset[str] = STOPWORDS | QUESTION_WORDS


def content_words(words: Sequence[QueryWord]) -> list[QueryWord]:
    """The query's distinct content words (all its distinct words when it has none)."""
    seen: set[str] = set()
    out: list[QueryWord] = []
    kept = [w for w in words if w.exact not in CONTENT_STOPWORDS] or list(words)
    for word in kept:
        if word.exact not in seen:
            seen.add(word.exact)
            out.append(word)
    return out


def insertion_keys(index: SpaceIndex, ids: Sequence[str]) -> list[int]:
    """Each document's ordinal in its collection (its insertion order; unknown ids last)."""
    ords = index.columns.ids_to_ords(ids)
    big = np.iinfo(np.int64).max
    return [int(o) if o >= 0 else int(big) for o in ords]


def stable_order(items: Iterable[T], score: Callable[[T], float], key: Callable[[T], tuple[Hashable, ...]]) -> list[T]:
    """Best score first; equal scores by `key` (a stable, run-independent key such as insertion order)."""
    return sorted(items, key=lambda item: (-score(item), *key(item)))


def one_per_source(ranked: Iterable[T], source: Callable[[T], Hashable | None]) -> list[T]:
    """Keep the first (best) item of each source; items without a source all stay."""
    seen: set[Hashable] = set()
    out: list[T] = []
    for item in ranked:
        src = source(item)
        if src is not None:
            if src in seen:
                continue
            seen.add(src)
        out.append(item)
    return out


def rrf(legs: Sequence[Sequence[str]], k: int) -> list[tuple[str, float, dict[int, int]]]:
    """(id, Σ 1/(k + rank), {leg: rank}) best first; ties keep the order the legs first found them."""
    fused: dict[str, tuple[float, int, dict[int, int]]] = {}
    for leg, ids in enumerate(legs):
        for rank, item in enumerate(ids, 1):
            score, first, ranks = fused.get(item, (0.0, len(fused), {}))
            if leg in ranks:
                continue  # a leg counts an item once, at its best rank
            ranks[leg] = rank
            fused[item] = (score + 1.0 / (k + rank), first, ranks)
    best = sorted(fused.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
    return [(item, score, ranks) for item, (score, _, ranks) in best]
