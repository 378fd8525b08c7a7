"""garden.engram.getMemoryGraph: nearest neighbours among a space's most recent memories."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import regex
from starlette.requests import Request

from engram_index.endpoints import in_thread
from engram_index.engine.types import Document
from engram_index.engine.search import SpaceIndex
from engram_index.engine.vector import neighbor_pairs
from engram_index.errors import InvalidInput, NoModel
from engram_index.store.base import RecordStore
from engram_index.engram.views import memory_view, scaled_similarity
from engram_index.engram.api.spaces import loaded_index
from engram_index.engram.api.xrpc import checked_space

NSID = "garden.engram.getMemoryGraph"
DEFAULT_MIN_SIMILARITY = "0.4"
# Float32 cosines of equal directions can land a rounding step below 1: a threshold counts as met
# within this tolerance, far below the 0.001 steps of the similarities the response carries.
_TOLERANCE = 1e-6
# "0.4", "1", "1.0", ".5" are decimals; signs, exponents, spaces, nan and inf are not.
_DECIMAL = regex.compile(r"^(?:[01](?:\.[0-9]{1,9})?|\.[0-9]{1,9})$")


def parse_min_similarity(text: str) -> float:
    """A decimal in (0, 1], strictly; InvalidInput otherwise."""
    if not _DECIMAL.match(text):
        raise InvalidInput("minSimilarity must be a decimal in (0, 1], such as 0.4")
    value = Decimal(text)
    if not Decimal(0) < value <= Decimal(1):
        raise InvalidInput("minSimilarity must be greater than 0 and at most 1")
    return float(value)


def recent_with_vectors(store: RecordStore, space_id: int, index: SpaceIndex, limit: int) -> list[tuple[int, Document]]:
    """The `limit` most recent live memories whose vector the index holds, newest first."""
    out: list[tuple[int, Document]] = []
    before: tuple[int, str] | None = None
    batch = max(limit, 100)
    while len(out) < limit:
        rows = store.recent(space_id, batch, before=before, with_vector=True)
        # A stored vector the index refused (wrong size, not finite) is not a node.
        out.extend((o, d) for o, d in rows if index.has_vector(o))
        if len(rows) < batch:
            break
        before = (rows[-1][1].created_ms, rows[-1][1].id)
    return out[:limit]


def build_graph(
    store: RecordStore, space_id: int, index: SpaceIndex, limit: int, neighbors: int, min_similarity: float
) -> dict[str, Any]:
    """The graph's nodes (memory views) and edges (each unordered pair once)."""
    nodes = recent_with_vectors(store, space_id, index, limit)
    sims = index.pairwise([o for o, _ in nodes])
    pairs = neighbor_pairs(sims, neighbors, min_similarity - _TOLERANCE)
    # Edges name their memories by position in nodes, the smaller first (the published lexicon).
    return {
        "nodes": [memory_view(d) for _, d in nodes],
        "edges": [{"a": min(i, j), "b": max(i, j), "similarity": scaled_similarity(s)} for i, j, s in pairs],
    }


async def get_memory_graph(request: Request) -> dict[str, Any]:
    """Answer garden.engram.getMemoryGraph."""
    params, spaces, info = await checked_space(request, NSID)
    min_similarity = parse_min_similarity(params.get("minSimilarity", DEFAULT_MIN_SIMILARITY))
    if info.model is None:
        raise NoModel("the space's authority has not declared an embedding model")
    index = await loaded_index(spaces, info.uri)
    if index.vectors is None:
        raise NoModel("the space's index holds no vectors")
    return await in_thread(
        build_graph, spaces.store, info.id, index, params["limit"], params["neighbors"], min_similarity
    )
