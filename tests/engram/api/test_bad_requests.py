"""Bad requests to the garden.engram face: each one the reliability fuzzing found is a 4xx in the
XRPC envelope, never a 500 or plain text (a real uvicorn server on loopback, called with httpx)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from starlette.routing import Route

from tests.limits import roomy_app
from engram_index.collections import Collections
from engram_index.engine.types import Document, ModelIdentity
from engram_index.engram.api.lexicon import Lexicons
from engram_index.engram.api.limits import SpaceLimits
from engram_index.engram.auth import InsecureOpen
from engram_index.kindgi.routes import PREFIX as KINDGI_PREFIX
from engram_index.store.sqlite import StoredDocument
from engram_index.supermemory import http as supermemory_http

from .server import serving, wait_until_loaded

AUTHOR = "did:plc:bad2bad2bad2bad2bad2bad2"
SPACE = f"at://{AUTHOR}/space/garden.engram.space/s"
LIST, SEARCH = "garden.engram.listMemories", "garden.engram.searchMemories"
LEX = Lexicons.bundled()


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("data")
    spaces = Collections(data)
    spaces.ensure_collection(SPACE, ModelIdentity("m", "sha256:00", 4))
    vecs = np.eye(4, dtype="<f2")
    spaces.write(SPACE, [StoredDocument(Document(
        id=f"{SPACE}/{AUTHOR}/garden.engram.memory/r{i}", author=AUTHOR, text=f"note {i}", tags=("t",),
        created_ms=1_700_000_000_000 + i, vector=vecs[i % 4].tobytes(), metadata={"cid": "bafyreiexample"}))
        for i in range(6)])
    spaces.close()
    app = roomy_app(data, "did:web:index.example", authenticator=InsecureOpen(), limits=SpaceLimits(1e6, 1e6))
    with serving(app) as base:
        wait_until_loaded(base, SPACE)
        yield base


def get(url: str, nsid: str, **params: object) -> httpx.Response:
    return httpx.get(f"{url}/xrpc/{nsid}", params={"space": SPACE, **params})


def assert_error(r: httpx.Response, status: int, name: str = "InvalidRequest") -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error", "message"} and body["error"] == name and body["message"]


def cursor_of(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_a_cursor_decoding_to_a_lone_surrogate_is_an_invalid_request(url: str) -> None:
    assert cursor_of(b'[1,"\\ud800"]') == "WzEsIlx1ZDgwMCJd"  # the cursor of the report
    assert_error(get(url, LIST, cursor="WzEsIlx1ZDgwMCJd"), 400)


def test_a_cursor_of_deeply_nested_json_is_an_invalid_request(url: str) -> None:
    cursor = cursor_of(b"[" * 1000 + b"]" * 1000)
    assert len(cursor) <= 4096  # under the cursor's length limit: it reaches the decoder
    assert_error(get(url, LIST, cursor=cursor), 400)


def test_the_cursors_this_service_makes_still_walk_every_page(url: str) -> None:
    seen, cursor = [], None
    for _ in range(10):
        body = get(url, LIST, limit=2, **({"cursor": cursor} if cursor else {})).json()
        seen += [m["uri"] for m in body["memories"]]
        cursor = body.get("cursor")
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 6


def routes() -> list[tuple[str, set[str]]]:
    app = roomy_app(Path("unused"), "did:web:index.example", authenticator=InsecureOpen())
    # The XRPC routes and those of no face; v5 and Kindgi answer in their own envelopes (their tests).
    return [(r.path, set(r.methods or ())) for r in app.routes
            if isinstance(r, Route) and not r.path.startswith(KINDGI_PREFIX) and not supermemory_http.owns(r.path)]


@pytest.mark.parametrize("path, allowed", routes(), ids=[p for p, _ in routes()])
def test_a_wrong_method_on_any_route_is_a_json_405_naming_the_methods_it_takes(
    url: str, path: str, allowed: set[str]
) -> None:
    for method in sorted({"GET", "POST", "PUT", "PATCH", "DELETE", "TRACE", "CONNECT", "FOO"} - allowed):
        r = httpx.request(method, f"{url}{path}")
        assert_error(r, 405)
        assert set(r.headers["allow"].split(", ")) == allowed | {"OPTIONS"}


@pytest.mark.parametrize("path, allowed", routes(), ids=[p for p, _ in routes()])
def test_options_on_any_route_answers_which_methods_it_takes(url: str, path: str, allowed: set[str]) -> None:
    r = httpx.options(f"{url}{path}")
    assert r.status_code == 204 and r.content == b""
    assert set(r.headers["allow"].split(", ")) == allowed | {"OPTIONS"}


def test_head_on_a_query_answers_its_status_without_a_body(url: str) -> None:
    assert httpx.head(f"{url}/xrpc/{LIST}", params={"space": SPACE}).status_code == 200
    r = httpx.head(f"{url}/xrpc/{LIST}")
    assert r.status_code == 400 and r.content == b""


def test_an_unknown_route_is_a_json_404(url: str) -> None:
    assert_error(httpx.post(f"{url}/xrpc/garden.engram.nothing"), 404, "MethodNotImplemented")
    assert_error(httpx.get(f"{url}/elsewhere"), 404, "NotFound")


@pytest.mark.parametrize("limit", [" 5", "5 ", "+5", "١٣", "５", "1_0", "0x5", "5.0", "", "-", "1e1", "05a",
                                   "9" * 30, "\t5"])
def test_an_integer_parameter_takes_only_ascii_digits(url: str, limit: str) -> None:
    assert_error(get(url, LIST, limit=limit), 400)
    assert_error(get(url, SEARCH, q="note", mode="keyword", limit=limit), 400)


def test_an_integer_parameter_in_ascii_digits_is_taken(url: str) -> None:
    assert len(get(url, LIST, limit="3").json()["memories"]) == 3
    assert len(get(url, LIST, limit="03").json()["memories"]) == 3
    assert_error(get(url, LIST, limit="-3"), 400)  # ASCII, but under the lexicon's minimum


@pytest.mark.parametrize("since", [
    "2026-W01-1T00:00:00Z", "2026-001T00:00:00Z", "20260101T000000Z", "2026-01-01T00:00:00+00:00:00",
    "2026-01-01T00:00:00\x00Z", "2026-01-01T00:00:00", "2026-01-01", "2026-01-01 00:00:00Z",
    "2026-01-01t00:00:00Z", "2026-01-01T00:00:00z", "2026-01-01T00:00:00-00:00", "2026-01-01T00:00Z",
    "2026-01-01T00:00:00.Z", "2026-01-01T24:00:00Z", "2026-02-30T00:00:00Z", "2026-01-01T00:00:00+24:00",
    "0000-01-01T00:00:00Z", "٢٠٢٦-01-01T00:00:00Z", "2026-06-15T12:00:60Z", " 2026-01-01T00:00:00Z",
])
def test_since_takes_only_rfc_3339_datetimes(url: str, since: str) -> None:
    assert_error(get(url, SEARCH, q="note", mode="keyword", since=since), 400)


@pytest.mark.parametrize("since", ["2016-12-31T23:59:60Z", "2017-01-01T05:29:60+05:30", "2016-12-31T23:59:60.5Z",
                                   "2023-11-14T22:13:20.001+00:00", "2023-11-14T22:13:20.000001Z"])
def test_since_takes_every_rfc_3339_datetime_including_the_leap_second(url: str, since: str) -> None:
    r = get(url, SEARCH, q="note", mode="keyword", since=since)
    assert r.status_code == 200, r.text
    assert LEX.output_errors(SEARCH, r.json()) == []


def test_since_filters_from_the_exact_millisecond(url: str) -> None:
    # 2023-11-14T22:13:20.003Z is 1_700_000_000_003: notes 3, 4 and 5 are at or after it.
    r = get(url, SEARCH, q="note", mode="keyword", since="2023-11-14T22:13:20.003Z")
    assert sorted(m["text"] for m in r.json()["memories"]) == ["note 3", "note 4", "note 5"]


@pytest.mark.parametrize("author", ["did:plc:abc%", "did:plc:abc%2", "did:plc:abc%zz", "did:plc:", "did:PLC:abc",
                                    "did:plc:abc:", "did:plc:a b", "did:plc:é", "did::abc", "plc:abc"])
def test_author_must_have_did_syntax(url: str, author: str) -> None:
    assert_error(get(url, LIST, author=author), 400)


def test_an_author_with_a_percent_escape_is_a_did(url: str) -> None:
    assert get(url, LIST, author="did:web:example.com%3A8080").json() == {"memories": []}


def test_credential_revocation_on_an_insecure_open_service_is_a_4xx(url: str) -> None:
    r = httpx.post(f"{url}/xrpc/com.atproto.space.notifyCredentialRevoked", json={"space": SPACE, "jti": "x"})
    assert_error(r, 404, "MethodNotImplemented")


@pytest.mark.parametrize("nsid", ["com.atproto.space.notifyWrite", "com.atproto.space.notifySpaceDeleted"])
def test_write_notifications_to_a_service_that_syncs_nothing_are_a_4xx(url: str, nsid: str) -> None:
    assert_error(httpx.post(f"{url}/xrpc/{nsid}", json={"space": SPACE}), 404, "MethodNotImplemented")
