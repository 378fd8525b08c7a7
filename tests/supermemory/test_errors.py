"""Bad input never gets a 500 or plain text: every answer under the face's prefixes is one of its two bodies."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.supermemory.conftest import Server, add_done

ROUTES = [
    ("POST", "/ns/{ns}/document"), ("POST", "/ns/{ns}/document/batch"), ("PATCH", "/ns/{ns}/document/d1"),
    ("DELETE", "/ns/{ns}/document"), ("POST", "/ns/{ns}/search"), ("POST", "/ns/{ns}/profile"),
    ("PUT", "/ns/{ns}/profile/buckets"), ("DELETE", "/ns/{ns}/profile/buckets"), ("POST", "/ns/{ns}/list/memories"),
    ("POST", "/ns/{ns}/list/documents/memory-counts"), ("DELETE", "/ns/{ns}/memories"),
    ("DELETE", "/ns/{ns}/memories/semantic"), ("PATCH", "/ns/{ns}"), ("PATCH", "/organization"), ("POST", "/feedback"),
]
BODIES: list[Any] = [b"{", b"[1,2]", b"null", b'"text"', b"42", b'{"unknown": 1}', b"\xff\xfe", b'{"a":' * 2000]


def _is_error_body(response: httpx.Response) -> bool:
    """ErrorResponse or ValidationErrorResponse."""
    body = response.json()
    if body.get("success") is False:
        return isinstance(body["error"], list) and all(isinstance(i["message"], str) for i in body["error"])
    return isinstance(body.get("error"), str)


@pytest.mark.parametrize("method, path", ROUTES)
def test_malformed_bodies_are_400_in_an_error_body(server: Server, ns: str, method: str, path: str) -> None:
    add_done(server.client(), ns, "A document so the namespace exists.", id="d1")
    for body in BODIES:
        response = httpx.request(method, server.url + path.format(ns=ns), content=body,
                                 headers={"Authorization": f"Bearer {server.key}", "Content-Type": "application/json"})
        if body == b"null" and path.endswith(("/profile", "/list/memories")):
            assert response.status_code == 200, response.text  # optional bodies: null is absent
            continue
        assert response.status_code == 400, (method, path, body[:20], response.text)
        assert response.headers["content-type"] == "application/json" and _is_error_body(response)


def test_unknown_routes_and_methods_answer_in_the_face_body(server: Server, ns: str) -> None:
    headers = {"Authorization": f"Bearer {server.key}"}
    for method, path, status in [("GET", f"/ns/{ns}/nothing/here", 404), ("PUT", f"/ns/{ns}/search", 405),
                                 ("GET", "/organization/x", 404), ("POST", "/ns", 405), ("GET", "/feedback", 405)]:
        response = httpx.request(method, server.url + path, headers=headers)
        assert response.status_code == status and _is_error_body(response), (method, path, response.text)
    assert httpx.get(server.url + "/xrpc/nothing").json()["error"] == "MethodNotImplemented"


def test_multipart_routes_refuse_json_and_unknown_fields(server: Server, ns: str) -> None:
    headers = {"Authorization": f"Bearer {server.key}"}
    url = f"{server.url}/ns/{ns}/document/file"
    assert httpx.post(url, json={"file": "x"}, headers=headers).status_code == 400
    response = httpx.post(url, files={"file": ("a.txt", b"Some text here.", "text/plain")}, data={"id": "x"},
                          headers=headers)
    assert response.status_code == 400 and response.json()["error"][0]["path"] == ["id"]
    response = httpx.post(url, data={"metadata": "{}"}, files={"other": ("a.txt", b"x", "text/plain")}, headers=headers)
    assert response.status_code == 400
    response = httpx.post(url, files={"file": ("a.txt", b"x", "text/plain")}, data={"fileType": "zip"}, headers=headers)
    assert response.status_code == 400


def test_query_strings_are_checked_on_every_route_that_takes_one(server: Server, ns: str) -> None:
    add_done(server.client(), ns, "A document for query checks.", id="q1")
    headers = {"Authorization": f"Bearer {server.key}"}
    for path, params in [(f"/ns/{ns}/document/q1", {"include": "chunks,bogus"}), (f"/ns/{ns}/document/q1", {"x": "1"}),
                         (f"/ns/{ns}", {"moveTo": "bad name"}), ("/ns", {"page": "x"}), ("/ns", {"limit": "1", "q": "a" * 101})]:
        method = "DELETE" if "moveTo" in params else "GET"
        response = httpx.request(method, server.url + path, params=params, headers=headers)
        assert response.status_code == 400 and _is_error_body(response), (path, params, response.text)
    response = httpx.get(f"{server.url}/ns/{ns}/document/q1", params=[("include", "chunks"), ("include", "memories")],
                         headers=headers)
    assert response.status_code == 200 and {"chunks", "memories"} <= response.json().keys()
