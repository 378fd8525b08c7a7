"""The v5 search's `whyFewer`: its namespace, filter and threshold mapped onto the shared explanation."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from engram_index.engine.types import Filters
from engram_index.shortfall import Condition, Gathered, Target
from engram_index.shortfall import gather as shortfall_gather
from engram_index.supermemory.face import EXPIRED, FORGOTTEN, SUPERSEDED, Face
from engram_index.supermemory.tables import chunks_collection, memories_collection

MAX_FILTER_NAME = 200  # characters of the filter expression quoted in the explanation


class Scored(Protocol):
    """A candidate as the search scored it."""

    kind: str
    id: str

    @property
    def similarity(self) -> float:
        """Its 0-1 score."""
        ...


def threshold_cut(pool: Sequence[Sequence[Scored]], threshold: float) -> int:
    """How many found candidates (each once, at its best score) the threshold removed."""
    best: dict[tuple[str, str], float] = {}
    for cands in pool:
        for cand in cands:
            key, score = (cand.kind, cand.id), cand.similarity  # (its score worked out once)
            held = best.get(key)
            if held is None or score > held:
                best[key] = score
    return sum(1 for score in best.values() if score < threshold)


def explain(face: Face, ns: str, body: dict[str, Any], *, flt: Filters, nothing: bool, cut: int,
            returned: int, gathered: Gathered | None = None) -> dict[str, Any]:
    """Why a v5 search of `ns` answered `returned` results, fewer than its limit, `cut` of its candidates
    below its threshold (threshold_cut); `gathered`: what `gather` read already."""
    if gathered is None:
        gathered = gather(face, ns, body, flt=flt, nothing=nothing)
    return gathered.explained(returned, cut)


def gather(face: Face, ns: str, body: dict[str, Any], *, flt: Filters, nothing: bool) -> Gathered:
    """What `explain` reads of the namespace, whatever the search's results."""
    mode = body.get("searchMode", "hybrid")
    hidden = (SUPERSEDED,) if body.get("include", {}).get("forgotten") else (SUPERSEDED, FORGOTTEN, EXPIRED)
    targets = []
    if mode in ("hybrid", "memories"):
        targets.append(Target(memories_collection(ns), Filters(none_tags=hidden)))
    if mode in ("hybrid", "chunks"):
        targets.append(Target(chunks_collection(ns)))
    conditions: list[Condition] = []
    name = None
    if body.get("filter") is not None:
        name = "filter=" + json.dumps(body["filter"], separators=(",", ":"), ensure_ascii=False)[:MAX_FILTER_NAME]
        if not nothing:
            conditions.append(Condition(name, flt))
    return shortfall_gather(face.collections, ns, targets, conditions=conditions, pending=face.unfinished(ns),
                            none_pass=name if nothing else None)
