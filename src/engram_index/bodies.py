"""Request bodies held to a limit, for every face: refused on a declared length over it, and cut off
once more than it has come (a chunked body declares none), before the whole body is held.

Each face passes the error it answers a body over its limit with (its own envelope and status).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import Message

from engram_index.errors import EngramError


def bounded(request: Request, limit: int, too_large: EngramError) -> Request:
    """The request, refused with `too_large` when its declared length passes `limit`, whose body
    reads raise it once more than `limit` bytes came (for a form parser that reads as it goes)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    seen = 0

    async def receive() -> Message:
        nonlocal seen
        message = await request.receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise too_large
        return message

    return Request(request.scope, receive)


async def read_body(request: Request, limit: int, too_large: EngramError) -> bytes:
    """The whole body, at most `limit` bytes (else `too_large`, as soon as that is known)."""
    return await bounded(request, limit, too_large).body()
