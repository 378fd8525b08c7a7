"""garden.engram records: space and memory URIs, the memory lexicon's limits, vectors, CIDs.

This is the AT Protocol side of documents; the engine only ever sees `Document`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import re
from calendar import monthrange
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import libipld
import numpy as np
import regex

from engram_index.bounded import Bounded
from engram_index.engine.types import Document, ModelIdentity
from engram_index.engine.vector import vector_problem
from engram_index.errors import BadRecord, BadVector

MEMORY_COLLECTION = "garden.engram.memory"
SPACE_TYPE = "garden.engram.space"
MAX_TEXT_BYTES, MAX_TEXT_GRAPHEMES = 30000, 10000
MAX_TAGS, MAX_TAG_BYTES, MAX_TAG_GRAPHEMES = 16, 128, 64
MAX_SOURCE_BYTES = 2000
MAX_VECTOR_BYTES = 32000
MAX_DIMS = 16000

# The DID syntax (W3C DID core, as atproto restricts it): a lowercase method, then segments of
# [A-Za-z0-9._-] and %XX escapes separated by ':', the last one not empty; 2048 characters at most.
_ID_CHAR = r"(?:[A-Za-z0-9._-]|%[0-9A-Fa-f]{2})"
_DID = re.compile(rf"did:[a-z]+:(?:{_ID_CHAR}*:)*{_ID_CHAR}+", re.ASCII)
MAX_DID = 2048
_RKEY = regex.compile(r"^[A-Za-z0-9._:~-]{1,512}$")
_NSID = regex.compile(r"^[a-zA-Z]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+$")
_TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True, slots=True)
class SpaceURI:
    """`at://{authority}/space/{spaceType}/{skey}`."""

    authority: str
    space_type: str
    skey: str

    def __str__(self) -> str:
        """The URI text."""
        return f"at://{self.authority}/space/{self.space_type}/{self.skey}"

    def record_uri(self, author: str, collection: str, rkey: str) -> str:
        """The URI of a record of this space."""
        return f"{self}/{author}/{collection}/{rkey}"


def is_did(value: str) -> bool:
    """Whether a string has DID syntax."""
    return len(value) <= MAX_DID and _DID.fullmatch(value) is not None


def is_rkey(value: str) -> bool:
    """Whether a string has record-key syntax."""
    return bool(_RKEY.match(value)) and value not in (".", "..")


@functools.lru_cache(maxsize=4096)
def parse_space_uri(uri: str) -> SpaceURI:
    """Parse and check a space URI (cached: a search parses its space's three times; failures are not kept)."""
    parts = uri.split("/")
    if (
        len(parts) != 6
        or parts[0] != "at:"
        or parts[1] != ""
        or parts[3] != "space"
        or not is_did(parts[2])
        or not _NSID.match(parts[4])
        or not is_rkey(parts[5])
    ):
        raise BadRecord(f"not a space URI (at://<did>/space/<type>/<key>): {uri!r}")
    return SpaceURI(parts[2], parts[4], parts[5])


def is_space_uri(name: str) -> bool:
    """Whether a collection name of the shared store is a garden.engram space (other faces' names never start with at://)."""
    return name.startswith("at://")


_GRAPHEME = regex.compile(r"\X")


def graphemes(text: str) -> int:
    """The number of extended grapheme clusters."""
    return len(_GRAPHEME.findall(text))


def within_graphemes(text: str, limit: int) -> bool:
    """Whether `text` has at most `limit` grapheme clusters (a cluster holds at least one code point)."""
    return len(text) <= limit or graphemes(text) <= limit


def _utf8_len(text: str) -> int:
    """UTF-8 length, counting lone surrogates as the 3 bytes they would take."""
    return len(text.encode("utf-8", "surrogatepass"))


# RFC 3339 as atproto's datetime format takes it (valid ISO 8601 too): uppercase T and Z, whole
# seconds, any fraction, an offset of Z or ±hh:mm but not -00:00, a year from 0001; ASCII digits.
_DATETIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,32}))?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})"
)


def parse_datetime_ms(value: Any, name: str = "createdAt") -> int:
    """An RFC 3339 datetime with a time zone, as milliseconds since the epoch (a leap second as the next second)."""
    def bad() -> BadRecord:  # built only when refusing: a repr of the value on every success was waste
        return BadRecord(f"{name} must be an RFC 3339 datetime, got {value!r}"[:300])

    match = _DATETIME.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        if isinstance(value, str) and _DATETIME.fullmatch(value + "Z"):
            raise BadRecord(f"{name} needs a time zone, got {value!r}"[:300])
        raise bad()
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7) or "", match.group(8)
    if zone == "-00:00" or year == 0 or int(zone[1:3] or 0) > 23 or int(zone[4:6] or 0) > 59:
        raise bad()
    offset = timedelta(0) if zone == "Z" else (1 if zone[0] == "+" else -1) * timedelta(
        hours=int(zone[1:3]), minutes=int(zone[4:6]))
    leap = second == 60
    try:
        utc = datetime(year, month, day, hour, minute, 59 if leap else second) - offset
    except (ValueError, OverflowError):
        raise bad() from None
    # A leap second ends a UTC month (RFC 3339 5.7): 23:59:60 on its last day, and only there.
    if leap and (utc.hour, utc.minute, utc.day) != (23, 59, monthrange(utc.year, utc.month)[1]):
        raise bad()
    micros = int((fraction + "000000")[:6])
    return (utc - _EPOCH) // timedelta(milliseconds=1) + (1000 if leap else 0) + micros // 1000


_EPOCH = datetime(1970, 1, 1)


_DAY_MS = 86_400_000
_MAX_DAYS = 4096  # day strings kept at most (more: start over)
_days: Bounded[int, str] = Bounded(_MAX_DAYS)


def format_datetime_ms(ms: int) -> str:
    """Milliseconds since the epoch as RFC 3339 with milliseconds and Z."""
    # Every hit formats two: the date (from datetime, once a day) and the time of day by integer
    # arithmetic, the very string datetime.isoformat(timespec="milliseconds") writes, in ~half the time.
    day, of_day = divmod(ms, _DAY_MS)
    date = _days.get(day)
    if date is None:
        date = (_EPOCH + timedelta(days=day)).date().isoformat()  # out of datetime's range: OverflowError
        _days.keep(day, date)
    hours, of_hour = divmod(of_day, 3_600_000)
    minutes, of_minute = divmod(of_hour, 60_000)
    seconds, millis = divmod(of_minute, 1000)
    return f"{date}T{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


# -- vectors ----------------------------------------------------------------------------------


def f16le(values: np.ndarray | Sequence[float]) -> bytes:
    """Float values as little-endian IEEE half precision bytes, each rounded once to nearest."""
    # Straight from the values' own type: float64 through float32 first rounds twice, and
    # lands one unit off where the float32 value falls on a tie between two halves.
    array = np.asarray(values)
    if array.dtype.kind != "f":
        array = array.astype(np.float64)
    return array.astype("<f2").tobytes()


def encode_query_vector(values: np.ndarray) -> str:
    """The query-parameter form of a vector: f16le, base64url without padding."""
    return base64.urlsafe_b64encode(f16le(values)).rstrip(b"=").decode()


_BASE64URL = re.compile(r"[A-Za-z0-9_-]*").fullmatch


_BASE64URL_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_TO_STANDARD = bytes.maketrans(b"-_", b"+/")
_NOT_FINITE = bytes(int(byte & 0x7C == 0x7C) for byte in range(256))  # a half's high byte: 1 for NaN or infinity


def decode_query_vector(text: str) -> np.ndarray:
    """Decode a query-parameter vector (base64url f16le, unpadded) into float32."""
    # A valid vector the short way (~6 µs instead of ~10 in a search's request); anything else is
    # decoded again below, which says what is wrong with it.
    try:
        data = text.encode("ascii")
        raw = None if data.translate(None, _BASE64URL_BYTES) else binascii.a2b_base64(
            data.translate(_TO_STANDARD) + b"=" * (-len(data) % 4))
    except (UnicodeEncodeError, binascii.Error):
        raw = None
    # What vector_problem checks: no half is NaN or infinite (its exponent bits all set, in its high byte),
    # and not all are zeros (their squares' sum, which cannot overflow float32, is above zero).
    if raw and not len(raw) % 2 and 1 not in raw[1::2].translate(_NOT_FINITE):
        values = np.frombuffer(raw, "<f2").astype(np.float32)
        if float(np.dot(values, values)) > 0.0:
            return values
    return _checked_query_vector(text)


def _checked_query_vector(text: str) -> np.ndarray:
    """Decode a query-parameter vector, saying what is wrong with one that cannot be searched with."""
    if not _BASE64URL(text):
        raise BadVector("vector must be base64url without padding")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise BadVector(f"vector is not valid base64url: {exc}") from exc
    if not raw or len(raw) % 2:
        raise BadVector("vector must hold a whole number of 2-byte half floats")
    values = np.frombuffer(raw, "<f2")
    problem = vector_problem(values)
    if problem is not None:
        raise BadVector(problem)
    return values.astype(np.float32)


def decode_record_bytes(value: Any, name: str) -> bytes:
    """A lexicon `bytes` value: JSON form ({"$bytes": standard base64, unpadded}) or, decoded from
    DAG-CBOR, the bytes themselves."""
    if isinstance(value, bytes):
        return value
    if not isinstance(value, dict) or not isinstance(value.get("$bytes"), str):
        raise BadRecord(f'{name} must be {{"$bytes": "<base64>"}}')
    text = value["$bytes"]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadRecord(f"{name} is not valid base64: {exc}") from exc


# -- identifiers ---------------------------------------------------------------------------


def record_cid(record: dict[str, Any]) -> str:
    """The CIDv1 (dag-cbor, sha-256) of a record given in its JSON form."""
    digest = hashlib.sha256(libipld.encode_dag_cbor(_to_ipld(record))).digest()
    return libipld.encode_cid(bytes([0x01, 0x71, 0x12, 0x20]) + digest)


def _to_ipld(value: Any) -> Any:
    """JSON-form lexicon data to the IPLD data model ($bytes to bytes)."""
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return decode_record_bytes(value, "$bytes")
        return {k: _to_ipld(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_ipld(v) for v in value]
    return value


def tid_from(micros: int, clock_id: int) -> str:
    """A record key in TID form for a time (µs since the epoch) and a 10-bit clock id."""
    value = ((micros & ((1 << 53) - 1)) << 10) | (clock_id & 0x3FF)
    chars = []
    for _ in range(13):
        chars.append(_TID_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


# -- memories -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParsedMemory:
    """A checked memory record: the document to index and why its vector is not used, if so."""

    document: Document
    skip_reason: str | None


def _check_string(record: dict[str, Any], name: str, max_bytes: int, required: bool) -> str | None:
    """A string field of the record, checked for type and UTF-8 length."""
    value = record.get(name)
    if value is None:
        if required:
            raise BadRecord(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise BadRecord(f"{name} must be a string")
    if _utf8_len(value) > max_bytes:
        raise BadRecord(f"{name} is longer than {max_bytes} bytes")
    return value


def parse_memory(
    record: dict[str, Any],
    *,
    space: SpaceURI,
    author: str,
    rkey: str,
    model: ModelIdentity | None,
    now_ms: int,
    cid: str | None = None,
    next_model: ModelIdentity | None = None,
) -> ParsedMemory:
    """Check a garden.engram.memory record against the lexicon and turn it into a document.

    `cid`, when the caller already verified the record's CID, spares computing it again.
    """
    if not isinstance(record, dict):
        raise BadRecord("a record must be a JSON object")
    if not is_did(author):
        raise BadRecord(f"author must be a DID, got {author!r}")
    if not is_rkey(rkey):
        raise BadRecord(f"rkey is not a valid record key: {rkey!r}")
    text = _check_string(record, "text", MAX_TEXT_BYTES, required=True) or ""
    if not within_graphemes(text, MAX_TEXT_GRAPHEMES):
        raise BadRecord(f"text is longer than {MAX_TEXT_GRAPHEMES} graphemes")
    source = _check_string(record, "source", MAX_SOURCE_BYTES, required=False)
    tags = record.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise BadRecord("tags must be an array of strings")
    if len(tags) > MAX_TAGS:
        raise BadRecord(f"at most {MAX_TAGS} tags")
    for tag in tags:
        if _utf8_len(tag) > MAX_TAG_BYTES or not within_graphemes(tag, MAX_TAG_GRAPHEMES):
            raise BadRecord(f"tag longer than {MAX_TAG_BYTES} bytes / {MAX_TAG_GRAPHEMES} graphemes")
    created_ms = parse_datetime_ms(record.get("createdAt"))
    vector, skip = _check_embedding(record.get("embedding"), model)
    next_vector = None
    if record.get("nextEmbedding") is not None:
        checked, _ = _check_embedding(record["nextEmbedding"], next_model)
        next_vector = checked if next_model is not None else None
    if cid is None:
        cid = record_cid({"$type": MEMORY_COLLECTION, **{k: v for k, v in record.items() if k != "$type"}})
    doc = Document(
        id=space.record_uri(author, MEMORY_COLLECTION, rkey),
        author=author,
        text=text,
        tags=tuple(tags),
        source=source,
        created_ms=created_ms,
        indexed_ms=now_ms,
        metadata={"cid": cid},
        vector=vector,
        next_vector=next_vector,
    )
    return ParsedMemory(doc, skip)


def _check_embedding(value: Any, model: ModelIdentity | None) -> tuple[bytes | None, str | None]:
    """The record's vector when it is usable in this space, else None and the reason."""
    if value is None:
        raise BadRecord("embedding is required")
    if not isinstance(value, dict):
        raise BadRecord("embedding must be an object")
    for name in ("model", "modelDigest"):
        if not isinstance(value.get(name), str) or _utf8_len(value[name]) > 256:
            raise BadRecord(f"embedding.{name} must be a string of at most 256 bytes")
    dims = value.get("dims")
    if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= MAX_DIMS:
        raise BadRecord(f"embedding.dims must be an integer 1-{MAX_DIMS}")
    if not isinstance(value.get("encoding"), str):
        raise BadRecord("embedding.encoding is required")
    raw = decode_record_bytes(value.get("vector"), "embedding.vector")
    if len(raw) > MAX_VECTOR_BYTES:
        raise BadRecord(f"embedding.vector is longer than {MAX_VECTOR_BYTES} bytes")
    if value["encoding"] != "f16le":
        return None, f"unknown encoding {value['encoding']!r}"
    if len(raw) != 2 * dims:
        return None, f"vector has {len(raw)} bytes, dims {dims} needs {2 * dims}"
    if model is None:
        return None, "the space has no model"
    if (value["model"], value["modelDigest"], dims) != (model.model, model.digest, model.dims):
        return None, "model mismatch"
    problem = vector_problem(np.frombuffer(raw, "<f2"), dims)
    return (None, problem) if problem else (raw, None)
