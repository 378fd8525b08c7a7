"""Which face a request path belongs to, and how that face spells an error: one entry per face.

The app's own 404/405/500 answers and the HTTP layer's answers to malformed requests (before any
route ran) both come from here, so that every error a client sees is its face's JSON envelope.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.responses import Response

from engram_index.engram.api import xrpc
from engram_index.errors import EngramError
from engram_index.supermemory import http as supermemory_http
from engram_index.kindgi import wire as kindgi_wire

Headers = list[tuple[bytes, bytes]]
# An error as (JSON body, extra headers); the status is the error's own.
Envelope = Callable[[EngramError], tuple[bytes, Headers]]

# Path prefix → the face's envelope. The first match wins; paths of no face get XRPC's.
FACES: list[tuple[str, Envelope]] = [
    ("/xrpc/", xrpc.error_body),
    ("/v1/memory/", kindgi_wire.error_body),
    *((prefix, supermemory_http.error_body) for prefix in supermemory_http.PREFIXES),
]
DEFAULT: Envelope = xrpc.error_body


def envelope_for(path: str) -> Envelope:
    """The envelope of the face that serves `path`."""
    for prefix, envelope in FACES:
        if path.startswith(prefix) and (prefix.endswith("/") or path[len(prefix):len(prefix) + 1] in ("", "/", "?")):
            return envelope
    return DEFAULT


def error_response(path: str, exc: EngramError, headers: dict[str, str] | None = None) -> Response:
    """An error as the response of the face serving `path`."""
    body, extra = envelope_for(path)(exc)
    out = Response(body, status_code=exc.status, media_type="application/json", headers=headers)
    for name, value in extra:
        out.headers.append(name.decode("latin-1"), value.decode("latin-1"))
    return out
