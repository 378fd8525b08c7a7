"""XRPC plumbing: authentication, size limits, and the one place that turns errors into responses."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engram_index.endpoints import Answers, Endpoint, JSONAnswer, endpoint
from engram_index.errors import BadRecord, EngramError, InvalidInput, TooLarge
from engram_index.engram.records import parse_space_uri
from engram_index.collections import Collections
from engram_index.store.base import CollectionInfo
from engram_index.engram.api.lexicon import Lexicons, query_string
from engram_index.engram.api.revocation import json_body

log = logging.getLogger("engram_index.engram.api")

Handler = Callable[[Request], Awaitable[Any]]

# The largest valid query string: a 43,000-character vector, a 4,000-byte q percent-encoded
# (3 characters a byte), 16 tags of 128 bytes and the rest, with room to spare.
MAX_QUERY_BYTES = 96 * 1024


def xrpc(handler: Handler, *, authenticated: bool = True, procedure: bool = False) -> Endpoint:
    """Wrap a handler: size check, authentication for the space, JSON out, XRPC errors (endpoints.py).

    Authentication runs before the handler looks the space up, so only a caller who proved
    membership can learn whether a space is indexed here. A procedure names its space in its
    JSON body (left parsed in `request.state.body`), a query in its query string.
    """

    async def work(request: Request) -> Response:
        if len(request.scope.get("query_string", b"")) > MAX_QUERY_BYTES:
            raise TooLarge(f"the query string is longer than {MAX_QUERY_BYTES} bytes")
        if procedure:
            request.state.body = await json_body(request)
        if authenticated:
            if procedure:
                space = request.state.body.get("space")
                if not isinstance(space, str):
                    raise InvalidInput("space is required")
            else:
                spaces = query_string(request.scope).getlist("space")
                if len(spaces) != 1:
                    raise InvalidInput("space is required, once")
                space = spaces[0]
            await request.app.state.authenticator.authenticate(request, space)
        return JSONAnswer(await handler(request))

    return endpoint(ANSWERS, work)


def parsed_space(uri: str) -> None:
    """InvalidRequest for a malformed space URI."""
    try:
        parse_space_uri(uri)
    except BadRecord as exc:
        raise InvalidInput(exc.message) from exc


async def checked_space(request: Request, nsid: str) -> tuple[dict[str, Any], Collections, CollectionInfo]:
    """The query's checked parameters, the spaces and the space asked for.

    A malformed space URI is InvalidRequest; a well-formed one not indexed here is UnknownSpace.
    """
    spaces: Collections = request.app.state.spaces
    params = Lexicons.bundled().params(nsid, query_string(request.scope))
    parsed_space(params["space"])
    # One indexed read of SQLite (WAL: readers never wait for the writer), cheaper than a thread hop.
    info = spaces.info(params["space"])
    return params, spaces, info


def error_response(status: int, name: str, message: str) -> JSONResponse:
    """An XRPC error: {"error": name, "message": message}."""
    return JSONAnswer({"error": name, "message": message}, status_code=status)


def _error(request: Request, exc: EngramError) -> Response:
    """An error of the package in the XRPC envelope, with Retry-After where it says when to come back."""
    answer = error_response(exc.status, xrpc_name(exc), exc.message)
    retry = getattr(exc, "retry_after_s", None)
    if retry is not None:  # a refusal says when a retry can be admitted (RFC 9110 §10.2.3)
        answer.headers["Retry-After"] = str(retry)
    return answer


def _internal(request: Request, request_id: str) -> Response:
    """An unexpected failure, named by the request id it is logged under."""
    return error_response(500, "InternalServerError", f"internal error (request id {request_id})")


# The XRPC error name of each error code (errors.py's, and the faces' own): the one table where the
# garden.engram face names the core's errors. A code not here is named by its status.
XRPC_NAMES = {
    "internal": "InternalServerError", "invalid_input": "InvalidRequest", "unknown_collection": "UnknownSpace",
    "no_model": "NoModel", "model_mismatch": "ModelMismatch", "model_not_hosted": "ModelNotHosted",
    "auth_required": "AuthRequired", "invalid_token": "InvalidToken", "expired_token": "ExpiredToken",
    "revoked_token": "RevokedToken", "bad_space_audience": "BadSpaceAudience",
    "bad_space_signature": "BadSpaceSignature", "rate_limited": "RateLimitExceeded", "too_large": "PayloadTooLarge",
    "unknown_method": "MethodNotImplemented", "not_found": "MemoryNotFound", "unavailable": "Unavailable",
    "index_loading": "IndexLoading", "authority_unreachable": "AuthorityUnreachable",
    "store_unavailable": "Unavailable", "store_conflict": "Unavailable", "embedder_busy": "EmbedderBusy",
    "llm_unavailable": "LLMUnavailable", "reranker_unavailable": "RerankerUnavailable",
    "registration_closed": "RegistrationClosed", "not_a_member": "NotAMember", "forbidden": "Forbidden",
    "text_search_not_allowed": "TextSearchNotAllowed",
}
BY_STATUS = {400: "InvalidRequest", 401: "AuthRequired", 403: "Forbidden", 404: "NotFound", 413: "PayloadTooLarge",
             429: "RateLimitExceeded", 503: "Unavailable"}


def xrpc_name(exc: EngramError) -> str:
    """The XRPC error name of an error: its code's, else its status's."""
    return XRPC_NAMES.get(exc.code) or BY_STATUS.get(exc.status, "InternalServerError")


# How the garden.engram face answers what its routes raise (endpoints.py runs every route).
ANSWERS = Answers(log, _error, _internal)


def error_body(exc: EngramError) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """An error's XRPC body and extra headers, for the layers below the app (malformed HTTP)."""
    return orjson.dumps({"error": xrpc_name(exc), "message": exc.message}), []
