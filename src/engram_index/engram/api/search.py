"""garden.engram.searchMemories: parameters, mode rules (seed 000) and the response."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import orjson
from starlette.requests import Request

from engram_index.engine.types import Filters, Mode, SearchRequest
from engram_index.metrics import requests_in_flight
from engram_index.ranking import content_query, same_source
from engram_index.ranking import search as ranked_search
from engram_index.errors import InvalidInput, ModelMismatch, NoModel
from engram_index.engram.records import decode_query_vector, parse_datetime_ms, parse_space_uri
from engram_index.shortfall import Condition, Target, why_fewer
from engram_index.store.base import CollectionInfo
from engram_index.engram.views import hits_json
from engram_index.engram.api.embedding import QueryEmbedding
from engram_index.engram.api.lexicon import query_string
from engram_index.engram.api.spaces import loaded_index
from engram_index.engram.api.xrpc import checked_space

NSID = "garden.engram.searchMemories"
RERANK_DEADLINE_S = 3.0  # exact re-ranking after this: rank by the coarse scan, say approximate
HARD_DEADLINE_S = 10.0  # a search still running after this is answered with 503


def _query_vector(params: dict[str, Any], info: CollectionInfo) -> Any:
    """The caller's vector, checked against the space's model (None when none was sent)."""
    if "vector" not in params:
        return None
    if "model" not in params or "modelDigest" not in params:
        raise InvalidInput("a vector needs model and modelDigest")
    if info.model is None:
        raise NoModel("the space's authority has not declared an embedding model")
    vector = decode_query_vector(params["vector"])
    same = (params["model"], params["modelDigest"]) == (info.model.model, info.model.digest)
    if not same or vector.size != info.model.dims:
        raise ModelMismatch(
            f"the space's model is {info.model.model} ({info.model.digest}, {info.model.dims} dims)"
        )
    return vector


async def build_request(params: dict[str, Any], info: CollectionInfo, embedding: QueryEmbedding,
                        beside: bool = False) -> SearchRequest:
    """Decide what runs, per seed 000: an explicit mode never falls back; q alone is embedded
    when this service runs the space's model for its authority, else searched by keyword. With
    `beside`, a local model's embedding is only set going (`QueryEmbedding.start`): the request's
    vector is then a Future, and the search runs its keyword pass meanwhile (`ranking.search`)."""
    q = params.get("q")
    q = q if q and q.strip() else None
    mode: Mode | None = params.get("mode")
    vector = _query_vector(params, info)
    if vector is None and q is not None and mode != "keyword":
        authority = parse_space_uri(info.uri).authority
        refusal = embedding.refusal(info.model, authority, q)
        if refusal is None:
            vector = await (embedding.start if beside else embedding.embed)(authority, info.query_prefix, q)
        elif mode is not None:
            raise refusal  # hybrid or vector asked for explicitly: no keyword fallback
    if mode is None:
        if vector is not None:
            mode = "hybrid" if q else "vector"
        elif q:
            mode = "keyword"
        else:
            raise InvalidInput("send q, a vector, or both")
    elif mode == "vector" and vector is None:
        raise InvalidInput("mode vector needs a vector or q")
    elif mode in ("hybrid", "keyword") and not q:
        raise InvalidInput(f"mode {mode} needs q")
    elif mode == "hybrid" and vector is None:
        raise InvalidInput("mode hybrid needs a vector")
    since = params.get("since")
    return SearchRequest(
        mode=mode,
        # The keyword side searches a question's content words (its vector is of the whole question).
        q=content_query(q) if q is not None else None,
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
    limits = request.app.state.limits
    # The space's token first: a refusal then costs no parameter parsing, store read or vector decode.
    limits.take(query_string(request.scope).get("space"))
    params, spaces, info = await checked_space(request, NSID)
    index = await loaded_index(spaces, params["space"])
    async with limits.slot(params["space"]):
        # With no other search running, q's embedding runs beside the search's keyword pass (one slot of the
        # pool for both); under load it is embedded first, on its own threads, and holds no search slot.
        req = await build_request(params, info, request.app.state.embedding, beside=spaces.searches.idle())
        # On the one search pool of every face (search_pool.py): past the deadline, 503 and the slot is free.
        # Few requests in the process (by default: this one alone), its vector at hand: its search may run on the
        # loop's thread (no hop; search_pool.py says when it does).
        here = requests_in_flight() <= spaces.searches.loop_depth and not isinstance(req.vector, Future)
        result = await spaces.searches.run(ranked_search, index, req, same_source, deadline_s=HARD_DEADLINE_S,
                                           inline_key=index if here else None)
    # The hits' JSON made in one call (views.py keeps each memory's own fields encoded), taken as it is.
    out: dict[str, Any] = {"memories": orjson.Fragment(hits_json(result.hits, result.mode)), "mode": result.mode}
    if result.approximate:
        out["approximate"] = True
    if len(result.hits) < req.limit:  # only a short answer pays for saying why (an extra field: objects are open)
        out["whyFewer"] = await spaces.searches.run(lambda: why_fewer(
            spaces, params["space"], [Target(params["space"])], returned=len(result.hits),
            conditions=conditions(params, req.filters)), deadline_s=HARD_DEADLINE_S)
    return out


def conditions(params: dict[str, Any], filters: Filters) -> list[Condition]:
    """The search's filters as its caller named them, for an explanation of a short answer."""
    out = []
    if filters.author is not None:
        out.append(Condition(f"author={filters.author}", Filters(author=filters.author)))
    out += [Condition(f"tags={tag}", Filters(tags=(tag,))) for tag in filters.tags]
    if filters.since_ms is not None:
        out.append(Condition(f"since={params['since']}", Filters(since_ms=filters.since_ms)))
    return out
