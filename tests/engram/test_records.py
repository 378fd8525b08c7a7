"""garden.engram records: URIs, lexicon limits, and byte-exact agreement with the Go implementation."""

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram_index.embed.text import embed_text
from engram_index.engine.types import ModelIdentity
from engram_index.errors import BadRecord, BadVector
from engram_index.engram.records import (
    decode_query_vector,
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


@pytest.mark.parametrize("values", [[0.0, 0.0, 0.0], [-0.0, 0.0, -0.0]])
def test_a_query_vector_of_zeros_has_no_direction_and_is_refused(values: list[float]) -> None:
    with pytest.raises(BadVector, match="all zeros: it has no direction"):
        decode_query_vector(encode_query_vector(np.array(values)))


def test_a_query_vector_of_norm_300_is_accepted_exactly() -> None:
    values = np.full(384, 15.3125, np.float32)  # 15.3125 is a float16: sent and decoded exactly
    assert np.array_equal(decode_query_vector(encode_query_vector(values)), values)


def test_float64_values_are_rounded_to_float16_once_not_through_float32(scifact_dir: Path) -> None:
    # The reference embeddings, normalised in float64 as a client would before sending them.
    wide = np.load(scifact_dir / "queries.minilm.f32.npy").astype(np.float64)
    unit = wide / np.linalg.norm(wide, axis=1, keepdims=True)
    twice = unit.astype(np.float32).astype("<f2")
    assert np.count_nonzero(twice.view(np.uint16) != unit.astype("<f2").view(np.uint16)) > 0  # the cases exist
    assert f16le(unit) == unit.astype("<f2").tobytes()
    assert f16le(unit.tolist()) == unit.astype("<f2").tobytes()  # plain Python floats too
    # A float64 just above a tie between two halves: via float32 it lands on the tie, then rounds to even.
    above_tie = 1 + 2.0**-11 + 2.0**-40
    assert f16le(np.array([above_tie])) == np.array([1 + 2.0**-10], "<f2").tobytes()
    assert f16le(np.array([above_tie], np.float32)) == np.array([1.0], "<f2").tobytes()


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


def _with_vector(values: np.ndarray) -> dict:
    raw = np.asarray(values, "<f2").tobytes()
    rec = _record()
    rec["embedding"] = {**rec["embedding"], "dims": len(values),
                        "vector": {"$bytes": base64.b64encode(raw).rstrip(b"=").decode()}}
    return rec


@pytest.mark.parametrize(
    "values, reason",
    [
        ([0.0, 0.0, -0.0, 0.0], "vector is all zeros: it has no direction"),
        ([1.0, np.inf, 0.0, 0.0], "vector holds NaN or infinite values"),
        ([1.0, np.nan, 0.0, 0.0], "vector holds NaN or infinite values"),
        ([1e5, 0.0, 0.0, 0.0], "vector holds NaN or infinite values"),  # beyond 65504: infinite as float16
    ],
)
def test_a_stored_vector_that_cannot_be_searched_is_kept_out_with_its_reason(values: list[float], reason: str) -> None:
    with np.errstate(over="ignore"):
        parsed = _parse(_with_vector(np.array(values)))
    assert parsed.document.vector is None
    assert parsed.skip_reason == reason


@pytest.mark.parametrize("values", [[15.0, -15.0, 15.0, 300.0], [65504.0, -65504.0, 6e-8, 0.0], [1e-7, 0, 0, 0]])
def test_vectors_of_large_norm_or_tiny_components_are_accepted(values: list[float]) -> None:
    parsed = _parse(_with_vector(np.array(values)))
    assert parsed.skip_reason is None and parsed.document.vector == np.array(values, "<f2").tobytes()


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


def test_datetimes_format_as_datetime_writes_them_from_year_1_to_9999_and_beyond_is_an_overflow() -> None:
    import random
    from datetime import datetime, timedelta

    epoch, ms = datetime(1970, 1, 1), timedelta(milliseconds=1)
    first, last = (datetime(1, 1, 1) - epoch) // ms, (datetime(9999, 12, 31, 23, 59, 59, 999000) - epoch) // ms
    rng = random.Random(7)
    values = [first, last, -1, 0, 1, 86_399_999, 86_400_000, -86_400_001, 951_782_400_000]  # 2000-02-29
    values += [rng.randint(first, last) for _ in range(3000)] + [rng.randint(-10**10, 4 * 10**12) for _ in range(3000)]
    for value in values:
        assert format_datetime_ms(value) == (epoch + timedelta(milliseconds=value)).isoformat(timespec="milliseconds") + "Z"
    for outside in (first - 1, last + 1):
        with pytest.raises(OverflowError):
            format_datetime_ms(outside)


def _decoded_or_refusal(decode: Any, text: str) -> Any:
    """A decoder's vector (as bytes), or the message it refused with."""
    try:
        return decode(text).tobytes()
    except BadVector as exc:
        return exc.message


@settings(max_examples=400, deadline=None)
@given(st.one_of(
    st.lists(st.integers(0, 0xFFFF), min_size=0, max_size=40).map(
        lambda bits: base64.urlsafe_b64encode(np.array(bits, np.uint16).tobytes()).rstrip(b"=").decode()),
    st.text(st.sampled_from("AB_-+/=é \x00z9"), max_size=12),
))
def test_the_short_way_decodes_and_refuses_every_query_vector_as_the_checked_way(text: str) -> None:
    from engram_index.engram.records import _checked_query_vector

    assert _decoded_or_refusal(decode_query_vector, text) == _decoded_or_refusal(_checked_query_vector, text)
