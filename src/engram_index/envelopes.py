"""Which face a request path belongs to, and how that face spells an error: one entry per face.

Every error answered outside a face's own routes comes from its entry here: the app's 404, 405
and 500 and the HTTP layer's answers to malformed requests (before any route ran), so that every
error a client sees is its face's JSON envelope.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engram_index.endpoints import Answers, failed
from engram_index.engram.api import xrpc
from engram_index.errors import EngramError, WrongMethod
from engram_index.protocol import Envelope
from engram_index.kindgi import routes as kindgi_routes
from engram_index.kindgi import wire as kindgi_wire
from engram_index.supermemory import http as supermemory_http


def error_response(envelope: Envelope, exc: EngramError, headers: dict[str, str] | None = None) -> Response:
    """An error in an envelope, as a response."""
    body, extra = envelope(exc)
    out = Response(body, status_code=exc.status, media_type="application/json", headers=headers)
    for name, value in extra:
        out.headers.append(name.decode("latin-1"), value.decode("latin-1"))
    return out


@dataclass(frozen=True)
class FaceErrors:
    """How one face answers the errors raised outside its routes."""

    name: str
    owns: Callable[[str], bool]  # whether a path (without its query) is the face's
    envelope: Envelope  # any error, below the app too (no request was parsed)
    not_found: Callable[[Request], Response]
    not_allowed: Callable[[Request, str], Response]  # the request and the methods its route takes
    internal: Callable[[Request, Exception], Response]


def _logged_internal(answers: Answers) -> Callable[[Request, Exception], Response]:
    """A 500 in a face's envelope naming a request id that is in the log with the traceback."""
    return lambda request, exc: failed(answers, request, exc)


def _wrong_method(envelope: Envelope) -> Callable[[Request, str], Response]:
    """A 405 in `envelope` saying which methods the route takes."""

    def not_allowed(request: Request, allowed: str) -> Response:
        message = f"{request.url.path} takes {allowed}, not {request.method}"
        return error_response(envelope, WrongMethod(message))

    return not_allowed


def _xrpc_not_found(request: Request) -> Response:
    """An unknown XRPC method, in the XRPC envelope."""
    return xrpc.error_response(404, "MethodNotImplemented", f"no such method: {request.url.path}")


def _json_not_found(request: Request) -> Response:
    """A path no face serves: a JSON 404 in no face's envelope."""
    return JSONResponse({"error": "NotFound", "message": f"nothing at {request.url.path}"}, status_code=404)


XRPC = FaceErrors("garden.engram", lambda path: path.startswith("/xrpc/"), xrpc.error_body, _xrpc_not_found,
                  _wrong_method(xrpc.error_body), _logged_internal(xrpc.ANSWERS))
KINDGI = FaceErrors("kindgi", lambda path: path.startswith(kindgi_routes.PREFIX), kindgi_wire.error_body,
                    lambda request: kindgi_routes.not_found(request, 404),
                    lambda request, allowed: kindgi_routes.not_found(request, 405),
                    _logged_internal(kindgi_wire.ANSWERS))
V5 = FaceErrors("v5", supermemory_http.owns, supermemory_http.error_body,
                lambda request: supermemory_http.http_error(request, 404),
                lambda request, allowed: supermemory_http.http_error(request, 405),
                _logged_internal(supermemory_http.ANSWERS))
# Paths of no face: XRPC's envelope (a head whose target cannot be read gets it too), a plain JSON 404.
NO_FACE = FaceErrors("none", lambda path: True, xrpc.error_body, _json_not_found,
                     _wrong_method(xrpc.error_body), _logged_internal(xrpc.ANSWERS))

# One entry per face; a path belongs to the first that owns it, else to NO_FACE.
FACES: tuple[FaceErrors, ...] = (XRPC, KINDGI, V5)


def face_for(target: str) -> FaceErrors:
    """The entry of the face serving a path or a request target (its query is ignored)."""
    path = target.split("?", 1)[0]
    return next((face for face in FACES if face.owns(path)), NO_FACE)


def envelope_for(target: str) -> Envelope:
    """The envelope of the face that serves `target`."""
    return face_for(target).envelope
