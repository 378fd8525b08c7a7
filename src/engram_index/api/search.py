"""garden.engram.searchMemories: parameters, mode rules (seed 000) and the response."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..engine.types import Filters, Mode, SearchRequest
from ..errors import BadRecord, InvalidInput, ModelMismatch, ModelNotHosted, NoModel
from ..records import decode_query_vector, parse_datetime_ms, parse_space_uri
from ..spaces import Spaces
from ..views import hit_view
from .lexicon import Lexicons

RERANK_DEADLINE_S = 3.0


NSID = "garden.engram.searchMemories"


def build_request(params: dict[str, Any], spaces: Spaces) -> SearchRequest:
    """Decide the mode from checked parameters and the space, per seed 000's rules."""
    q = params.get("q")
    q = q if q and q.strip() else None
    mode = params.get("mode")
    info = spaces.info(params["space"])
    vector = None
    if "vector" in params:
        if "model" not in params or "modelDigest" not in params:
            raise InvalidInput("a vector needs model and modelDigest")
        if info.model is None:
            raise NoModel("the space's authority has not declared an embedding model")
        vector = decode_query_vector(params["vector"])
        if (params["model"], params["modelDigest"]) != (info.model.model, info.model.digest) or (
            vector.size != info.model.dims
        ):
            raise ModelMismatch(
                f"the space's model is {info.model.model} ({info.model.digest}, {info.model.dims} dims)"
            )
    chosen: Mode
    if mode is None:
        if vector is not None:
            chosen = "hybrid" if q else "vector"
        elif q:
            chosen = "keyword"  # no embedder runs here yet: q alone falls back to keywords
        else:
            raise InvalidInput("send q, a vector, or both")
    else:
        chosen = mode
        if chosen in ("hybrid", "vector") and vector is None:
            if not q:
                raise InvalidInput(f"mode {chosen} needs a vector")
            raise ModelNotHosted("this service does not embed queries: send the vector")
        if chosen in ("hybrid", "keyword") and not q:
            raise InvalidInput(f"mode {chosen} needs q")
    since = params.get("since")
    return SearchRequest(
        mode=chosen,
        q=q,
        vector=vector,
        limit=params["limit"],
        filters=Filters(
            params.get("author"),
            tuple(params.get("tags", ())),
            parse_datetime_ms(since, "since") if since is not None else None,
        ),
        rerank_deadline_s=RERANK_DEADLINE_S,
    )


async def search_memories(request: Request) -> dict[str, Any]:
    """Answer garden.engram.searchMemories."""
    spaces: Spaces = request.app.state.spaces
    params = Lexicons.bundled().params(NSID, request.query_params)
    try:
        parse_space_uri(params["space"])
    except BadRecord as exc:
        raise InvalidInput(exc.message) from exc
    req = build_request(params, spaces)
    index = spaces.index_if_loaded(params["space"])
    result = await run_in_threadpool(index.search, req)
    out: dict[str, Any] = {"memories": [hit_view(h, result.mode) for h in result.hits], "mode": result.mode}
    if result.approximate:
        out["approximate"] = True
    return out
