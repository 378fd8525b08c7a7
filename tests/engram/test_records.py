"""garden.engram records: URIs, lexicon limits, and byte-exact agreement with the Go implementation."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from engram_index.engine.types import ModelIdentity
from engram_index.errors import BadRecord, BadVector
from engram_index.engram.records import (
    decode_query_vector,
    embed_text,
    encode_query_vector,
    f16le,
    format_datetime_ms,
    parse_datetime_ms,
    parse_memory,
    parse_space_uri,
    record_cid,
    tid_from,
)

SPACE = parse_space_uri("at://did:plc:abc234abc234abc234abc234/space/garden.engram.space/notes")
MODEL = ModelIdentity("m", "sha256:00", 4)


@pytest.fixture(scope="module")
def interop(shared_dir: Path) -> dict:
    return json.loads((shared_dir / "data" / "interop" / "engram-go-vectors.json").read_text())


def test_float32_bits_encode_to_the_go_implementations_f16_bytes(interop: dict) -> None:
    for case in interop["vectors"]:
        values = np.array(case["bits"], np.uint32).view(np.float32)
        assert f16le(values).hex() == case["f16Hex"]


def test_query_vector_form_is_unpadded_base64url_as_in_go(interop: dict) -> None:
    for case in interop["vectors"]:
        values = np.array(case["bits"], np.uint32).view(np.float32)
        assert encode_query_vector(values) == case["queryVector"]
        decoded = decode_query_vector(case["queryVector"])
        assert f16le(decoded).hex() == case["f16Hex"]


def test_record_form_is_unpadded_standard_base64_as_in_go(interop: dict) -> None:
    for case in interop["vectors"]:
        raw = bytes.fromhex(case["f16Hex"])
        assert base64.b64encode(raw).rstrip(b"=").decode() == case["record"]["vector"]["$bytes"]


def test_embed_text_matches_go_for_every_case(interop: dict) -> None:
    for case in interop["embedText"]:
        assert embed_text(case["prefix"], case["text"], case["tags"]) == case["want"]


@pytest.mark.parametrize("bad", ["", "a=", "ab+c", "a b", "A", "AA"])
def test_malformed_query_vectors_are_refused(bad: str) -> None:
    with pytest.raises(BadVector):
        decode_query_vector(bad)


def test_query_vector_with_nan_is_refused() -> None:
    nan = base64.urlsafe_b64encode(np.array([np.nan, 1], "<f2").tobytes()).rstrip(b"=").decode()
    with pytest.raises(BadVector):
        decode_query_vector(nan)


@pytest.mark.parametrize(
    "uri",
    [
        "at://did:plc:abc/space/garden.engram.space",
        "at://notadid/space/garden.engram.space/x",
        "https://did:plc:abc/space/garden.engram.space/x",
        "at://did:plc:abc/spaces/garden.engram.space/x",
        "at://did:plc:abc/space/garden.engram.space/a b",
    ],
)
def test_malformed_space_uris_are_refused(uri: str) -> None:
    with pytest.raises(BadRecord):
        parse_space_uri(uri)


def _record(**over: object) -> dict:
    vec = np.array([0.5, -0.5, 0.25, 1.0], "<f2").tobytes()
    rec = {
        "text": "hello",
        "tags": ["a"],
        "createdAt": "2026-01-02T03:04:05.678Z",
        "embedding": {
            "model": "m", "modelDigest": "sha256:00", "dims": 4, "encoding": "f16le",
            "vector": {"$bytes": base64.b64encode(vec).rstrip(b"=").decode()},
        },
    }
    rec.update(over)
    return rec


def _parse(rec: dict, model: ModelIdentity | None = MODEL):
    return parse_memory(rec, space=SPACE, author="did:plc:author", rkey="3jzfcijpj2z2a", model=model, now_ms=1)


def test_a_valid_memory_becomes_a_document_with_uri_cid_and_vector() -> None:
    parsed = _parse(_record())
    doc = parsed.document
    assert doc.id == str(SPACE) + "/did:plc:author/garden.engram.memory/3jzfcijpj2z2a"
    assert doc.created_ms == parse_datetime_ms("2026-01-02T03:04:05.678Z")
    assert doc.vector is not None and len(doc.vector) == 8
    assert doc.metadata and doc.metadata["cid"].startswith("bafyrei")
    assert parsed.skip_reason is None


def test_a_vector_of_another_model_is_kept_out_of_the_vector_index_with_a_reason() -> None:
    parsed = _parse(_record(), ModelIdentity("other", "sha256:00", 4))
    assert parsed.document.vector is None
    assert parsed.skip_reason == "model mismatch"


@pytest.mark.parametrize(
    "over, message",
    [
        ({"text": None}, "text is required"),
        ({"text": "x" * 30001}, "30000 bytes"),
        ({"text": "é" * 10001}, "graphemes"),
        ({"tags": ["t"] * 17}, "at most 16 tags"),
        ({"tags": ["x" * 129]}, "tag longer"),
        ({"tags": "a"}, "array of strings"),
        ({"source": "s" * 2001}, "2000 bytes"),
        ({"createdAt": "yesterday"}, "RFC 3339"),
        ({"createdAt": "2026-01-02T03:04:05"}, "time zone"),
        ({"embedding": None}, "embedding is required"),
        ({"embedding": {"model": "m"}}, "modelDigest"),
    ],
)
def test_records_breaking_the_lexicon_are_refused_with_the_reason(over: dict, message: str) -> None:
    rec = _record(**over)
    if over.get("text", "") is None:
        del rec["text"]
    with pytest.raises(BadRecord, match=message):
        _parse(rec)


def test_text_of_ten_thousand_graphemes_under_the_byte_limit_is_accepted() -> None:
    assert _parse(_record(text="a" * 10000)).document.text == "a" * 10000


def test_cid_is_stable_and_changes_with_content() -> None:
    assert record_cid({"a": 1}) == record_cid({"a": 1})
    assert record_cid({"a": 1}) != record_cid({"a": 2})


def test_tids_are_13_sortable_characters() -> None:
    early, late = tid_from(1_700_000_000_000_000, 5), tid_from(1_700_000_000_000_001, 0)
    assert len(early) == 13 and early < late


def test_datetimes_format_with_milliseconds_and_z() -> None:
    assert format_datetime_ms(parse_datetime_ms("2026-01-02T03:04:05.678+00:00")) == "2026-01-02T03:04:05.678Z"
