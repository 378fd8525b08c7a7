"""A search hit's JSON is exactly the encoding of its memoryView dict, whatever the hit holds."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from engram_index.bounded import Bounded
from engram_index.engine.types import Document, Hit, Snippet, TermMatch
from engram_index.engram import _views, views
from engram_index.engram.records import format_datetime_ms
from engram_index.engram.views import hit_json, hit_view, hits_json


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
    monkeypatch.setattr(views, "_fields", Bounded(2))
    first = Document("at://did:plc:a/space/s/m", "did:plc:a", "before", created_ms=1, indexed_ms=1, metadata={"cid": "x"})
    assert b'"before"' in hit_json(Hit(first, 1.0), "keyword")
    for changed in (Document(first.id, first.author, "after", created_ms=1, indexed_ms=1, metadata={"cid": "x"}),
                    Document(first.id, first.author, "before", created_ms=1, indexed_ms=1, metadata={"cid": "y"}),
                    Document(first.id, first.author, "before", tags=("new",), created_ms=1, indexed_ms=1,
                             metadata={"cid": "x"})):
        assert hit_json(Hit(changed, 1.0), "keyword") == orjson.dumps(reference(Hit(changed, 1.0), "keyword"))
    assert len(views._fields) <= 2


def array(hits: list[Hit], mode: str) -> bytes:
    """The JSON array of the hits' reference views."""
    return b"[" + b",".join(orjson.dumps(reference(h, mode)) for h in hits) + b"]"


def compiled(hits: list[Hit], mode: str) -> bytes | None:
    """What the compiled writer alone gives for the hits (None: it leaves them to hit_json)."""
    return _views.hits_json(hits, mode, [views.memory_fields(h.document) for h in hits])


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
@pytest.mark.parametrize("doc", DOCS, ids=["plain", "everything", "empty"])
def test_the_compiled_writer_writes_a_searchs_hits_as_the_encoding_of_their_views(mode: str, doc: Document) -> None:
    assert compiled(hits(doc), mode) == array(hits(doc), mode)
    assert hits_json(hits(doc), mode) == array(hits(doc), mode)  # type: ignore[arg-type]
    assert compiled([], mode) == hits_json([], mode) == b"[]"  # type: ignore[arg-type]


EVERY_ASCII = "".join(chr(c) for c in range(128))


@pytest.mark.parametrize("text", [EVERY_ASCII, "é ü \u2028\u2029 😀 中文 \x7f", 'a "quoted" \\ path\\', ""])
def test_the_compiled_writer_escapes_every_string_as_orjson_does(text: str) -> None:
    doc = Document("at://did:plc:a/space/s/m", "did:plc:a", text)
    hit = Hit(doc, 1.0, similarity=0.5, vector_rank=1, bm25=2.0, keyword_rank=1,
              terms=(TermMatch(text, "exact", "text"), TermMatch("x", text, text)),  # type: ignore[arg-type]
              snippet=Snippet(text, text, ((0, 1),)), fusion=text)  # type: ignore[arg-type]
    for mode in ("hybrid", "keyword", "vector"):
        assert compiled([hit, hit], mode) == array([hit, hit], mode)


# Scaled values on a tie (x * 1000 or x * 100 exactly n + 0.5, binary fractions): round goes to the even side.
TIES = [0.0625, 0.1875, 0.0005, 0.9995, 0.4375, -0.0625, 0.125, 0.375, 1.0, 0.0, -0.0, 5e-324, 1e-9, 0.999999]


@pytest.mark.parametrize("value", TIES)
def test_the_compiled_writer_rounds_as_python_does(value: float) -> None:
    doc = DOCS[0]
    hit = Hit(doc, 1.0, similarity=value, vector_rank=2, bm25=value, keyword_rank=3, terms=TERMS)
    assert compiled([hit], "hybrid") == array([hit], "hybrid")
    big = Hit(doc, 1.0, similarity=value, vector_rank=2, bm25=value * 1e12, keyword_rank=3)
    assert compiled([big], "hybrid") == array([big], "hybrid")


def odd_hits() -> list[Hit]:
    """Hits holding values the compiled writer leaves to hit_json (each encodes, as it did before)."""
    import numpy as np

    doc = DOCS[1]
    return [
        Hit(doc, 1.0, similarity=np.float32(0.25), vector_rank=1),  # type: ignore[arg-type]
        Hit(doc, 1.0, similarity=1, vector_rank=1),  # an int
        Hit(doc, 1.0, similarity=0.5, vector_rank=True, bm25=1.0, keyword_rank=np.int64(2)),  # type: ignore[arg-type]
        Hit(doc, 1.0, bm25=1e300, keyword_rank=1),  # a score past 64 bits (encoding the view refuses it)
        Hit(doc, 1.0, snippet=Snippet("text", "ab", [[0, 1]])),  # type: ignore[arg-type]
        Hit(doc, 1.0, bm25=2.0, keyword_rank=2 ** 70),
    ]


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
def test_values_the_compiled_writer_does_not_write_are_written_as_before(mode: str) -> None:
    for hit in odd_hits():
        if mode == "hybrid":  # (each odd value is one a hybrid answer shows)
            assert compiled([DOCS_HIT, hit], mode) is None
        try:
            expected = array([DOCS_HIT, hit], mode)
        except (TypeError, ValueError, OverflowError) as exc:  # what encoding the view refuses, refused alike
            with pytest.raises(type(exc)):
                hits_json([DOCS_HIT, hit], mode)  # type: ignore[arg-type]
        else:
            assert hits_json([DOCS_HIT, hit], mode) == expected  # type: ignore[arg-type]


DOCS_HIT = Hit(DOCS[0], 1.0, similarity=0.5, vector_rank=1, bm25=1.0, keyword_rank=1, terms=TERMS)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_score_that_cannot_be_rounded_fails_as_it_did_before(bad: float) -> None:
    for hit in (Hit(DOCS[0], 1.0, similarity=bad, vector_rank=1), Hit(DOCS[0], 1.0, bm25=bad, keyword_rank=1)):
        assert compiled([hit], "hybrid") is None
        with pytest.raises((ValueError, OverflowError)):
            hits_json([hit], "hybrid")


def test_terms_and_highlights_in_lists_are_written_as_in_tuples() -> None:
    hit = Hit(DOCS[0], 1.0, bm25=2.0, keyword_rank=1, terms=[TermMatch("a", "exact", "text")],  # type: ignore[arg-type]
              snippet=Snippet("text", "ab", [(0, 1)]))  # type: ignore[arg-type]
    assert compiled([hit], "hybrid") == array([hit], "hybrid")


def test_a_lone_surrogate_fails_as_it_did_before() -> None:
    hit = Hit(DOCS[0], 1.0, snippet=Snippet("text", "\ud800", ()))
    assert compiled([hit], "keyword") is None
    with pytest.raises(TypeError):
        hits_json([hit], "keyword")
    with pytest.raises(TypeError):
        orjson.dumps(reference(hit, "keyword"))


def test_the_compiled_writer_refuses_hits_and_fields_that_do_not_pair() -> None:
    with pytest.raises(ValueError, match="1 hits but 0 fields"):
        _views.hits_json([DOCS_HIT], "hybrid", [])
    with pytest.raises(TypeError):
        _views.hits_json(tuple([DOCS_HIT]), "hybrid", [b""])  # type: ignore[arg-type]
