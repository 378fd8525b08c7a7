"""Admission on the Kindgi face: a token bucket per caller (token), answered 429 rate-limit-exceeded.

Raw HTTP checks the exact status, envelope and Retry-After; the official SDK shows what a client
makes of it: RateLimitedError with the wait, and a retry after Retry-After that is admitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kindgi.client import Kindgi, RateLimitedError

from engram_index.admission import Admission
from tests.kindgi.server import Server, kindgi_server
from tests.limits import ServeProcess

SCOPE = {"tenantId": "acme", "projectId": "web"}
FACTS = "/v1/memory/facts"


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[Server]:
    """A server admitting two requests per token, then one every ten seconds."""
    with kindgi_server(tmp_path / "data", key_limits=Admission(rate=0.1, burst=2)) as running:
        yield running


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_token_past_its_rate_gets_429_rate_limit_exceeded_with_retry_after(slow: Server) -> None:
    token = slow.token(user="alice", projects=["web"])
    answers = [httpx.get(slow.url + FACTS, headers={**_auth(token), "X-Request-Id": f"r{i}"}) for i in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    refused = answers[2]
    error = refused.json()["error"]
    assert set(refused.json()) == {"error"} and error["code"] == "rate-limit-exceeded"
    assert error["requestId"] == refused.headers["X-Request-Id"] == "r2"
    assert isinstance(error["message"], str) and error["message"]
    assert refused.headers["Retry-After"].isdigit() and 1 <= int(refused.headers["Retry-After"]) <= 10
    assert error["details"]["retryAfterSeconds"] == int(refused.headers["Retry-After"])
    assert refused.headers["content-type"].startswith("application/json")


def test_the_sdk_raises_rate_limited_error_with_the_wait_it_was_told(slow: Server) -> None:
    client = slow.client(user="alice", projects=["web"])
    client.memory.list_facts()
    client.memory.list_facts()
    with pytest.raises(RateLimitedError) as caught:
        client.memory.list_facts()
    assert caught.value.server_code == "rate-limit-exceeded" and caught.value.status == 429
    assert caught.value.retry_after_seconds is not None and 1 <= caught.value.retry_after_seconds <= 10
    assert caught.value.request_id is not None


def test_the_sdk_waits_out_retry_after_and_its_retry_is_admitted(tmp_path: Path) -> None:
    seen: list[int] = []
    with kindgi_server(tmp_path / "data", key_limits=Admission(rate=1.0, burst=1)) as running:
        http = httpx.Client(event_hooks={"response": [lambda r: seen.append(r.status_code)]})
        client = Kindgi(base_url=running.url, token=running.token(user="alice", projects=["web"]), max_retries=2,
                        http_client=http)
        client.memory.write_fact(type="note", scope=SCOPE, content="first")
        second = client.memory.write_fact(type="note", scope=SCOPE, content="second")  # a POST: retried on 429
        assert [f.content for f in client.memory.list_facts().data if f.id == second.id] == ["second"]
    assert seen[:3] == [201, 429, 201]


def test_one_tokens_limit_does_not_refuse_another_token(slow: Server) -> None:
    first, second = slow.token(user="alice", projects=["web"]), slow.token(user="bob", projects=["web"])
    assert [httpx.get(slow.url + FACTS, headers=_auth(first)).status_code for _ in range(3)] == [200, 200, 429]
    assert httpx.get(slow.url + FACTS, headers=_auth(second)).status_code == 200


def test_a_refused_write_writes_nothing_and_leaves_its_idempotency_key_free(slow: Server) -> None:
    token = slow.token(user="alice", projects=["web"])
    admin = slow.token(admin=True)
    body = {"type": "note", "scope": SCOPE, "content": "refused"}
    headers = {**_auth(token), "Idempotency-Key": "k-1"}
    assert httpx.post(slow.url + FACTS, headers=_auth(token), json={**body, "content": "kept"}).status_code == 201
    assert httpx.get(slow.url + FACTS, headers=_auth(token)).status_code == 200
    assert httpx.post(slow.url + FACTS, headers=headers, json=body).status_code == 429
    contents = [f["content"] for f in httpx.get(slow.url + FACTS, headers=_auth(admin)).json()["data"]]
    assert contents == ["kept"]


def test_a_request_without_a_valid_token_is_401_not_a_refusal_of_someone_elses_budget(slow: Server) -> None:
    token = slow.token(user="alice", projects=["web"])
    for _ in range(5):
        assert httpx.get(slow.url + FACTS, headers=_auth("kgi_bt_nobody")).status_code == 401
    assert httpx.get(slow.url + FACTS, headers=_auth(token)).status_code == 200


def test_serve_takes_the_per_key_rate_and_burst(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServeProcess(data, "--embedder", "none", "--key-rate", "0.1", "--key-burst", "2")
    server.start()
    try:
        token = Server(server.url, data).token(user="alice", projects=["web"])
        statuses = [httpx.get(server.url + FACTS, headers=_auth(token)).status_code for _ in range(3)]
    finally:
        server.kill()
    assert statuses == [200, 200, 429]
