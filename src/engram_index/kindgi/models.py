"""Request bodies of the memory routes, checked, and the times they carry.

Malformed JSON, a wrong type or a missing field is 400 bad-input; a well-typed value outside its
limits is 400 validation-failed; a top-level key no route knows is 400 unknown-field. Fields only
the server sets (`attributedTo`, `version`, `trust`, ...) are ignored when a body carries them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from engram_index.kindgi.errors import KindgiError
from engram_index.kindgi.scope import parse_scope

MAX_SUBJECTS = 20
MAX_QUERY_CHARS = 4000
MAX_RETRIEVE_LIMIT = 100
DEFAULT_RETRIEVE_LIMIT = 10
MAX_TYPE_CHARS = 256
MODES = ("list", "keyword", "semantic", "both")
# The largest whole number SQLite stores (versions, cursor times, counts reach it as INTEGERs).
INT64_MAX = 2**63 - 1
SOURCE_KINDS = ("http-api", "blob", "mcp-tool", "external-db", "user-input")
REFRESH_STRATEGIES = ("on-read", "background", "manual")
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit also takes "²", which int() refuses
SUBJECT_KINDS = ("participant", "user", "external")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# Set by the server from the caller and the revision: a body's copy is ignored.
SERVER_FIELDS = frozenset({
    "id", "revisionId", "version", "createdAt", "updatedAt", "attributedTo", "trust", "verifiedBy",
    "verifiedAt", "supersedes", "invalidatedAt", "invalidatedBy", "invalidationReason", "expiresAt",
    "size", "embeddingModel", "contentRef",
})
_FACT_FIELDS = frozenset({"retention", "subjects", "validFrom", "validUntil", "observedAt"})
WRITE_FIELDS = _FACT_FIELDS | {"type", "scope", "content", "contentHash", "review", "source", "generatedBy"}
SUPERSEDE_FIELDS = _FACT_FIELDS | {"content", "expectVersion"}
RETRIEVE_FIELDS = frozenset({"mode", "query", "type", "scope", "limit", "embeddingModel"})
# The instants a time may name: those RFC 3339 can write back in UTC (years 0001-9999).
MIN_MS = (datetime(1, 1, 1, tzinfo=timezone.utc) - _EPOCH) // timedelta(milliseconds=1)
MAX_MS = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=timezone.utc) - _EPOCH) // timedelta(milliseconds=1)


def named(name: str, query: bool) -> dict[str, str]:
    """The details that name what was wrong: a query parameter or a body field."""
    return {"parameter": name} if query else {"field": name}


def format_ms(ms: int) -> str:
    """Milliseconds since the epoch as RFC 3339 in UTC with milliseconds and Z."""
    return (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(raw: Any, name: str, *, query: bool = False) -> int | None:
    """An ISO 8601 time (a zone-less one read as UTC) as milliseconds, None when absent.

    Not a time: 400 bad-input; a time whose UTC instant falls outside years 1-9999 (which no
    answer could write back): 400 validation-failed. Both name the field or parameter.
    """
    if raw is None:
        return None
    where = "Query parameter" if query else "Field"
    if not isinstance(raw, str):
        raise KindgiError("bad-input", f"{where} `{name}` must be an ISO 8601 time", named(name, query))
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise KindgiError("bad-input", f"{where} `{name}` must be an ISO 8601 time", named(name, query)) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    # Subtracting aware times never overflows; only a UTC instant outside years 1-9999 can't be written back.
    ms = (when - _EPOCH) // timedelta(milliseconds=1)
    if not MIN_MS <= ms <= MAX_MS:
        raise KindgiError("validation-failed", f"{where} `{name}` must fall within years 1-9999 in UTC",
                          named(name, query))
    return ms


def parse_version(raw: Any, name: str, *, query: bool = False) -> int | None:
    """A revision number (a whole number from 1 to 2^63 - 1; in a query, ASCII digits), None when absent."""
    if raw is None:
        return None
    where = "Query parameter" if query else "Field"
    value: Any = raw
    if query or isinstance(raw, str):
        if not isinstance(raw, str) or not _DIGITS.fullmatch(raw):
            raise KindgiError("bad-input", f"{where} `{name}` must be a revision number (1 or more)",
                              named(name, query))
        # Past 19 digits it is past 2^63 (and int() refuses past 4300): refused below without converting.
        value = int(raw) if len(raw) <= 19 else INT64_MAX + 1
    if isinstance(value, bool) or not isinstance(value, int):
        raise KindgiError("bad-input", f"{where} `{name}` must be a revision number (1 or more)", named(name, query))
    if not 1 <= value <= INT64_MAX:
        raise KindgiError("validation-failed", f"{where} `{name}` must be between 1 and {INT64_MAX}",
                          {**named(name, query), "min": 1, "max": INT64_MAX})
    return value


def parse_limit(raw: str | None, default: int, most: int) -> int:
    """A page size from the query: ASCII digits, 1 or more (more than `most` is `most`), absent: `default`."""
    if raw is None:
        return default
    if not _DIGITS.fullmatch(raw):
        raise KindgiError("bad-input", "Query parameter `limit` must be a whole number", named("limit", True))
    n = int(raw) if len(raw) <= 19 else most  # a longer one is more than `most` anyway
    if n < 1:
        raise KindgiError("validation-failed", "Query parameter `limit` must be 1 or more",
                          {**named("limit", True), "min": 1})
    return min(n, most)


def parse_flag(raw: str | None, name: str) -> bool:
    """A boolean query parameter as the SDK sends it: `true` or `false` (absent: false)."""
    if raw is None or raw == "false":
        return False
    if raw == "true":
        return True
    raise KindgiError("bad-input", f"Query parameter `{name}` must be true or false", named(name, True))


def parse_text(raw: str | None, name: str, most: int = MAX_TYPE_CHARS) -> str | None:
    """A short text query parameter (`type`, `scopeId`), at most `most` characters."""
    if raw is not None and len(raw) > most:
        raise KindgiError("validation-failed", f"Query parameter `{name}` is longer than {most} characters",
                          {**named(name, True), "maxChars": most})
    return raw


def _refuse_unknown(body: dict[str, Any], allowed: frozenset[str], *, server_set: bool = True) -> None:
    """400 unknown-field for the first key that is neither allowed nor (when `server_set`) set by the server."""
    for key in body:
        if key not in allowed and not (server_set and key in SERVER_FIELDS):
            raise KindgiError("unknown-field", f"Unknown field `{key}`", {"field": key})


@dataclass
class FactFields:
    """What a write and a supersede share: retention, subjects and the times (absent: None)."""

    retention: dict[str, Any] | None = None
    subjects: list[dict[str, str]] | None = None
    times: dict[str, int] = field(default_factory=dict)


def _retention(raw: Any) -> dict[str, Any] | None:
    """A retention object checked, times normalised to UTC."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise KindgiError("bad-input", "Field `retention` must be an object when present")
    out: dict[str, Any] = {}
    keep_until = parse_time(raw.get("keepUntil"), "retention.keepUntil")
    if keep_until is not None:
        out["keepUntil"] = format_ms(keep_until)
    days = raw.get("keepDays")
    if days is not None:
        if isinstance(days, bool) or not isinstance(days, int):
            raise KindgiError("bad-input", "`retention.keepDays` must be a whole number of days")
        if days < 1 or days > 365_000:
            raise KindgiError("validation-failed", "`retention.keepDays` must be between 1 and 365000")
        out["keepDays"] = days
    hold = raw.get("legalHold")
    if hold is not None:
        if not isinstance(hold, bool):
            raise KindgiError("bad-input", "`retention.legalHold` must be true or false")
        out["legalHold"] = hold
    return out


def _subjects(raw: Any) -> list[dict[str, str]] | None:
    """A subjects list checked: at most 20 `{kind, id}`."""
    if raw is None:
        return None
    shape = "Field `subjects` is a list of whom the fact is about: [{kind: participant | user | external, id}]"
    if not isinstance(raw, list):
        raise KindgiError("bad-input", shape)
    if len(raw) > MAX_SUBJECTS:
        raise KindgiError("validation-failed", f"At most {MAX_SUBJECTS} subjects", {"max": MAX_SUBJECTS})
    for s in raw:
        if (not isinstance(s, dict) or set(s) != {"kind", "id"} or s["kind"] not in SUBJECT_KINDS
                or not isinstance(s["id"], str) or not s["id"]):
            raise KindgiError("bad-input", shape)
    return [{"kind": s["kind"], "id": s["id"]} for s in raw]


def fact_fields(body: dict[str, Any]) -> FactFields:
    """Retention, subjects and times of a write or supersede body."""
    out = FactFields(_retention(body.get("retention")), _subjects(body.get("subjects")))
    for name in ("validFrom", "validUntil", "observedAt"):
        ms = parse_time(body.get(name), name)
        if ms is not None:
            out.times[name] = ms
    if "validFrom" in out.times and "validUntil" in out.times and out.times["validFrom"] > out.times["validUntil"]:
        raise KindgiError("validation-failed", "`validFrom` must not be after `validUntil`")
    return out


def _content(body: dict[str, Any], missing: str) -> Any:
    """A fact's content: any JSON value but null (the SDK types it `Any`; null would be no payload)."""
    if body.get("content") is None:
        raise KindgiError("bad-input", missing if "content" not in body else "Field `content` must not be null",
                          {"field": "content"})
    return body["content"]


def _object(raw: Any, name: str) -> dict[str, Any]:
    """A nested object, or 400 bad-input naming it."""
    if not isinstance(raw, dict):
        raise KindgiError("bad-input", f"Field `{name}` must be an object", {"field": name})
    return raw


def _optional_text(raw: dict[str, Any], key: str, name: str) -> None:
    """An optional string member of a nested object."""
    if raw.get(key) is not None and not isinstance(raw[key], str):
        raise KindgiError("bad-input", f"Field `{name}.{key}` must be a string when present", {"field": f"{name}.{key}"})


def _whole(raw: dict[str, Any], key: str, name: str, lo: int) -> None:
    """An optional whole-number member of a nested object, from `lo` to 2^63 - 1."""
    value = raw.get(key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise KindgiError("bad-input", f"Field `{name}.{key}` must be a whole number", {"field": f"{name}.{key}"})
    if not lo <= value <= INT64_MAX:
        raise KindgiError("validation-failed", f"Field `{name}.{key}` must be between {lo} and {INT64_MAX}",
                          {"field": f"{name}.{key}"})


def _source(raw: Any) -> dict[str, Any] | None:
    """A fact's `source` as the Fact schema has it: {kind, uri?, freshness: {...}, refresh: {strategy, ...}}."""
    if raw is None:
        return None
    source = dict(_object(raw, "source"))
    if source.get("kind") not in SOURCE_KINDS:
        raise KindgiError("bad-input", f"Field `source.kind` must be one of {', '.join(SOURCE_KINDS)}",
                          {"field": "source.kind"})
    _optional_text(source, "uri", "source")
    freshness = dict(_object(source.get("freshness"), "source.freshness"))
    _whole(freshness, "ttlSeconds", "source.freshness", 0)
    for key in ("etag", "sourceVersion"):
        _optional_text(freshness, key, "source.freshness")
    verified = parse_time(freshness.get("lastVerifiedAt"), "source.freshness.lastVerifiedAt")
    if verified is not None:  # written back in UTC: the SDK's model wants a zone
        freshness["lastVerifiedAt"] = format_ms(verified)
    refresh = _object(source.get("refresh"), "source.refresh")
    if refresh.get("strategy") not in REFRESH_STRATEGIES:
        raise KindgiError("bad-input", f"Field `source.refresh.strategy` must be one of {', '.join(REFRESH_STRATEGIES)}",
                          {"field": "source.refresh.strategy"})
    _optional_text(refresh, "handler", "source.refresh")
    _whole(refresh, "priority", "source.refresh", -INT64_MAX - 1)
    return {**source, "freshness": freshness}


def _generated_by(raw: Any) -> dict[str, Any] | None:
    """A fact's `generatedBy`: {runId, stepId?, toolCallId?}."""
    if raw is None:
        return None
    generated = _object(raw, "generatedBy")
    if not isinstance(generated.get("runId"), str) or not generated["runId"]:
        raise KindgiError("bad-input", "Field `generatedBy.runId` must be a non-empty string",
                          {"field": "generatedBy.runId"})
    for key in ("stepId", "toolCallId"):
        _optional_text(generated, key, "generatedBy")
    return generated


@dataclass
class WriteBody:
    """A checked `POST /v1/memory/facts` body."""

    type: str
    scope: dict[str, Any]
    content: Any
    fields: FactFields
    review: bool = False
    source: dict[str, Any] | None = None
    generated_by: dict[str, Any] | None = None


def write_body(body: dict[str, Any]) -> WriteBody:
    """Check a fact write."""
    _refuse_unknown(body, WRITE_FIELDS)
    kind = body.get("type")
    if not isinstance(kind, str) or not kind:
        raise KindgiError("bad-input", "Field `type` must be a non-empty string")
    if len(kind) > MAX_TYPE_CHARS:
        raise KindgiError("validation-failed", f"`type` is longer than {MAX_TYPE_CHARS} characters")
    scope = parse_scope(body.get("scope"))
    content = _content(body, "Field `content` is required")
    content_hash = body.get("contentHash")
    if content_hash is not None and (not isinstance(content_hash, str) or not content_hash):
        raise KindgiError("bad-input", "Field `contentHash` must be a non-empty string when present")
    review = body.get("review")
    if review not in (None, "pending"):
        raise KindgiError("bad-input", "Field `review` can only be `pending` (a person must approve the fact)")
    return WriteBody(kind, scope, content, fact_fields(body), review == "pending",
                     _source(body.get("source")), _generated_by(body.get("generatedBy")))


@dataclass
class SupersedeBody:
    """A checked supersede body: the next content, and what else changes."""

    content: Any
    expect_version: int | None
    fields: FactFields


def supersede_body(body: dict[str, Any]) -> SupersedeBody:
    """Check a supersede."""
    _refuse_unknown(body, SUPERSEDE_FIELDS)
    content = _content(body, "Field `content` is required: the fact's next revision")
    return SupersedeBody(content, parse_version(body.get("expectVersion"), "expectVersion"), fact_fields(body))


def verify_body(body: dict[str, Any]) -> int | None:
    """Check a verify body; its expectVersion."""
    _refuse_unknown(body, frozenset({"expectVersion"}))
    return parse_version(body.get("expectVersion"), "expectVersion")


@dataclass
class Intent:
    """A checked retrieve intent."""

    mode: str
    query: str | None = None
    type: str | None = None
    scope: dict[str, Any] | None = None
    limit: int = DEFAULT_RETRIEVE_LIMIT
    embedding_model: str | None = None


def retrieve_intent(body: dict[str, Any]) -> Intent:
    """Check a retrieve intent (seed 004): mode, query, type, scope, limit, embeddingModel."""
    _refuse_unknown(body, RETRIEVE_FIELDS)
    mode = body.get("mode")
    if mode not in MODES:
        raise KindgiError("bad-input", 'Field `mode` must be one of "list", "keyword", "semantic", "both"')
    query = body.get("query")
    if query is not None and not isinstance(query, str):
        raise KindgiError("bad-input", "Field `query` must be a string when present")
    if mode != "list" and query is None:
        raise KindgiError("bad-input", f'Field `query` is required when `mode` is "{mode}"')
    if query is not None and len(query) > MAX_QUERY_CHARS:
        raise KindgiError("validation-failed", f"`query` is longer than {MAX_QUERY_CHARS} characters",
                          {"maxChars": MAX_QUERY_CHARS})
    kind = body.get("type")
    if kind is not None and (not isinstance(kind, str) or not kind):
        raise KindgiError("bad-input", "Field `type` must be a non-empty string when present")
    if kind is not None and len(kind) > MAX_TYPE_CHARS:
        raise KindgiError("validation-failed", f"`type` is longer than {MAX_TYPE_CHARS} characters")
    scope = body.get("scope")
    if scope is not None:
        scope = parse_scope(scope, partial=True)
    limit = body.get("limit")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit):
            raise KindgiError("bad-input", "Field `limit` must be a positive number when present")
        if limit < 1:
            raise KindgiError("validation-failed", "Field `limit` must be 1 or more", {"min": 1})
    model = body.get("embeddingModel")
    if model is not None and (not isinstance(model, str) or not model):
        raise KindgiError("bad-input", "Field `embeddingModel` must be a non-empty string when present")
    return Intent(mode, query if mode != "list" else None, kind, scope,
                  DEFAULT_RETRIEVE_LIMIT if limit is None else min(int(limit), MAX_RETRIEVE_LIMIT), model)


def resume_body(body: dict[str, Any]) -> bool:
    """Check a resume body; its `force`."""
    _refuse_unknown(body, frozenset({"force"}), server_set=False)
    force = body.get("force")
    if force is not None and not isinstance(force, bool):
        raise KindgiError("bad-input", "Field `force` must be true or false", {"field": "force"})
    return bool(force)


def erasure_selector(body: dict[str, Any]) -> dict[str, Any]:
    """Exactly one of `factId`, `subject` ({kind, id}) or `conversationId`."""
    names = [k for k in ("factId", "subject", "conversationId") if body.get(k) is not None]
    unknown = [k for k in body if k not in ("factId", "subject", "conversationId")]
    if unknown:
        raise KindgiError("unknown-field", f"Unknown field `{unknown[0]}`", {"field": unknown[0]})
    if len(names) != 1:
        raise KindgiError("bad-input", "Name exactly one of `factId`, `subject` (`{kind, id}`) or `conversationId`")

    def ident(value: Any, name: str) -> str:
        """A selector id checked."""
        if not isinstance(value, str) or not value.strip() or len(value) > 256:
            raise KindgiError("bad-input", f"`{name}` must be a non-empty string of at most 256 characters")
        return value

    if names[0] == "factId":
        return {"factId": ident(body["factId"], "factId")}
    if names[0] == "conversationId":
        return {"conversationId": ident(body["conversationId"], "conversationId")}
    subject = body["subject"]
    if not isinstance(subject, dict) or subject.get("kind") not in ("participant", "external"):
        raise KindgiError("bad-input", "`subject` must be `{kind: participant | external, id}`")
    return {"subject": {"kind": subject["kind"], "id": ident(subject.get("id"), "subject.id")}}
