"""Each face's side of the access layer: its paths and its answers turned into one shape.

A result is `{id, text, score, tags, author, createdAt, explanation}` and an explanation is
`{terms, snippet: {text, highlights: [{byteStart, byteEnd}]}, bm25, keywordRank, vectorSimilarity,
vectorRank, fusion}` (absent parts None), whichever face answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable
from urllib.parse import quote



from engram_index.console.shapes import Caller, Query, Refused, cut

Json = dict[str, Any]
KINDGI = "kindgi"
KEYWORD_NOTE = "ranked by keyword alone: no similarity by meaning went into this ranking"
APPROXIMATE_NOTE = "ranking is approximate: the index could not re-rank exactly in time"


def explanation(*, terms: Any = None, snippet: Any = None, bm25: float | None = None, keyword_rank: int | None = None,
                similarity: float | None = None, vector_rank: int | None = None, fusion: Any = None) -> Json:
    """One explanation in the shared shape."""
    return {"terms": list(terms or []), "snippet": snippet, "bm25": bm25, "keywordRank": keyword_rank,
            "vectorSimilarity": similarity, "vectorRank": vector_rank, "fusion": fusion}


def answer(face: str, collection: str, asked: str | None, ran: str | None, results: list[Json], raw: Any,
           notes: list[str]) -> Json:
    """A recall's answer: the scope searched, what ran, the results, notes and the face's why-fewer."""
    if ran == "keyword" and asked not in ("keyword",):
        notes.append(KEYWORD_NOTE)
    out: Json = {"face": face, "collection": collection, "mode": ran, "results": results,
                 "note": "; ".join(notes) or None, "whyFewer": None}
    if isinstance(raw, dict) and isinstance(raw.get("whyFewer"), dict):
        out["whyFewer"] = raw["whyFewer"]
    return out


def refuse_filters(face: str, q: Query, allowed: set[str]) -> None:
    """Refuse the filters a face cannot apply, by name (never dropped silently)."""
    given = {"author": q.author, "tags": q.tags, "since": q.since, "metadata": q.metadata}
    unsupported = sorted(name for name, value in given.items() if value and name not in allowed)
    if unsupported:
        raise Refused(f"the {face} face cannot filter by {', '.join(unsupported)}; filters it takes:"
                      f" {', '.join(sorted(allowed)) or 'none'}")


# ---- garden.engram: spaces, read-only (members write through their repos) ----

def _engram_memory(view: Json) -> Json:
    """A memoryView in the shared shape (its match explained)."""
    match = view.get("match") or {}
    keyword, vector = match.get("keyword") or {}, match.get("vector") or {}
    similarity = view.get("similarity")
    fusion = match.get("fusion")
    why = explanation(
        terms=keyword.get("terms"), snippet=match.get("snippet"),
        bm25=None if "score" not in keyword else keyword["score"] / 100, keyword_rank=keyword.get("rank"),
        similarity=None if similarity is None else similarity / 1000, vector_rank=vector.get("rank"),
        fusion={"method": fusion} if isinstance(fusion, str) else fusion)
    score = similarity / 1000 if similarity is not None else why["bm25"]
    return {"id": view["uri"], "text": cut(view.get("text", "")), "score": score, "tags": view.get("tags", []),
            "author": view.get("author"), "createdAt": view.get("createdAt"), "explanation": why,
            "source": view.get("source")}


async def engram_collections(c: Caller) -> list[Json]:
    """The credential's space (checked by the face now), or every space of an open service."""
    spaces = c.open_spaces()
    if c.space_headers:
        await c.call("GET", "/xrpc/garden.engram.listMemories", params={"space": spaces[0], "limit": 1})
    return [{"id": uri, "face": "engram", "name": uri.rsplit("/", 1)[-1]} for uri in spaces]


async def engram_recall(c: Caller, collection: str, q: Query) -> Json:
    """garden.engram.searchMemories, explained."""
    c.open_spaces()  # a clear refusal before the face's own
    refuse_filters("garden.engram", q, {"author", "tags", "since"})
    params: Json = {"space": collection, "q": q.query, "limit": q.limit}
    if q.mode:
        params["mode"] = {"semantic": "vector", "both": "hybrid"}.get(q.mode, q.mode)
    params.update({k: v for k, v in (("author", q.author), ("since", q.since)) if v})
    if q.tags:
        params["tags"] = q.tags
    raw = await c.call("GET", "/xrpc/garden.engram.searchMemories", params=params)
    notes = [APPROXIMATE_NOTE] if raw.get("approximate") else []
    results = [_engram_memory(v) for v in raw.get("memories", [])]
    return answer("engram", collection, params.get("mode"), raw.get("mode"), results, raw, notes)


async def engram_get(c: Caller, collection: str, ident: str) -> Json:
    """garden.engram.getMemory (a record has one version: its CID)."""
    c.open_spaces()
    raw = await c.call("GET", "/xrpc/garden.engram.getMemory", params={"space": collection, "uri": ident})
    memory = _engram_memory(raw["memory"])
    memory["versions"] = [{"version": raw["memory"].get("cid"), "createdAt": raw["memory"].get("createdAt"),
                           "text": memory["text"]}]
    return {"memory": memory}


async def engram_list(c: Caller, collection: str, limit: int, cursor: str | None) -> Json:
    """garden.engram.listMemories, a page and its cursor."""
    c.open_spaces()
    params: Json = {"space": collection, "limit": limit, **({"cursor": cursor} if cursor else {})}
    raw = await c.call("GET", "/xrpc/garden.engram.listMemories", params=params)
    return {"memories": [_engram_memory(v) for v in raw.get("memories", [])], "cursor": raw.get("cursor")}


async def engram_write(c: Caller, collection: str, *args: Any) -> Json:
    """garden.engram spaces are written by their members' repos, never through this service."""
    raise Refused("a garden.engram space is written by its members' repos (sync), not through this service;"
                  " use a v5 or Kindgi key to write memories here")


# ---- supermemory v5: namespaces ----

def _ns(collection: str) -> str:
    """A namespace's path part."""
    return "/ns/" + quote(collection, safe="")


def _v5_result(item: Json) -> Json:
    """A v5 search result (a memory or a document chunk) in the shared shape."""
    why = item.get("explanation") or {}
    return {"id": item["id"], "kind": "memory" if "memory" in item else "chunk",
            "text": cut(str(item.get("memory") or item.get("chunk") or "")),
            "score": item.get("similarity"), "tags": [], "author": None,
            "createdAt": (item.get("system") or {}).get("createdAt"), "metadata": item.get("metadata") or {},
            "explanation": explanation(terms=why.get("matchedTerms"), snippet=why.get("snippet"), bm25=why.get("bm25"),
                                       similarity=why.get("vectorSimilarity"),
                                       fusion={"method": why["similarity"]} if why.get("similarity") else None)}


def _v5_memory(m: Json) -> Json:
    """A v5 memory in the shared memory shape."""
    return {"id": m.get("id"), "text": cut(str(m.get("memory") or "")), "metadata": m.get("metadata") or {},
            "createdAt": (m.get("system") or {}).get("createdAt"), "version": m.get("version"),
            "tags": [], "author": None}


async def v5_collections(c: Caller) -> list[Json]:
    """The namespaces the key reaches (the newest 100)."""
    raw = await c.call("GET", "/ns", params={"limit": 100})
    names = [str(item.get("namespace") or item.get("id")) for item in raw.get("namespaces", [])]
    return [{"id": name, "face": "v5", "name": name} for name in names]


async def v5_recall(c: Caller, collection: str, q: Query) -> Json:
    """POST /ns/{ns}/search, explained; metadata filters become one AND expression."""
    refuse_filters("v5", q, {"metadata"})
    if q.mode not in (None, "hybrid"):
        raise Refused("the v5 face ranks by one 0-1 similarity of meaning and words: mode must be hybrid (or none)")
    body: Json = {"query": q.query, "limit": q.limit}
    if q.metadata:
        body["filter"] = {"operator": "and", "operands": [{"field": k, "operator": "eq", "value": str(v)}
                                                           for k, v in q.metadata.items()]}
    raw = await c.call("POST", f"{_ns(collection)}/search", body=body, explain=True)
    results = [_v5_result(r) for r in raw.get("results", []) if "id" in r]
    return answer("v5", collection, q.mode, "hybrid", results, raw, [])


async def v5_get(c: Caller, collection: str, ident: str) -> Json:
    """GET /ns/{ns}/memories/{id} with its version chain (the memories it updates), newest first."""
    raw = await c.call("GET", f"{_ns(collection)}/memories/{quote(ident, safe='')}", params={"include": "related"})
    memory = _v5_memory(raw)
    older = [_v5_memory(p) for p in ((raw.get("included") or {}).get("related") or {}).get("parents", [])]
    memory["versions"] = [{k: m[k] for k in ("version", "createdAt", "text")} for m in [memory, *older]]
    return {"memory": memory}


async def v5_list(c: Caller, collection: str, limit: int, cursor: str | None) -> Json:
    """POST /ns/{ns}/list/memories, by page number (the cursor is the next page's number)."""
    page = int(cursor) if cursor and cursor.isdigit() else 1
    raw = await c.call("POST", f"{_ns(collection)}/list/memories", params={"page": page, "limit": limit}, body={})
    more = (raw.get("pagination") or {}).get("totalPages", page) > page
    return {"memories": [_v5_memory(m) for m in raw.get("memories", [])], "cursor": str(page + 1) if more else None}


async def v5_remember(c: Caller, collection: str, text: str, tags: list[str], metadata: Json) -> Json:
    """POST /ns/{ns}/document: the text is a document; its memories are made in the background."""
    if tags:
        raise Refused("the v5 face has no tags on documents: put them in metadata")
    raw = await c.call("POST", f"{_ns(collection)}/document", body={"content": text, "metadata": metadata})
    return {"id": raw.get("id"), "status": raw.get("status"),
            "note": "a v5 document: its memories are made in the background, searchable once it is done"}


async def v5_forget(c: Caller, collection: str, ident: str) -> Json:
    """DELETE /ns/{ns}/memories for one memory id (v5 forgetting: out of recall, its history kept)."""
    raw = await c.call("DELETE", f"{_ns(collection)}/memories", body={"ids": [ident]})
    if not raw.get("count"):
        raise Refused(f"HTTP 404: no memory {ident!r} in namespace {collection!r}", 404)
    return {"forgotten": ident, "answer": raw}


# ---- Kindgi: facts in the key's tenant, visible by scope ----

def _kindgi_result(item: Json) -> Json:
    """A Kindgi retrieve result in the shared shape."""
    fact, why = item["fact"], item.get("explanation") or {}
    keyword, semantic = why.get("keyword") or {}, why.get("semantic") or {}
    return {"id": fact["id"], "text": cut(str(fact.get("content", ""))), "score": item.get("score"),
            "tags": [fact["type"]] if fact.get("type") else [], "author": (fact.get("attributedTo") or {}).get("id"),
            "createdAt": fact.get("createdAt"), "scope": fact.get("scope"),
            "explanation": explanation(terms=keyword.get("terms"), snippet=why.get("snippet"),
                                       bm25=keyword.get("bm25"), keyword_rank=keyword.get("rank"),
                                       similarity=semantic.get("similarity"), vector_rank=semantic.get("rank"),
                                       fusion=why.get("fusion"))}


def _kindgi_fact(fact: Json) -> Json:
    """A fact in the shared memory shape."""
    return {"id": fact["id"], "text": cut(str(fact.get("content", ""))), "tags": [fact["type"]] if fact.get("type") else [],
            "author": (fact.get("attributedTo") or {}).get("id"), "createdAt": fact.get("createdAt"),
            "version": fact.get("version"), "scope": fact.get("scope")}


async def kindgi_collections(c: Caller) -> list[Json]:
    """One collection: every fact the key may see in its tenant (scopes narrow it per call)."""
    await c.call("GET", "/v1/memory/facts", params={"limit": 1})  # the face checks the key
    return [{"id": KINDGI, "face": "kindgi", "name": "facts this key may see"}]


async def kindgi_recall(c: Caller, collection: str, q: Query) -> Json:
    """POST /v1/memory/retrieve with an explanation; tags filter by fact type (one)."""
    refuse_filters("Kindgi", q, {"tags"})
    if len(q.tags) > 1:
        raise Refused("Kindgi filters by one fact type: give at most one tag")
    mode = {"hybrid": "both", "vector": "semantic"}.get(q.mode or "both", q.mode or "both")
    body: Json = {"mode": mode, "query": q.query, "limit": q.limit, **({"type": q.tags[0]} if q.tags else {})}
    raw = await c.call("POST", "/v1/memory/retrieve", body=body, explain=True)
    results = [_kindgi_result(r) for r in raw.get("results", [])]
    return answer("kindgi", collection, mode, mode, results, raw, [])


async def kindgi_get(c: Caller, collection: str, ident: str) -> Json:
    """GET the fact and its revisions (newest first)."""
    path = f"/v1/memory/facts/{quote(ident, safe='')}"
    fact = await c.call("GET", path)
    revisions = await c.call("GET", f"{path}/revisions")
    memory = _kindgi_fact(fact)
    memory["versions"] = [{"version": r.get("version"), "createdAt": r.get("createdAt"),
                           "text": cut(str(r.get("content", "")))} for r in revisions.get("data", [])]
    return {"memory": memory}


async def kindgi_list(c: Caller, collection: str, limit: int, cursor: str | None) -> Json:
    """GET /v1/memory/facts, a page and its cursor."""
    params: Json = {"limit": limit, **({"cursor": cursor} if cursor else {})}
    raw = await c.call("GET", "/v1/memory/facts", params=params)
    return {"memories": [_kindgi_fact(f) for f in raw.get("data", [])], "cursor": raw.get("nextCursor")}


async def kindgi_remember(c: Caller, collection: str, text: str, tags: list[str], metadata: Json) -> Json:
    """Kindgi facts need a scope: write_fact takes it."""
    raise Refused("a Kindgi fact needs a scope (tenantId, projectId, …): call write_fact with type, scope and content")


async def kindgi_forget(c: Caller, collection: str, ident: str) -> Json:
    """DELETE /v1/memory/facts/{id}."""
    raw = await c.call("DELETE", f"/v1/memory/facts/{quote(ident, safe='')}")
    return {"forgotten": ident, "answer": raw}


@dataclass(frozen=True)
class FaceCalls:
    """One face's implementation of each call."""

    collections: Callable[[Caller], Awaitable[list[Json]]]
    recall: Callable[[Caller, str, Query], Awaitable[Json]]
    get: Callable[[Caller, str, str], Awaitable[Json]]
    page: Callable[[Caller, str, int, str | None], Awaitable[Json]]
    remember: Callable[[Caller, str, str, list[str], Json], Awaitable[Json]]
    forget: Callable[[Caller, str, str], Awaitable[Json]]


FACES: dict[str, FaceCalls] = {
    "engram": FaceCalls(engram_collections, engram_recall, engram_get, engram_list, engram_write, engram_write),
    "v5": FaceCalls(v5_collections, v5_recall, v5_get, v5_list, v5_remember, v5_forget),
    "kindgi": FaceCalls(kindgi_collections, kindgi_recall, kindgi_get, kindgi_list, kindgi_remember, kindgi_forget),
}

__all__ = ["FACES"]
