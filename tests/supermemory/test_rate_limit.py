"""Admission on the v5 face: a token bucket per key, answered 429 in ErrorResponse with Retry-After.

The spec names no 429, but the official SDK maps it to RateLimitError and retries it after
Retry-After: raw HTTP checks the exact answer, the SDK what a client makes of it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import supermemory
from supermemory import Supermemory

from engram_index.admission import Admission
from engram_index.embed.hashing import HashingEmbedder
from engram_index.testkit.serve import free_port
from tests.limits import ServeProcess
from tests.supermemory.conftest import Server, running


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[Server]:
    """A server admitting two requests per key, then one every ten seconds."""
    with running(tmp_path / "data", HashingEmbedder(64), key_limits=Admission(rate=0.1, burst=2)) as srv:
        yield srv


def _search(server: Server, key: str, ns: str = "n1") -> httpx.Response:
    return httpx.post(f"{server.url}/ns/{ns}/search", headers={"Authorization": f"Bearer {key}"}, json={"query": "bike"})


def test_a_key_past_its_rate_gets_429_in_error_response_with_retry_after(slow: Server) -> None:
    answers = [_search(slow, slow.key) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    refused = answers[2]
    body = refused.json()
    assert set(body) <= {"error", "details"} and all(isinstance(v, str) for v in body.values())
    assert body["error"] == "rate limit exceeded"
    assert refused.headers["Retry-After"].isdigit() and 1 <= int(refused.headers["Retry-After"]) <= 10
    assert refused.headers["content-type"].startswith("application/json")


def test_the_sdk_raises_rate_limit_error_on_a_refusal(slow: Server) -> None:
    client = slow.client()  # max_retries=0: the refusal itself reaches the caller
    client.search("n1", query="bike")
    client.search("n1", query="bike")
    with pytest.raises(supermemory.RateLimitError) as caught:
        client.search("n1", query="bike")
    assert caught.value.status_code == 429


def test_the_sdk_waits_out_retry_after_and_its_retry_is_admitted(tmp_path: Path) -> None:
    seen: list[int] = []
    with running(tmp_path / "data", HashingEmbedder(64), key_limits=Admission(rate=1.0, burst=1)) as srv:
        http = httpx.Client(event_hooks={"response": [lambda r: seen.append(r.status_code)]})
        client = Supermemory(api_key=srv.key, base_url=srv.url, max_retries=2, http_client=http)
        client.search("n1", query="bike")
        client.search("n1", query="bike")
    assert seen[:3] == [200, 429, 200]


def test_one_keys_limit_does_not_refuse_another_key(slow: Server) -> None:
    other, _ = slow.mint(["n1"])
    assert [_search(slow, slow.key).status_code for _ in range(3)] == [200, 200, 429]
    assert _search(slow, other).status_code == 200


def test_a_refused_document_add_adds_nothing(slow: Server) -> None:
    headers = {"Authorization": f"Bearer {slow.key}"}
    add = lambda doc_id: httpx.post(f"{slow.url}/ns/n2/document", headers=headers,
                                    json={"content": "my bike is green", "id": doc_id})
    assert add("kept").status_code == 200
    assert _search(slow, slow.key).status_code == 200
    assert add("refused").status_code == 429
    assert slow.app.state.supermemory is not None  # the face is up; the refused id was never stored:
    other, _ = slow.mint(None)
    got = httpx.get(f"{slow.url}/ns/n2/document/refused", headers={"Authorization": f"Bearer {other}"})
    assert got.status_code == 404


def test_a_request_with_an_unknown_key_is_401_and_spends_no_real_keys_budget(slow: Server) -> None:
    for _ in range(5):
        assert _search(slow, "sm_nobody").status_code == 401
    assert _search(slow, slow.key).status_code == 200


def test_serve_takes_the_per_key_rate_and_burst_for_v5(tmp_path: Path) -> None:
    data = tmp_path / "data"
    key = subprocess.run([sys.executable, "-m", "engram_index.cli", "keys", "create", "supermemory", "--data",
                          str(data)], check=True, capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
                         ).stdout.split()[-1]
    server = ServeProcess(data, "--embedder", "none", "--key-rate", "0.1", "--key-burst", "2")
    server.start()
    try:
        statuses = [httpx.post(f"{server.url}/ns/n1/search", headers={"Authorization": f"Bearer {key}"},
                               json={"query": "bike"}).status_code for _ in range(3)]
    finally:
        server.kill()
    assert statuses == [200, 200, 429]
    assert free_port()  # the port is free again


def test_workers_admit_per_key_as_the_parents_options_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    from engram_index.app import WORKER_CONFIG_ENV, worker_app
    from engram_index.settings import ServeSettings
    from tests.limits import roomy_app
    from engram_index.engram.auth import InsecureOpen
    from engram_index.keys import KeyStore
    from engram_index.testkit.serve import serving

    data = tmp_path / "d"
    with serving(roomy_app(data, "did:web:localhost", authenticator=InsecureOpen())):
        pass  # the data directory (and the v5 tables) a worker opens read-only
    key, _ = KeyStore(data).create("supermemory", {"namespaces": None})
    monkeypatch.setenv(WORKER_CONFIG_ENV, ServeSettings(
        data=str(data), service_did="did:web:localhost", insecure_open=True, key_rate=0.1, key_burst=1,
        embedder="none", search_threads=1,
    ).to_json())
    with serving(worker_app()) as url:
        statuses = [httpx.post(f"{url}/ns/n1/search", headers={"Authorization": f"Bearer {key}"},
                               json={"query": "bike"}).status_code for _ in range(2)]
    assert statuses == [200, 429]
