"""The request schemas of every v5 route: closed bodies, their limits, and hints for legacy keys."""

from __future__ import annotations

import re
from typing import Any

import orjson

from engram_index.supermemory import filters
from engram_index.supermemory.errors import Invalid, Path, invalid
from engram_index.supermemory.validate import (
    Obj, array, boolean, integer, metadata_map, number, one_of, query_int, string, timestamp,
)

NAMESPACE_PATTERN = r"[a-zA-Z0-9_:-]+"
NAMESPACE = string(1, 100, NAMESPACE_PATTERN)
# Path ids are sent without percent-encoding: an id holding / ? or # could never be addressed.
ID_PATTERN = r"[^/?#\x00-\x1f\x7f]+"
DOC_ID = string(1, 255, ID_PATTERN)
ANY_ID = string(1, 255)
SLUG = string(1, 64, r"[a-z0-9][a-z0-9_-]*")
MAX_CONTENT = 2_000_000
STATUSES = ("unknown", "queued", "extracting", "chunking", "embedding", "indexing", "done", "failed")


def filter_check(value: Any, path: Path) -> dict[str, Any]:
    """A FilterExpression (grammar in filters.py)."""
    return filters.validate(value, path)


DOCUMENT_HINTS = {
    "customId": "renamed id in v5",
    "containerTag": "the namespace is the path: /ns/{namespace}/document",
    "containerTags": "the namespace is the path: /ns/{namespace}/document",
    "entityContext": "renamed supportingContext in v5",
    "filterByMetadata": "renamed group in v5",
    "documentDate": "renamed date in v5",
}
DOCUMENT_FIELDS = {
    "content": string(1, MAX_CONTENT),
    "id": DOC_ID,
    "supportingContext": string(0, 1500),
    "metadata": metadata_map,
    "group": metadata_map,
    "date": timestamp,
}
TASK = {"taskType": one_of("memory", "superrag"), "dreaming": one_of("dynamic", "instant")}

ADD = Obj({**DOCUMENT_FIELDS, **TASK}, frozenset({"content"}), hints=DOCUMENT_HINTS)
DOCUMENT_INPUT = Obj(DOCUMENT_FIELDS, frozenset({"content"}), hints=DOCUMENT_HINTS)
BATCH = Obj({"documents": array(DOCUMENT_INPUT, 1, 600), **TASK}, frozenset({"documents"}))
PATCH = Obj({k: v for k, v in {**DOCUMENT_FIELDS, **TASK}.items() if k != "id"},
            clears=frozenset({"supportingContext"}), hints=DOCUMENT_HINTS)
CHANGES = ("content", "supportingContext", "metadata", "group", "date")
DELETE_DOCUMENTS = Obj({"ids": array(ANY_ID, 1, 100)}, frozenset({"ids"}))
MEMORY_COUNTS = Obj({"ids": array(ANY_ID, 1, 100)}, frozenset({"ids"}))

SEARCH_INCLUDE = Obj(
    {"documents": boolean, "related": boolean, "forgotten": boolean},
    hints={"relatedMemories": "renamed related in v5", "forgottenMemories": "renamed forgotten in v5",
           "summaries": "use documents", "chunks": "v5 has no include.chunks: use searchMode chunks or hybrid"},
)
SEARCH = Obj(
    {
        "query": string(1, 10000),
        "searchMode": one_of("hybrid", "memories", "chunks"),
        "limit": integer(1, 100),
        "threshold": number(0, 1),
        "rerank": one_of("none", "order", "aggregate"),
        "rewriteQuery": boolean,
        "filter": filter_check,
        "include": SEARCH_INCLUDE,
    },
    frozenset({"query"}),
    hints={"q": "renamed query in v5", "filters": "renamed filter in v5 (one expression)",
           "containerTag": "the namespace is the path: /ns/{namespace}/search",
           "containerTags": "the namespace is the path: /ns/{namespace}/search",
           "aggregate": "use rerank: \"aggregate\"", "chunkThreshold": "v5 has one threshold",
           "documentThreshold": "v5 has one threshold", "docId": "use a filter"},
)

LIST = Obj({"filter": filter_check,
            "include": Obj({"forgotten": boolean, "content": boolean, "memoryCount": boolean})})
LIST_QUERY = {"page": query_int(1, 1_000_000), "limit": query_int(1, 100),
              "sort": one_of("createdAt", "updatedAt", "position"), "order": one_of("asc", "desc")}

FORGET = Obj({"ids": array(ANY_ID, 1, 500)}, frozenset({"ids"}), hints={"reason": "v5 has no reason field"})
FORGET_SEMANTIC = Obj({"query": string(1, 2000), "dryRun": boolean}, frozenset({"query", "dryRun"}),
                      hints={"reason": "v5 has no reason field", "maxForget": "v5 has no maxForget"})

PROFILE = Obj({"filter": filter_check, "buckets": array(SLUG, 0, 50)},
              hints={"q": "v5 profiles do no search", "threshold": "v5 profiles do no search",
                     "include": "v5 profiles do no search"})


def bucket_map(value: Any, path: Path) -> dict[str, str]:
    """1-50 bucket slugs, each with a description of at most 2000 characters."""
    if not isinstance(value, dict):
        raise invalid("expected an object of bucket names to descriptions", *path)
    if not 1 <= len(value) <= 50:
        raise invalid("must hold 1-50 buckets", *path)
    return {SLUG(k, [*path, k]) and k: string(0, 2000)(v, [*path, k]) for k, v in value.items()}


BUCKETS_PUT = Obj({"buckets": bucket_map}, frozenset({"buckets"}))
BUCKETS_DELETE = Obj({"buckets": array(SLUG, 1, 50, unique=True)}, frozenset({"buckets"}))

NAMESPACE_PATCH = Obj({"supportingContext": string(0, 1500)}, frozenset({"supportingContext"}),
                      clears=frozenset({"supportingContext"}))
ORGANIZATION_PATCH = Obj({"organizationalContext": string(1, 10000)}, frozenset({"organizationalContext"}),
                         clears=frozenset({"organizationalContext"}))
FEEDBACK = Obj(
    {"type": one_of("bug", "feature_request", "docs", "other"), "title": string(1, 200),
     "description": string(1, 10000), "endpoint": string(0, 500), "requestId": string(0, 200),
     "expected": string(0, 10000), "actual": string(0, 10000), "client": string(0, 200),
     "contactEmail": string(0, 320)},
    frozenset({"type", "title", "description"}),
)

DOCUMENT_QUERY = {"include": array(one_of("chunks", "memories"))}
MEMORY_QUERY = {"include": array(one_of("related", "documents")), "relatedLimit": query_int(1, 100)}
NAMESPACES_QUERY = {"page": query_int(1, 1_000_000), "limit": query_int(1, 100), "q": string(0, 100)}
NAMESPACE_DELETE_QUERY = {"moveTo": NAMESPACE}

FILE_FIELDS = {"supportingContext": string(0, 1500), "metadata": string(0, 100_000), "group": string(0, 100_000),
               "date": timestamp, "taskType": TASK["taskType"], "dreaming": TASK["dreaming"],
               "fileType": one_of("text", "pdf", "image", "video", "audio"),
               "mimeType": string(3, 255, r"[\w.+-]+/[\w.+-]+")}


def namespace(value: str) -> str:
    """A namespace from the path, checked."""
    return str(NAMESPACE(value, ["path", "namespace"]))


def path_id(value: str) -> str:
    """A document or memory id from the path, checked."""
    return str(ANY_ID(value, ["path", "id"]))


def json_metadata(text: str | None, name: str) -> dict[str, Any] | None:
    """A multipart form's JSON-encoded metadata or group field."""
    if text is None or text == "":
        return None
    try:
        # orjson, as for JSON bodies: no lone surrogates, no whole numbers past 64 bits, bounded nesting.
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise invalid(f"{name} must be a JSON-encoded object", name) from None
    return metadata_map(value, [name])


def is_url(content: str) -> bool:
    """Whether a document's content is a URL to fetch rather than text."""
    return bool(re.fullmatch(r"https?://\S+", content.strip())) and len(content.strip()) <= 2048


__all__ = ["Invalid", "STATUSES"]
