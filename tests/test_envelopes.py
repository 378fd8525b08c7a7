"""One entry per face shapes every error answered outside its routes: 404, 405, 500 and malformed HTTP.

A real server; a route that raises is added under each face's prefix so that its 500 is the app's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.limits import roomy_app
from engram_index.engram.auth import InsecureOpen
from engram_index.envelopes import FACES, KINDGI, NO_FACE, V5, XRPC, FaceErrors, face_for
from engram_index.errors import InvalidInput
from engram_index.testkit.serve import serving

from .reliability.rawhttp import exchange

# Per face: a path under it that no route serves, a route's path and a method it does not take.
PATHS = {"garden.engram": ("/xrpc/garden.engram.nothing", "/xrpc/garden.engram.searchMemories", "PUT"),
         "kindgi": ("/v1/memory/nothing", "/v1/memory/retrieve", "GET"),
         "v5": ("/ns/x/nothing", "/ns/x/search", "GET"),
         "none": ("/nothing", "/.well-known/did.json", "POST")}
BOOM = {"garden.engram": "/xrpc/test.boom", "kindgi": "/v1/memory/boom", "v5": "/ns/x/boom", "none": "/boom"}


async def boom(request: Request) -> Response:
    raise RuntimeError("a bug no face caught")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    app = roomy_app(tmp_path_factory.mktemp("data"), "did:web:index.example", authenticator=InsecureOpen())
    for path in BOOM.values():
        app.router.routes.append(Route(path, boom))
    with serving(app) as base:
        yield base


def shape(body: Any) -> str:
    """Which envelope a body is: XRPC's {error, message}, Kindgi's {error: {…requestId}} or v5's ErrorResponse."""
    assert isinstance(body, dict)
    if isinstance(body.get("error"), dict):
        assert set(body) == {"error"} and {"code", "message", "requestId"} <= set(body["error"])
        return "kindgi"
    assert isinstance(body.get("error"), str)
    if set(body) == {"error", "message"}:
        return "xrpc"
    assert set(body) <= {"error", "details"}
    return "v5"


def own_shape(face: FaceErrors) -> str:
    """The shape of the entry's own envelope."""
    return shape(json.loads(face.envelope(InvalidInput("x"))[0]))


def test_every_path_belongs_to_the_entry_of_its_face() -> None:
    assert [face.name for face in FACES] == ["garden.engram", "kindgi", "v5"]
    assert face_for("/xrpc/garden.engram.searchMemories") is XRPC
    assert face_for("/v1/memory/facts?limit=2") is KINDGI
    assert face_for("/ns/x/search") is V5 and face_for("/namespaces") is V5 and face_for("/ns?x=1") is V5
    assert face_for("/nsfoo") is NO_FACE and face_for("/") is NO_FACE and face_for("/v1/x") is NO_FACE


@pytest.mark.parametrize("face", [*FACES, NO_FACE], ids=lambda f: f.name)
def test_a_faces_404_405_500_and_malformed_head_all_come_from_its_one_entry(url: str, face: FaceErrors) -> None:
    unknown, route, wrong = PATHS[face.name]
    assert face_for(unknown) is face and face_for(route) is face and face_for(BOOM[face.name]) is face
    expected = own_shape(face)
    if face is NO_FACE:
        expected = "xrpc"  # a path of no face: XRPC's envelope (its 404 too has {error, message})
    missing = httpx.get(url + unknown)
    not_allowed = httpx.request(wrong, url + route)
    failed = httpx.get(url + BOOM[face.name])
    malformed = exchange(url, f"POST {route} HTTP/1.1\r\nHost: a\r\nContent-Length: x1\r\n\r\n".encode())
    assert (missing.status_code, not_allowed.status_code, failed.status_code, malformed.status) == (404, 405, 500, 400)
    for answer in (missing.json(), not_allowed.json(), failed.json(), malformed.json()):
        assert shape(answer) == expected, answer
    assert "a bug no face caught" not in failed.text  # a 500 never shows what failed
    if face is KINDGI:  # every Kindgi error carries its id twice
        for body, header in ((missing.json(), missing.headers), (failed.json(), failed.headers),
                             (malformed.json(), malformed.headers)):
            assert header["x-request-id"] == body["error"]["requestId"]
