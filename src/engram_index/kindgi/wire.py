"""The Kindgi wire: request ids, JSON bodies (read within a size limit, written compactly), the error envelope.

Every answer carries `X-Request-Id`: the caller's when it sent a usable one, else `req-<uuid>`;
an error's `requestId` is the same value. Errors are `{"error": {code, message, details?, requestId}}`.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from engram_index import bodies
from engram_index.endpoints import Answers
from engram_index.errors import EngramError, InvalidInput, RateLimited, TooLarge, Unavailable
from engram_index.kindgi.errors import STATUS, KindgiError

# The largest request body any memory route takes (a fact's content is the bulk of it).
MAX_BODY_BYTES = 1024 * 1024
REQUEST_ID_HEADER = "X-Request-Id"
_USABLE_ID = re.compile(r"[\x21-\x7e]{1,128}")
JSON = "application/json"
# How deep a body may nest: a fact is written back inside its revision's row by orjson, which stops at 255
# levels; the parser takes 1024. A content nested past this could be taken and never stored.
MAX_DEPTH = 64


def request_id(request: Request) -> str:
    """The caller's request id when it is short printable ASCII, else a new `req-<uuid>`."""
    given = request.headers.get(REQUEST_ID_HEADER)
    if given is not None and _USABLE_ID.fullmatch(given):
        return given
    return f"req-{uuid.uuid4()}"


def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON (absent fields are left out by the builders, never sent as null)."""
    return orjson.dumps(payload)


def json_response(status: int, body: bytes, rid: str, headers: dict[str, str] | None = None) -> Response:
    """A JSON answer with its request id."""
    return Response(body, status, {REQUEST_ID_HEADER: rid, **(headers or {})}, media_type=JSON)


def as_kindgi(exc: EngramError) -> KindgiError:
    """Any error of the package in Kindgi terms (a face error as it is)."""
    if isinstance(exc, KindgiError):
        return exc
    if isinstance(exc, TooLarge):
        return KindgiError("request-too-large", exc.message, {"maxBytes": MAX_BODY_BYTES})
    if isinstance(exc, InvalidInput):
        return KindgiError("bad-input", exc.message)
    if isinstance(exc, RateLimited):
        wait = {"retryAfterSeconds": exc.retry_after_s} if exc.retry_after_s is not None else None
        return KindgiError("rate-limit-exceeded", exc.message, wait)
    if isinstance(exc, Unavailable):
        return KindgiError("service-unavailable", exc.message)
    return KindgiError("internal-server-error", "internal error")


def error_response(exc: EngramError, rid: str) -> Response:
    """The envelope of an error, with Retry-After where the error says when to come back."""
    err = as_kindgi(exc)
    inner: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.details:
        inner["details"] = err.details
    inner["requestId"] = rid
    headers: dict[str, str] = {}
    retry = (err.details or {}).get("retryAfterSeconds")
    if isinstance(retry, int):
        headers["Retry-After"] = str(retry)
    return json_response(STATUS.get(err.code, err.status), dumps({"error": inner}), rid, headers)


def _error(request: Request, exc: EngramError) -> Response:
    """An error of the package in the envelope, with the request's id."""
    return error_response(exc, request_id(request))


def _internal(request: Request, rid: str) -> Response:
    """An unexpected failure, with the request id it is logged under."""
    return error_response(KindgiError("internal-server-error", "internal error"), rid)


# How this face answers what its routes raise (endpoints.py runs every route): the caller's request id
# (else a new one) names an unexpected failure in the log too.
ANSWERS = Answers(logging.getLogger("engram_index.kindgi"), _error, _internal, request_id)


def error_body(exc: EngramError) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """An error's envelope and its X-Request-Id, for the layers below the app (malformed HTTP)."""
    err = as_kindgi(exc)
    rid = f"req-{uuid.uuid4()}"  # no request was parsed: the id is always a new one
    inner: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.details:
        inner["details"] = err.details
    inner["requestId"] = rid
    return dumps({"error": inner}), [(REQUEST_ID_HEADER.lower().encode("ascii"), rid.encode("ascii"))]


async def read_body(request: Request) -> bytes:
    """The raw request body, refused with 413 request-too-large past MAX_BODY_BYTES (before reading it all)."""
    return await bodies.read_body(request, MAX_BODY_BYTES, TooLarge(f"the request body is over {MAX_BODY_BYTES} bytes"))


def parse_object(raw: bytes, *, empty_is_object: bool = False) -> dict[str, Any]:
    """A request body as a JSON object, or 400 bad-input."""
    if empty_is_object and not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise KindgiError("bad-input", "Request body must be valid JSON") from None
    if not isinstance(value, dict):
        raise KindgiError("bad-input", "Request body must be an object")
    if nesting(value) > MAX_DEPTH:
        raise KindgiError("bad-input", f"Request body nests more than {MAX_DEPTH} levels", {"maxDepth": MAX_DEPTH})
    return value


def nesting(value: Any) -> int:
    """How many arrays and objects deep a JSON value nests (without recursion: it may be 1024 deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest
