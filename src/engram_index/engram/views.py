"""Search hits as garden.engram.defs#memoryView objects (JSON-ready dicts)."""

from __future__ import annotations

from typing import Any

from engram_index.engine.types import Document, Hit, Mode
from engram_index.engram.records import format_datetime_ms


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


def hit_view(hit: Hit, mode: Mode) -> dict[str, Any]:
    """A search result: the memory, its similarity (not for keyword-only) and its match."""
    view = memory_view(hit.document)
    # Scaled once, for both places it is shown (never for keyword-only answers); inline: every hit pays it.
    cosine = hit.similarity
    similarity = max(0, min(1000, round(cosine * 1000))) if mode != "keyword" and cosine is not None else None
    if similarity is not None:
        view["similarity"] = similarity
    if mode == "vector":
        return view
    match: dict[str, Any] = {}
    if similarity is not None and mode == "hybrid" and hit.vector_rank is not None:
        match["vector"] = {"rank": hit.vector_rank, "similarity": similarity}
    bm25 = hit.bm25
    if bm25 and hit.keyword_rank is not None:
        match["keyword"] = {
            "rank": hit.keyword_rank,
            "score": max(0, round(bm25 * 100)),
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
    view["match"] = match
    return view
