"""A path with a trailing slash gets the face's JSON error, not a bodyless redirect (found by the fuzzer)."""

from __future__ import annotations

import httpx

from tests.supermemory.conftest import Server


def test_a_path_with_a_trailing_slash_is_a_json_error_not_a_bodyless_redirect(server: Server, ns: str) -> None:
    headers = {"Authorization": f"Bearer {server.key}"}
    for method, path in [("GET", f"/ns/{ns}/document/"), ("PUT", "/ns/"), ("POST", f"/ns/{ns}/search/")]:
        response = httpx.request(method, server.url + path, headers=headers)
        assert 400 <= response.status_code < 500, (method, path, response.status_code)
        assert isinstance(response.json()["error"], str), (method, path, response.text)
