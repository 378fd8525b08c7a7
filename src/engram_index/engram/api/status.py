"""garden.engram.getSpaceStatus: what this service holds of a space, from the record store."""

from __future__ import annotations

from collections import Counter
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from engram_index.engram.records import format_datetime_ms
from engram_index.engram.syncstate import SyncState
from engram_index.engram.api.xrpc import checked_space

NSID = "garden.engram.getSpaceStatus"


async def get_space_status(request: Request) -> dict[str, Any]:
    """Answer garden.engram.getSpaceStatus: live count, declared model, skipped vectors by author."""
    _, spaces, info = await checked_space(request, NSID)
    count = await run_in_threadpool(spaces.store.count, info.id)
    skipped = Counter({(a, r): n for a, r, n in await run_in_threadpool(spaces.store.skipped, info.id)})
    # Stored vectors the loaded index left out (written before the entry checks refused such
    # vectors): reported with the skipped records, never a reason for the space to fail.
    index = spaces.loaded(info.uri)
    for author, reason, n in index.unusable_vectors() if index is not None else []:
        skipped[(author, reason)] += n
    out: dict[str, Any] = {
        "memories": count,
        "skipped": [{"author": a, "count": n, "reason": r} for (a, r), n in sorted(skipped.items())],
        "building": False,
    }
    if info.model is not None:
        out["config"] = {"model": info.model.model, "modelDigest": info.model.digest, "dims": info.model.dims}
    state = SyncState(spaces.store)
    if await run_in_threadpool(state.is_configured, info.uri):
        failed, invalid = await run_in_threadpool(state.problems, info.uri)
        synced = {space: (problem, ms) for space, problem, ms in await run_in_threadpool(state.spaces)}
        problem, synced_ms = synced.get(info.uri, (None, 0))
        sync: dict[str, Any] = {"failedRepos": [{"repo": r, "problem": p} for r, p in failed]}
        if synced_ms:
            sync["syncedAt"] = format_datetime_ms(synced_ms)
        if problem:
            sync["problem"] = problem
        out["sync"] = sync
        out["skipped"] += [{"author": r, "count": n, "reason": f"not a valid memory: {p}"} for r, p, n in invalid]
    return out
