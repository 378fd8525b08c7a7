"""garden.engram.getSpaceStatus: what this service holds of a space, from the record store."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from .xrpc import checked_space

NSID = "garden.engram.getSpaceStatus"


async def get_space_status(request: Request) -> dict[str, Any]:
    """Answer garden.engram.getSpaceStatus: live count, declared model, skipped vectors by author."""
    _, spaces, info = await checked_space(request, NSID)
    count = await run_in_threadpool(spaces.store.count, info.id)
    skipped = await run_in_threadpool(spaces.store.skipped, info.id)
    out: dict[str, Any] = {
        "memories": count,
        "skipped": [{"author": a, "count": n, "reason": r} for a, r, n in skipped],
        "building": False,
    }
    if info.model is not None:
        out["config"] = {"model": info.model.model, "modelDigest": info.model.digest, "dims": info.model.dims}
    return out
