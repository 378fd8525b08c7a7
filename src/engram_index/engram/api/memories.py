"""garden.engram.listMemories and getMemory: a space's memories from the record store.

Both read SQLite only, so they answer while a space's index is still loading. listMemories
pages newest first with a keyset cursor (the last memory's creation time and URI), never an
OFFSET, so every page costs the same however deep it is.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

import regex
from starlette.requests import Request

from engram_index.endpoints import in_thread
from engram_index.errors import InvalidInput, NotFound
from engram_index.engram.views import memory_view
from engram_index.engram.api.xrpc import checked_space

LIST_NSID = "garden.engram.listMemories"
GET_NSID = "garden.engram.getMemory"

_CURSOR = regex.compile(r"^[A-Za-z0-9_-]{1,4096}$")
_INT64 = 1 << 63
_CURSOR_JSON = re.compile(r'\[(-?[0-9]{1,19}),("(?:[^"\\]|\\.)*")\]', re.ASCII | re.DOTALL)


def encode_cursor(created_ms: int, doc_id: str) -> str:
    """The opaque cursor after a memory: base64url (unpadded) of JSON [created_ms, uri]."""
    raw = json.dumps([created_ms, doc_id], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The (created_ms, uri) a cursor stands for; InvalidInput for anything this service did not make."""
    bad = InvalidInput("cursor is not one this service returned")
    if not _CURSOR.match(cursor):
        raise bad
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad from None
    # Only the shape encode_cursor makes is parsed, so nested JSON never reaches the parser.
    shape = _CURSOR_JSON.fullmatch(text)
    if shape is None:
        raise bad
    try:
        doc_id = json.loads(shape.group(2))
        doc_id.encode("utf-8")  # a lone surrogate (an escaped "\ud800") cannot be a stored URI
    except (ValueError, UnicodeEncodeError):
        raise bad from None
    created = int(shape.group(1))
    if not isinstance(doc_id, str) or not -_INT64 <= created < _INT64:
        raise bad
    return created, doc_id


async def list_memories(request: Request) -> dict[str, Any]:
    """Answer garden.engram.listMemories: newest first, filtered by author and tags (all must match)."""
    params, spaces, info = await checked_space(request, LIST_NSID)
    limit: int = params["limit"]
    before = decode_cursor(params["cursor"]) if "cursor" in params else None
    rows = await in_thread(
        spaces.store.recent,
        info.id,
        limit + 1,  # one more than asked tells whether another page follows
        before=before,
        author=params.get("author"),
        tags=params.get("tags", ()),
    )
    page = [doc for _, doc in rows[:limit]]
    out: dict[str, Any] = {"memories": [memory_view(doc) for doc in page]}
    if len(rows) > limit:
        out["cursor"] = encode_cursor(page[-1].created_ms, page[-1].id)
    return out


async def get_memory(request: Request) -> dict[str, Any]:
    """Answer garden.engram.getMemory: the memory whose record URI is `uri`."""
    params, spaces, info = await checked_space(request, GET_NSID)
    found = await in_thread(spaces.store.document_by_id, info.id, params["uri"])
    if found is None:
        raise NotFound(f"no memory {params['uri']} in {info.uri}")
    return {"memory": memory_view(found[1])}
