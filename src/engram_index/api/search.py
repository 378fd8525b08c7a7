"""garden.engram.searchMemories: parameters, mode rules (seed 000) and the response."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..engine.types import Filters, Mode, SearchRequest
from ..errors import BadRecord, InvalidInput, ModelMismatch, ModelNotHosted, NoModel
from ..records import decode_query_vector, is_did, parse_datetime_ms
from ..spaces import Spaces
from ..views import hit_view
from .xrpc import Params

MODES = ("hybrid", "vector", "keyword")
RERANK_DEADLINE_S = 3.0


def build_request(params: Params, spaces: Spaces, space: str) -> SearchRequest:
    """Check the parameters against the lexicon and the space, and decide the mode."""
    q = params.string("q", max_length=4000)
    vector_text = params.string("vector", max_length=43000)
    model = params.string("model")
    digest = params.string("modelDigest")
    mode = params.string("mode")
    limit = params.integer("limit", 10, 1, 50)
    author = params.string("author")
    tags = params.strings("tags", 16)
    since = params.string("since")
    if mode is not None and mode not in MODES:
        raise InvalidInput(f"mode must be one of {', '.join(MODES)}")
    if author is not None and not is_did(author):
        raise InvalidInput("author must be a DID")
    since_ms = None
    if since is not None:
        try:
            since_ms = parse_datetime_ms(since, "since")
        except BadRecord as exc:
            raise InvalidInput(exc.message) from exc
    info = spaces.info(space)
    vector = None
    if vector_text is not None:
        if model is None or digest is None:
            raise InvalidInput("a vector needs model and modelDigest")
        if info.model is None:
            raise NoModel("the space's authority has not declared an embedding model")
        vector = decode_query_vector(vector_text)
        if (model, digest) != (info.model.model, info.model.digest) or vector.size != info.model.dims:
            raise ModelMismatch(
                f"the space's model is {info.model.model} ({info.model.digest}, {info.model.dims} dims)"
            )
    q = q if q and q.strip() else None
    chosen: Mode
    if mode is None:
        if vector is not None:
            chosen = "hybrid" if q else "vector"
        elif q:
            chosen = "keyword"  # no embedder runs here yet: q alone falls back to keywords
        else:
            raise InvalidInput("send q, a vector, or both")
    else:
        chosen = mode  # type: ignore[assignment]
        if chosen in ("hybrid", "vector") and vector is None:
            if not q:
                raise InvalidInput(f"mode {chosen} needs a vector")
            raise ModelNotHosted("this service does not embed queries: send the vector")
        if chosen in ("hybrid", "keyword") and not q:
            raise InvalidInput(f"mode {chosen} needs q")
    return SearchRequest(
        mode=chosen,
        q=q,
        vector=vector,
        limit=limit,
        filters=Filters(author, tuple(tags), since_ms),
        rerank_deadline_s=RERANK_DEADLINE_S,
    )


async def search_memories(request: Request) -> dict[str, Any]:
    """Answer garden.engram.searchMemories."""
    spaces: Spaces = request.app.state.spaces
    params = Params(request)
    space = params.string("space", required=True)
    assert space is not None
    req = build_request(params, spaces, space)
    index = spaces.index_if_loaded(space)
    result = await run_in_threadpool(index.search, req)
    out: dict[str, Any] = {"memories": [hit_view(h, result.mode) for h in result.hits], "mode": result.mode}
    if result.approximate:
        out["approximate"] = True
    return out
