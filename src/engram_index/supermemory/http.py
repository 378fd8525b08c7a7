"""The v5 HTTP plumbing: key auth before anything else, body and query parsing, and the one place
that turns errors into the spec's two error bodies (never a traceback, never plain text)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response

from engram_index.admission import Admission
from engram_index import endpoints
from engram_index.endpoints import Answers, Endpoint, JSONAnswer as V5Response, answer, in_thread
from engram_index.errors import EngramError, RateLimited
from engram_index.bodies import bounded
from engram_index.keys import KeyRecord, KeyState, bearer
from engram_index.supermemory import models
from engram_index.supermemory.errors import BadRequest, Forbidden, Invalid, Missing, Unauthorized, V5Error, invalid
from engram_index.supermemory.face import Face
from engram_index.supermemory.validate import Check, Obj, parse_query

log = logging.getLogger("engram_index.supermemory")
MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_MULTIPART_BYTES = 60 * 1024 * 1024
EXPLAIN_HEADER = "x-engram-explain"
# Every path this face answers under (the app's 404 and 405 answer in this face's body there).
PREFIXES = ("/ns", "/namespaces", "/organization", "/feedback")


@dataclass
class Call:
    """One authenticated request, parsed."""

    face: Face
    key: KeyRecord
    ns: str
    path: dict[str, str]
    query: dict[str, Any]
    body: dict[str, Any]
    headers: dict[str, str]
    file: tuple[bytes, str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def reaches(self, ns: str) -> bool:
        """Whether the key reaches a namespace."""
        return reaches(self.key, ns)

    @property
    def admin(self) -> bool:
        """A key minted without --namespace reaches every namespace and administers the organization."""
        return self.key.grants.get("namespaces") is None


def reaches(key: KeyRecord, ns: str) -> bool:
    """Whether a key reaches a namespace."""
    allowed = key.grants.get("namespaces")
    return allowed is None or ns in allowed


def owns(path: str) -> bool:
    """Whether a path is under this face's prefixes."""
    return any(path == p or path.startswith(p + "/") for p in PREFIXES)


def _tells(exc: EngramError) -> bool:
    """Whether the face answers an error as it is: its own, a client's, a 503 (any other is a logged 500)."""
    return isinstance(exc, V5Error) or exc.status < 500 or exc.status == 503


def _error(request: Request, exc: EngramError) -> Response:
    """An error this face tells: V5Error bodies, other EngramErrors as ErrorResponse."""
    if isinstance(exc, V5Error):
        return V5Response(exc.body(), status_code=exc.status)
    if isinstance(exc, RateLimited):  # no 429 in the spec; the SDK raises RateLimitError and retries after the wait
        headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s is not None else None
        return V5Response({"error": "rate limit exceeded", "details": exc.message}, status_code=429, headers=headers)
    return V5Response({"error": exc.message}, status_code=exc.status)


def _internal(request: Request, request_id: str) -> Response:
    """An unexpected failure as ErrorResponse, naming the request id it is logged under."""
    return V5Response({"error": "internal error", "details": f"request {request_id} (in the server's log)"},
                      status_code=500)


# The one place errors become responses (endpoints.py runs every route; envelopes.py the app's 500s).
ANSWERS = Answers(log, _error, _internal, tells=_tells)


def error_response(request: Request, exc: Exception) -> Response:
    """The answer to anything a request raised, in this face's bodies."""
    return answer(ANSWERS, request, exc)


def error_body(exc: EngramError) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """An error's ErrorResponse body and extra headers, for the layers below the app (malformed HTTP)."""
    return orjson.dumps(exc.body() if isinstance(exc, V5Error) else {"error": exc.message}), []


def http_error(request: Request, status: int) -> Response:
    """This face's body for the router's own 404 and 405 under its prefixes."""
    if status == 405:
        return V5Response({"error": "method not allowed", "details": f"{request.method} {request.url.path}"},
                          status_code=405)
    return V5Response({"error": "not found", "details": f"no route {request.method} {request.url.path}"},
                      status_code=404)


def authenticate(face: Face, request: Request) -> KeyRecord:
    """The request's key, or 401."""
    state, record = bearer(request.headers.get("authorization"), face.keys, "supermemory")
    if state in (KeyState.MISSING, KeyState.MALFORMED):
        raise Unauthorized("missing API key", "send Authorization: Bearer <key> (engram-index keys create supermemory)")
    if state is KeyState.VALID and record is not None:
        return record
    reason = {KeyState.EXPIRED: "API key expired", KeyState.REVOKED: "API key revoked"}.get(state, "invalid API key")
    raise Unauthorized(reason)


def _is_json(content_type: str | None) -> bool:
    """Whether a Content-Type names JSON (application/json or a +json type; absent counts as JSON)."""
    if content_type is None:
        return True  # a raw client that names no type: the bytes still have to be a JSON body
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _json_body(raw: bytes, schema: Obj | None, optional: bool, content_type: str | None = None) -> dict[str, Any]:
    """Parse and check a JSON body (an absent body is {} where the body is optional).

    A body sent as another type (text/plain, a form) is refused: v5 request bodies are JSON.
    """
    if not raw.strip():
        if schema is None or optional:
            return {}
        return schema({}, [])
    if schema is None:
        raise invalid("this route takes no body")
    if not _is_json(content_type):
        raise BadRequest("unsupported content type",
                         f"send the body as Content-Type: application/json, not {str(content_type)[:100]}")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"the body is not valid JSON: {exc}") from None
    if value is None and optional:
        return {}
    try:
        return schema(value, [])
    except RecursionError:
        raise invalid("the body nests too deeply") from None


async def _multipart(request: Request, fields: dict[str, Check], file_required: bool
                     ) -> tuple[dict[str, Any], tuple[bytes, str, str] | None]:
    """Parse a multipart form: its text fields (checked) and its one file."""
    too_large = invalid(f"uploads are at most {MAX_MULTIPART_BYTES // (1024 * 1024)} MB", "file")
    limited = bounded(request, MAX_MULTIPART_BYTES, too_large)  # a length over the limit: refused first
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise invalid("send multipart/form-data with a file field")
    try:
        form = await limited.form(max_files=1, max_fields=20, max_part_size=1024 * 1024)
    except V5Error:
        raise
    except Exception as exc:  # the parser's own errors: a malformed form
        raise invalid(f"the form cannot be read: {exc}") from None
    out: dict[str, Any] = {}
    upload: tuple[bytes, str, str] | None = None
    issues: list[tuple[str, list[str | int]]] = []
    for name, value in form.multi_items():
        if name == "file" and isinstance(value, UploadFile):
            data = await value.read()
            upload = (data, value.filename or "upload", value.content_type or "")
        elif name in fields and isinstance(value, str):
            try:
                out[name] = fields[name](value, [name])
            except Invalid as exc:
                issues += exc.issues
        else:
            issues.append((f"unknown form field {name!r}", [name]))
    await form.close()
    if file_required and upload is None:
        issues.append(("is required", ["file"]))
    if issues:
        raise Invalid(issues)
    return out, upload


Handler = Callable[[Call], Any]
Prepare = Callable[[Call], bool]


def endpoint(handler: Handler, *, body: Obj | None = None, query: dict[str, Check] | None = None,
             repeatable: frozenset[str] = frozenset(), optional_body: bool = False,
             multipart: bool | None = None, prepare: Prepare | None = None) -> Endpoint:
    """An ASGI endpoint: authenticate, check the namespace's reach, parse, run off the loop, shape errors.

    `multipart`: None for JSON, else a multipart route whose file is required (True) or optional.
    `prepare`: run on the event loop once the call is parsed (a search's embedding set going); True when
    the handler is a search to run whole as one job of the search pool (Collections.searching).
    """

    async def work(request: Request) -> Response:
        face: Face = request.app.state.supermemory
        # On the loop, as the Kindgi face does: one indexed read of keys.sqlite (~80 us) costs less
        # than a thread hop (~300 us), and every refusal pays for it.
        key = authenticate(face, request)
        # The key's admission before the query, the body or the upload is parsed: a refusal costs little.
        admission: Admission = request.app.state.key_limits
        async with admission.admit(key.id):
            result = await _run(request, face, key, handler, body, query, repeatable, optional_body, multipart,
                                prepare)
        if isinstance(result, Response):
            return result
        if isinstance(result, tuple):
            return V5Response(result[1], status_code=result[0])
        return V5Response(result)

    return endpoints.endpoint(ANSWERS, work)


async def _run(request: Request, face: Face, key: KeyRecord, handler: Handler, body: Obj | None,
               query: dict[str, Check] | None, repeatable: frozenset[str], optional_body: bool,
               multipart: bool | None, prepare: Prepare | None) -> Any:
    """Check the namespace's reach, parse the query and the body, and run the handler off the loop."""
    path = dict(request.path_params)
    ns = ""
    if "namespace" in path:
        ns = models.namespace(path["namespace"])
        if not reaches(key, ns):
            raise Forbidden("namespace access denied", f"this key does not reach namespace {ns!r}")
    if "id" in path:
        path["id"] = models.path_id(path["id"])
    params = parse_query(request.query_params.multi_items(), query or {}, repeatable)
    upload = None
    if multipart is not None:
        parsed, upload = await _multipart(request, models.FILE_FIELDS, multipart)
    else:
        too_large = invalid(f"the body is larger than {MAX_JSON_BYTES // (1024 * 1024)} MB")
        parsed = _json_body(await bounded(request, MAX_JSON_BYTES, too_large).body(), body, optional_body,
                            request.headers.get("content-type"))
    call = Call(face, key, ns, path, params, parsed, {k.lower(): v for k, v in request.headers.items()},
                upload)
    if prepare is not None and prepare(call):
        return await face.collections.searching(handler, call)
    return await in_thread(handler, call)


__all__ = ["Missing", "endpoint", "error_response", "http_error", "owns"]
