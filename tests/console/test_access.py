"""The access layer's own rules: which face a credential reaches, messages of each face's errors, bounds."""

from __future__ import annotations

from engram_index.console.access import MAX_TEXT_CHARS, cut, error_message, face_of
from engram_index.console.faces import KEYWORD_NOTE, answer


def test_a_keys_prefix_names_its_face_and_anything_else_is_garden_engram() -> None:
    assert [face_of(k) for k in ("sm_a_b", "kg_a_b", "eyJ.x.y", None, "")] == ["v5", "kindgi", "engram", "engram",
                                                                                 "engram"]


def test_each_faces_error_envelope_becomes_one_readable_sentence() -> None:
    assert error_message(400, {"error": "InvalidRequest", "message": "bad limit"}) == "HTTP 400: InvalidRequest: bad limit"
    assert error_message(404, {"error": {"code": "not-found", "message": "no fact"}}) == "HTTP 404: not-found: no fact"
    assert error_message(401, {"error": "unauthorized", "details": "unknown key"}) == "HTTP 401: unauthorized: unknown key"
    assert error_message(502, None) == "HTTP 502: the service refused the request"


def test_long_texts_are_cut_with_an_ellipsis() -> None:
    assert len(cut("x" * 5000)) == MAX_TEXT_CHARS and cut("x" * 5000).endswith("…") and cut("short") == "short"


def test_an_answer_notes_keyword_only_ranking_and_passes_why_fewer_through() -> None:
    raw = {"whyFewer": {"message": "the space holds 2 memories"}}
    out = answer("engram", "s", None, "keyword", [], raw, [])
    assert out["note"] == KEYWORD_NOTE and out["whyFewer"] == raw["whyFewer"] and out["collection"] == "s"
    asked = answer("engram", "s", "keyword", "keyword", [], {}, [])
    assert asked["note"] is None and asked["whyFewer"] is None
