"""Search hits as garden.engram.defs#memoryView objects: JSON-ready dicts, or their JSON itself for a search.

A search's answer is encoded once, with its hits' JSON made here (`hits_json`, wrapped as an
orjson.Fragment): the memory's own fields are a pure function of the stored document, so their
JSON is kept per document version (a bounded map), and only the hit's similarity and match are
written per search, by a compiled writer (_views.c) or, for a value it does not write, by
`hit_json`. The bytes are what encoding `hit_view`'s dict writes (tests/engram/test_views.py).
"""

from __future__ import annotations

from typing import Any

import orjson

from engram_index.bounded import Bounded
from engram_index.engine.types import Document, Hit, Mode
from engram_index.engram import _views
from engram_index.engram.records import format_datetime_ms

MAX_KEPT = 4096  # memories whose fields' JSON is kept at most (more: start over)
_fields: Bounded[tuple[Any, ...], bytes] = Bounded(MAX_KEPT)


def scaled_similarity(cosine: float) -> int:
    """Cosine similarity as the lexicon's integer 0-1000 (clamped)."""
    return max(0, min(1000, round(cosine * 1000)))


def memory_view(doc: Document) -> dict[str, Any]:
    """The memoryView fields every memory has."""
    metadata = doc.metadata
    view: dict[str, Any] = {
        "uri": doc.id,
        "cid": metadata.get("cid", "") if metadata else "",
        "author": doc.author,
        "text": doc.text,
        "tags": list(doc.tags),
        "createdAt": format_datetime_ms(doc.created_ms),
        "indexedAt": format_datetime_ms(doc.indexed_ms),
    }
    if doc.source is not None:
        view["source"] = doc.source
    return view


def memory_fields(doc: Document) -> bytes:
    """memory_view's JSON without its braces, kept per document version (every field it reads is the key)."""
    metadata = doc.metadata
    key = (doc.id, metadata.get("cid", "") if metadata else "", doc.author, doc.text, doc.tags, doc.created_ms,
           doc.indexed_ms, doc.source)
    try:
        fields = _fields.get(key)
    except TypeError:  # a value that cannot be a key (no record has one): not kept
        return orjson.dumps(memory_view(doc))[1:-1]
    if fields is None:
        fields = orjson.dumps(memory_view(doc))[1:-1]
        _fields.keep(key, fields)
    return fields


def hit_json(hit: Hit, mode: Mode) -> bytes:
    """A search result's JSON: the memory, its similarity (not for keyword-only) and its match."""
    # Scaled once, for both places it is shown (never for keyword-only answers); inline: every hit pays it.
    cosine = hit.similarity
    similarity = max(0, min(1000, round(cosine * 1000))) if mode != "keyword" and cosine is not None else None
    tail: dict[str, Any] = {}  # what follows the memory's own fields
    if similarity is not None:
        tail["similarity"] = similarity
    if mode != "vector":
        match: dict[str, Any] = {}
        if similarity is not None and mode == "hybrid" and hit.vector_rank is not None:
            match["vector"] = {"rank": hit.vector_rank, "similarity": similarity}
        bm25 = hit.bm25
        if bm25 and hit.keyword_rank is not None:
            match["keyword"] = {
                "rank": hit.keyword_rank,
                "score": max(0, round(bm25 * 100)),
                # dicts: orjson writes a TermMatch (a dataclass) the same, ten times slower
                "terms": [{"term": t.term, "kind": t.kind, "field": t.field} for t in hit.terms],
            }
        snippet = hit.snippet
        if snippet is not None:
            match["snippet"] = {
                "field": snippet.field,
                "text": snippet.text,
                "highlights": [{"byteStart": s, "byteEnd": e} for s, e in snippet.highlights],
            }
        if hit.fusion is not None:
            match["fusion"] = hit.fusion
        tail["match"] = match
    fields = memory_fields(hit.document)
    if not tail:
        return b"{" + fields + b"}"
    return b"{" + fields + b"," + orjson.dumps(tail)[1:]


def hits_json(hits: list[Hit], mode: Mode) -> bytes:
    """The JSON array of a search's hits, each as `hit_json` writes it."""
    fields = [memory_fields(hit.document) for hit in hits]
    written = _views.hits_json(hits, mode, fields)
    if written is not None:
        return written
    # A value the compiled writer leaves to orjson (or that fails to encode, as it did before).
    return b"[" + b",".join(hit_json(hit, mode) for hit in hits) + b"]"


def hit_view(hit: Hit, mode: Mode) -> dict[str, Any]:
    """A search result as a dict (hit_json's, read back)."""
    view: dict[str, Any] = orjson.loads(hit_json(hit, mode))
    return view
