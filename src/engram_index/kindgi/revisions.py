"""One revision of a fact: its answer (the Fact JSON), its row, and its index document.

A fact keeps its id across revisions; a revision's own id is absent from the answer where it
equals the fact's (the first). Answers list fields in the reference server's order and leave
absent ones out.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import orjson

from engram_index.embed.text import embed_text
from engram_index.engine.types import Document
from engram_index.kindgi.models import format_ms, parse_time
from engram_index.kindgi.scope import COLUMNS, CONTAINERS, scope_tags, visibility_tags
from engram_index.store.base import Statement

DAY_MS = 86_400_000
ORDER = (
    "id", "revisionId", "type", "scope", "version", "createdAt", "updatedAt", "content", "contentRef",
    "contentHash", "size", "embeddingModel", "retention", "source", "causedByLogId", "supersedes", "trust",
    "verifiedBy", "verifiedAt", "attributedTo", "generatedBy", "subjects", "validFrom", "validUntil",
    "observedAt", "invalidatedAt", "invalidatedBy", "invalidationReason", "review", "expiresAt",
)


def ordered(fact: dict[str, Any]) -> dict[str, Any]:
    """The fact with its fields in answer order, absent (None) ones left out."""
    return {k: fact[k] for k in ORDER if fact.get(k) is not None}


def content_text(content: Any) -> str:
    """The words of a fact's content for the keyword index and the embedder: its strings and numbers."""
    if isinstance(content, str):
        return content
    parts: list[str] = []

    def walk(value: Any) -> None:
        """Collect the strings and numbers under a value."""
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, (int, float)):
            parts.append(str(value))
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk(content)
    return "\n".join(parts)


def content_facts(content: Any) -> dict[str, Any]:
    """The content's hash and size, as the runtime computes them (whatever the caller said)."""
    raw = orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
    return {"contentHash": "sha256:" + hashlib.sha256(raw).hexdigest(), "size": len(raw)}


def expires_ms(retention: dict[str, Any] | None, first_ms: int) -> int | None:
    """When a revision stops being readable: keepUntil, or keepDays after the first write (the earlier)."""
    if not retention:
        return None
    candidates = []
    if "keepUntil" in retention:
        until = parse_time(retention["keepUntil"], "retention.keepUntil")
        if until is not None:
            candidates.append(until)
    if "keepDays" in retention:
        candidates.append(first_ms + int(retention["keepDays"]) * DAY_MS)
    return min(candidates) if candidates else None


def insert_row(tenant: str, fact: dict[str, Any], *, created_ms: int, first_ms: int, current: bool) -> Statement:
    """The INSERT of one revision's row."""
    scope = fact["scope"]
    retention = fact.get("retention") or {}
    expiry = expires_ms(retention, first_ms)
    return (
        f"INSERT INTO kindgi_revisions(tenant, fact_id, version, type, {', '.join(COLUMNS)}, created_ms, first_ms,"
        " invalidated_ms, current, review, legal_hold, expires_ms, body)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)",
        (tenant, fact["id"], fact["version"], fact["type"], *(scope.get(k) for k in CONTAINERS),
         created_ms, first_ms, int(current), int(fact.get("review") == "pending"),
         int(bool(retention.get("legalHold"))), expiry, orjson.dumps(fact).decode()),
    )


def close_row(tenant: str, fact: dict[str, Any], at_ms: int, by: str, reason: str) -> tuple[dict[str, Any], Statement]:
    """A revision closed (superseded, deleted, expired): its new answer and the UPDATE of its row."""
    closed = ordered({**fact, "invalidatedAt": format_ms(at_ms), "invalidatedBy": by, "invalidationReason": reason})
    return closed, (
        "UPDATE kindgi_revisions SET current=0, invalidated_ms=?, body=? WHERE tenant=? AND fact_id=? AND version=?",
        (at_ms, orjson.dumps(closed).decode(), tenant, fact["id"], fact["version"]),
    )


def subject_rows(tenant: str, fact_id: str, subjects: list[dict[str, str]] | None) -> list[Statement]:
    """The subject index rows of a fact (what erasure by person finds)."""
    return [("INSERT OR IGNORE INTO kindgi_subjects(tenant, kind, id, fact_id) VALUES (?, ?, ?, ?)",
             (tenant, s["kind"], s["id"], fact_id)) for s in subjects or ()]


def document(fact: dict[str, Any], created_ms: int, vector: np.ndarray | None) -> Document:
    """The index document of a fact's current revision: its words, its filter tags, whom it is about
    (`metadata.subjects`, for `embedding_text`), its vector."""
    tags = [f"t:{fact['type']}", *visibility_tags(fact["scope"]), *scope_tags(fact["scope"])]
    raw = None if vector is None else np.asarray(vector, "<f2").tobytes()
    subjects = [f"{s['kind']}:{s['id']}" for s in fact.get("subjects") or ()]
    return Document(id=fact["id"], author="", text=content_text(fact.get("content")), tags=tuple(tags),
                    created_ms=created_ms, indexed_ms=created_ms, metadata={"subjects": subjects} if subjects else None,
                    vector=raw)


def embedding_text(doc: Document) -> str:
    """The text a fact is embedded as: its words, then what kind of fact it is and whom it is about
    (`Tags: type:turn, participant:Ana`), as garden.engram embeds a memory with its tags. A fact's
    type and subjects are part of what it says ("I did." means nothing without who said it):
    LoCoMo dev semantic R@10 0.502 -> 0.600 (docs/design/ranking.md)."""
    kinds = [f"type:{t[2:]}" for t in doc.tags if t.startswith("t:")]
    about = [str(s) for s in (doc.metadata or {}).get("subjects") or ()]
    return embed_text("", doc.text, kinds + about)


def retrievable(fact: dict[str, Any]) -> bool:
    """Whether a current revision belongs in the index (a pending review is never retrieved)."""
    return fact.get("review") != "pending"
