"""Request bodies of the memory routes, checked, and the times they carry.

Malformed JSON, a wrong type or a missing field is 400 bad-input; a well-typed value outside its
limits is 400 validation-failed; a top-level key no route knows is 400 unknown-field. Fields only
the server sets (`attributedTo`, `version`, `trust`, ...) are ignored when a body carries them.
"""

from __future__ import annotations

import math
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


def format_ms(ms: int) -> str:
    """Milliseconds since the epoch as RFC 3339 in UTC with milliseconds and Z."""
    return (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(raw: Any, name: str) -> int | None:
    """An ISO 8601 time (a zone-less one read as UTC) as milliseconds, None when absent, else bad-input."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise KindgiError("bad-input", f"`{name}` must be an ISO 8601 time")
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise KindgiError("bad-input", f"`{name}` must be an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - _EPOCH) // timedelta(milliseconds=1)


def parse_version(raw: Any, name: str) -> int | None:
    """A revision number (a whole number ≥ 1, also as a query string), None when absent."""
    if raw is None:
        return None
    value: Any = raw
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        value = int(raw)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KindgiError("bad-input", f"`{name}` must be a revision number (1 or more)")
    return value


def _refuse_unknown(body: dict[str, Any], allowed: frozenset[str]) -> None:
    """400 unknown-field for the first key that is neither allowed nor set by the server."""
    for key in body:
        if key not in allowed and key not in SERVER_FIELDS:
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
    if "content" not in body:
        raise KindgiError("bad-input", "Field `content` is required")
    content_hash = body.get("contentHash")
    if content_hash is not None and (not isinstance(content_hash, str) or not content_hash):
        raise KindgiError("bad-input", "Field `contentHash` must be a non-empty string when present")
    review = body.get("review")
    if review not in (None, "pending"):
        raise KindgiError("bad-input", "Field `review` can only be `pending` (a person must approve the fact)")
    for name in ("source", "generatedBy"):
        if body.get(name) is not None and not isinstance(body[name], dict):
            raise KindgiError("bad-input", f"Field `{name}` must be an object when present")
    return WriteBody(kind, scope, body["content"], fact_fields(body), review == "pending",
                     body.get("source"), body.get("generatedBy"))


@dataclass
class SupersedeBody:
    """A checked supersede body: the next content, and what else changes."""

    content: Any
    expect_version: int | None
    fields: FactFields


def supersede_body(body: dict[str, Any]) -> SupersedeBody:
    """Check a supersede."""
    _refuse_unknown(body, SUPERSEDE_FIELDS)
    if "content" not in body:
        raise KindgiError("bad-input", "Field `content` is required: the fact's next revision")
    return SupersedeBody(body["content"], parse_version(body.get("expectVersion"), "expectVersion"), fact_fields(body))


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
