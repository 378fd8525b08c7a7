"""garden.engram.getSpaceStatus: what this service holds of a space, in the published shape.

The published fields (config, active, building, memories, buildingMemories, skipped) come from
the record store; `access` (read by the reference client) and `sync` are extensions the
published object leaves room for, present for spaces kept current from the network.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from starlette.requests import Request

from engram_index.endpoints import in_thread
from engram_index.collections import Collections
from engram_index.engine.types import ModelIdentity
from engram_index.engram.records import format_datetime_ms
from engram_index.engram.syncstate import SyncState
from engram_index.engram.api.xrpc import checked_space
from engram_index.store.base import CollectionInfo

NSID = "garden.engram.getSpaceStatus"


def model_view(model: ModelIdentity) -> dict[str, Any]:
    """garden.engram.defs#model."""
    return {"model": model.model, "modelDigest": model.digest, "dims": model.dims}


def config_view(info: CollectionInfo) -> dict[str, Any]:
    """The space's garden.engram.config as this service holds it (its createdAt is not kept)."""
    assert info.model is not None
    out: dict[str, Any] = model_view(info.model)
    if info.document_prefix:
        out["documentPrefix"] = info.document_prefix
    if info.query_prefix:
        out["queryPrefix"] = info.query_prefix
    if info.next_model is not None:
        out["next"] = model_view(info.next_model)
    return out


def status(spaces: Collections, info: CollectionInfo) -> dict[str, Any]:
    """The status body of one space (blocking: SQLite reads)."""
    store = spaces.store
    skipped = Counter({(a, r): n for a, r, n in store.skipped(info.id)})
    # Stored vectors the loaded index left out (written before the entry checks refused such
    # vectors): reported with the skipped records, never a reason for the space to fail.
    index = spaces.loaded(info.uri)
    for author, reason, n in index.unusable_vectors() if index is not None else []:
        skipped[(author, reason)] += n
    out: dict[str, Any] = {
        "memories": store.count(info.id),
        "skipped": [{"author": a, "count": n, "reason": r} for (a, r), n in sorted(skipped.items())],
    }
    if info.model is not None:
        out["config"] = config_view(info)
        out["active"] = model_view(info.model)
    if info.next_model is not None:
        out["building"] = model_view(info.next_model)
        rows = store.query("SELECT count(*) FROM documents WHERE space_id=? AND deleted=0"
                           " AND next_vector IS NOT NULL", (info.id,))
        out["buildingMemories"] = int(rows[0][0])
    state = SyncState(store)
    if state.is_configured(info.uri):
        failed, invalid = state.problems(info.uri)
        problem, synced_ms = next(((p, ms) for s, p, ms in state.spaces() if s == info.uri), (None, 0))
        sync: dict[str, Any] = {"failedRepos": [{"repo": r, "problem": p} for r, p in failed]}
        if synced_ms:
            sync["syncedAt"] = format_datetime_ms(synced_ms)
        if problem:
            sync["problem"] = problem
            # Read before (some repo has a position): the access lapsed; never read: it is missing.
            out["access"] = {"state": "lapsed" if state.repos(info.uri) else "missing", "error": problem}
        elif synced_ms:
            out["access"] = {"state": "granted"}
        out["sync"] = sync
        out["skipped"] += [{"author": r, "count": n, "reason": f"not a valid memory: {p}"} for r, p, n in invalid]
    return out


async def get_space_status(request: Request) -> dict[str, Any]:
    """Answer garden.engram.getSpaceStatus."""
    _, spaces, info = await checked_space(request, NSID)
    return await in_thread(status, spaces, info)
