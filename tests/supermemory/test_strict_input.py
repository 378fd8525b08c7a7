"""Every value that reaches a lookup, a time or a number conversion is checked where the request is parsed.

A filter operator of the wrong type, a date or forgetAfter outside years 1-9999, metadata whole
numbers past 64 bits, a JSON route's body sent as another type and HEAD on a route that exists are
400s or 405s in the face's own bodies, never 500s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engram_index.admission import Admission
from engram_index.embed.hashing import HashingEmbedder
from tests.supermemory.conftest import Server, add_done, running

UNLIMITED = Admission(rate=1e9, burst=1e9, concurrent=64, queue_wait_s=30)
FILTERED = ["/search", "/list/memories", "/list/documents", "/list/chunks", "/profile"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module, its per-key limits lifted (these tests are not about admission)."""
    with running(tmp_path_factory.mktemp("strict"), HashingEmbedder(64), key_limits=UNLIMITED) as srv:
        yield srv


def _post(server: Server, path: str, body: Any = None, content: bytes | None = None,
          content_type: str = "application/json") -> httpx.Response:
    """A POST with the server's key."""
    headers = {"Authorization": f"Bearer {server.key}", "Content-Type": content_type}
    if content is None and body is not None:
        return httpx.post(server.url + path, json=body, headers=headers)
    return httpx.post(server.url + path, content=content, headers=headers)


def _validation(answer: httpx.Response, *path: str | int) -> None:
    """A 400 ValidationErrorResponse with an issue at `path`."""
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["success"] is False and any(i.get("path") == list(path) for i in body["error"]), body


@pytest.mark.parametrize("route", FILTERED)
@pytest.mark.parametrize("operator", [[], {}, 1, True, ["eq"]])
def test_a_filter_operator_that_is_not_a_string_is_a_400_naming_it(server: Server, route: str,
                                                                   operator: Any) -> None:
    flt = {"field": "k", "operator": operator, "value": "v"}
    body: dict[str, Any] = {"filter": flt, **({"query": "apples"} if route == "/search" else {})}
    _validation(_post(server, f"/ns/n1{route}", body), "filter", "operator")
    group = {"operator": operator, "operands": [{"field": "k", "operator": "eq", "value": "v"}]}
    body["filter"] = group
    _validation(_post(server, f"/ns/n1{route}", body), "filter", "operator")


@pytest.mark.parametrize("date", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_document_date_outside_years_1_to_9999_in_utc_is_a_400_naming_it(server: Server, date: str) -> None:
    _validation(_post(server, "/ns/n1/document", {"content": "x", "date": date}), "date")
    _validation(_post(server, "/ns/n1/document/batch", {"documents": [{"content": "x", "date": date}]}),
                "documents", 0, "date")


def test_the_first_and_last_dates_that_can_be_written_back_are_taken(server: Server) -> None:
    for date in ("0001-01-01T14:00:00+14:00", "9999-12-31T09:59:59-14:00", "2024-02-29"):
        assert _post(server, "/ns/n1/document", {"content": "x", "date": date}).status_code == 200


@pytest.mark.parametrize("value", [2**63, 2**64 - 1])
def test_a_metadata_whole_number_past_64_bits_is_a_400_naming_its_key(server: Server, value: int) -> None:
    raw = b'{"content": "x", "metadata": {"n": %d}}' % value
    _validation(_post(server, "/ns/n1/document", content=raw), "metadata", "n")


def test_an_uploads_metadata_is_read_as_strictly_as_a_json_body(server: Server) -> None:
    auth = {"Authorization": f"Bearer {server.key}"}
    for metadata, problem in ((b'{"n": 1%s}' % (b"0" * 30), None), (b'{"s": "\\ud800"}', "metadata"),
                              (b'{"a":' * 3000, "metadata")):
        answer = httpx.post(f"{server.url}/ns/n1/document/file", headers=auth,
                            files={"file": ("a.txt", b"words", "text/plain")}, data={"metadata": metadata.decode()})
        # A number past 64 bits arrives as a float, as in a JSON body; a lone surrogate or deep nesting is refused.
        assert answer.status_code == (200 if problem is None else 400), answer.text
        if problem:
            _validation(answer, problem)


def test_a_forget_after_outside_years_1_to_9999_is_ignored_never_a_500(server: Server) -> None:
    client = server.client()
    doc = add_done(client, "n2", "Alice moved to Berlin in May.",
                   metadata={"forgetAfter": "9999-12-31T23:59:59-14:00"})
    listed = httpx.post(f"{server.url}/ns/n2/list/memories", headers={"Authorization": f"Bearer {server.key}"})
    assert listed.status_code == 200 and doc


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                          "application/xml"])
def test_a_json_route_given_another_content_type_is_a_400_error_response(server: Server, content_type: str) -> None:
    answer = _post(server, "/ns/n1/search", content=b'{"query": "apples"}', content_type=content_type)
    assert answer.status_code == 400 and answer.json()["error"] == "unsupported content type", answer.text
    assert "application/json" in answer.json()["details"]


def test_json_types_and_an_empty_body_of_any_type_are_taken(server: Server) -> None:
    for content_type in ("application/json", "application/json; charset=utf-8", "Application/JSON",
                         "application/merge-patch+json"):
        answer = _post(server, "/ns/n1/search", content=b'{"query": "apples"}', content_type=content_type)
        assert answer.status_code == 200, (content_type, answer.text)
    assert _post(server, "/ns/n1/profile", content=b"", content_type="text/plain").status_code == 200


@pytest.mark.parametrize("path, allow", [
    # GET and PATCH /document/{id} take "batch" as an id: every method a route of the path takes is allowed.
    ("/ns/n1/document/batch", "GET, OPTIONS, PATCH, POST"), ("/ns/n1/document/d1", "GET, OPTIONS, PATCH"),
    ("/ns/n1", "DELETE, GET, OPTIONS, PATCH"), ("/ns", "GET, OPTIONS"),
])
def test_head_on_a_route_that_exists_is_405_with_allow_never_a_read(server: Server, path: str, allow: str) -> None:
    answer = httpx.head(server.url + path, headers={"Authorization": f"Bearer {server.key}"})
    assert answer.status_code == 405 and answer.headers["allow"] == allow
    assert httpx.head(server.url + "/ns/n1/nothing/here", headers={"Authorization": f"Bearer {server.key}"}
                      ).status_code == 404
