"""A search hit's JSON is exactly the encoding of its memoryView dict, whatever the hit holds."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from engram_index.engine.types import Document, Hit, Snippet, TermMatch
from engram_index.engram import views
from engram_index.engram.records import format_datetime_ms
from engram_index.engram.views import hit_json, hit_view


def reference(hit: Hit, mode: str) -> dict[str, Any]:
    """The memoryView of a hit, built as a dict field by field (as views.py built it before its JSON was kept)."""
    doc = hit.document
    view: dict[str, Any] = {
        "uri": doc.id, "cid": doc.metadata.get("cid", "") if doc.metadata else "", "author": doc.author,
        "text": doc.text, "tags": list(doc.tags), "createdAt": format_datetime_ms(doc.created_ms),
        "indexedAt": format_datetime_ms(doc.indexed_ms),
    }
    if doc.source is not None:
        view["source"] = doc.source
    cosine = hit.similarity
    similarity = max(0, min(1000, round(cosine * 1000))) if mode != "keyword" and cosine is not None else None
    if similarity is not None:
        view["similarity"] = similarity
    if mode == "vector":
        return view
    match: dict[str, Any] = {}
    if similarity is not None and mode == "hybrid" and hit.vector_rank is not None:
        match["vector"] = {"rank": hit.vector_rank, "similarity": similarity}
    if hit.bm25 and hit.keyword_rank is not None:
        match["keyword"] = {"rank": hit.keyword_rank, "score": max(0, round(hit.bm25 * 100)),
                            "terms": [{"term": t.term, "kind": t.kind, "field": t.field} for t in hit.terms]}
    if hit.snippet is not None:
        match["snippet"] = {"field": hit.snippet.field, "text": hit.snippet.text,
                            "highlights": [{"byteStart": s, "byteEnd": e} for s, e in hit.snippet.highlights]}
    if hit.fusion is not None:
        match["fusion"] = hit.fusion
    view["match"] = match
    return view


DOCS = [
    Document("at://did:plc:a/space/s/m1", "did:plc:a", "plain text", created_ms=1_700_000_000_123, indexed_ms=0),
    Document("at://did:plc:a/space/s/m2", "did:plc:b", "é \"quoted\" \\ line\nbreak \u2028 😀", tags=("t1", "ü"),
             source="at://did:plc:a/conversation/c1", created_ms=86_400_000 * 20000 + 1, indexed_ms=5,
             metadata={"cid": "bafyreid", "other": [1, 2]}),
    Document("at://did:plc:a/space/s/m3", "did:plc:c", "", metadata={}, created_ms=-1000),
]
TERMS = (TermMatch("cell", "exact", "text"), TermMatch("run", "stem", "tags"))


def hits(doc: Document) -> list[Hit]:
    """Hits of a document with every combination of what a hit may hold."""
    snippet = Snippet("text", doc.text[:5], ((0, 2), (3, 5)))
    return [
        Hit(doc, 1.0, similarity=0.4802, vector_rank=3, bm25=23.95, keyword_rank=1, terms=TERMS, snippet=snippet,
            fusion="convex"),
        Hit(doc, 1.0, similarity=-0.2, vector_rank=None, bm25=0.0, keyword_rank=2, snippet=None, fusion="rrf"),
        Hit(doc, 1.0, similarity=1.3, vector_rank=1, bm25=-0.004, keyword_rank=None, terms=(), snippet=Snippet("text", "", ())),
        Hit(doc, 1.0, similarity=None, bm25=1e-9, keyword_rank=7, terms=TERMS[:1]),
        Hit(doc, 1.0),
    ]


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
@pytest.mark.parametrize("doc", DOCS, ids=["plain", "everything", "empty"])
def test_a_hits_json_is_the_encoding_of_its_view(mode: str, doc: Document) -> None:
    for hit in hits(doc):
        for _ in range(2):  # the second time from the kept fields
            assert hit_json(hit, mode) == orjson.dumps(reference(hit, mode))  # type: ignore[arg-type]
            assert hit_view(hit, mode) == reference(hit, mode)  # type: ignore[arg-type]


def test_a_changed_document_gets_its_new_fields_and_the_kept_ones_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "MAX_KEPT", 2)
    first = Document("at://did:plc:a/space/s/m", "did:plc:a", "before", created_ms=1, indexed_ms=1, metadata={"cid": "x"})
    assert b'"before"' in hit_json(Hit(first, 1.0), "keyword")
    for changed in (Document(first.id, first.author, "after", created_ms=1, indexed_ms=1, metadata={"cid": "x"}),
                    Document(first.id, first.author, "before", created_ms=1, indexed_ms=1, metadata={"cid": "y"}),
                    Document(first.id, first.author, "before", tags=("new",), created_ms=1, indexed_ms=1,
                             metadata={"cid": "x"})):
        assert hit_json(Hit(changed, 1.0), "keyword") == orjson.dumps(reference(Hit(changed, 1.0), "keyword"))
    assert len(views._fields) <= 2
