"""GET /metrics over a real served app: the named series exist and their values move with requests."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from supermemory import Supermemory

from engram_index.embed.hashing import HashingEmbedder
from engram_index.engram.api.limits import SpaceLimits
from engram_index.engram.auth import InsecureOpen
from engram_index.keys import KeyStore
from engram_index.testkit.serve import serving
from tests.limits import ServeProcess
from tests.limits import roomy_app, roomy_embedding

pytestmark = pytest.mark.long(30)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

SRC = str(Path(__file__).resolve().parents[1] / "src")
NO_SPACE = "at://did:plc:nobodynobodynobodynobody/space/garden.engram.space/none"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    """Every sample of /metrics, by name and labels."""
    answer = httpx.get(f"{url}/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    out: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when the series does not exist yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A served app (hashing embedder; one garden.engram search a space per day) and a v5 key."""
    # One search a space a day: the refusals counted are garden.engram's; every other limit is roomy.
    app = roomy_app(tmp_path, "did:web:localhost", authenticator=InsecureOpen(),
                    embedding=roomy_embedding(HashingEmbedder(64)), limits=SpaceLimits(rate=1e-6, burst=1))
    token, _ = KeyStore(tmp_path).create("supermemory", {"namespaces": None})
    with serving(app) as url:
        yield url, token


def test_every_named_series_is_exposed_before_any_request(served: tuple[str, str]) -> None:
    samples = scrape(served[0])
    names = {name for name, _ in samples}
    for name in ("engram_http_requests_total", "engram_http_request_duration_seconds_bucket",
                 "engram_http_requests_in_flight", "engram_searches_total",
                 "engram_query_embedding_duration_seconds_count", "engram_index_lag_seconds_count",
                 "engram_memories", "engram_collections_loaded", "engram_collections", "engram_refusals_total"):
        assert name in names, name
    # Alerting counters exist at zero, so that rate() has a series from the start.
    assert ("engram_searches_total", frozenset({("face", "kindgi"), ("result", "busy")})) in samples
    assert ("engram_refusals_total", frozenset({("reason", "rate_limited")})) in samples
    assert not any(name.endswith("_created") for name in names)


def test_the_counters_move_with_requests_by_route_template_face_and_result(served: tuple[str, str]) -> None:
    url, token = served
    before = scrape(url)
    client = Supermemory(api_key=token, base_url=url, max_retries=0)
    ref = client.add("notes", content="The staging database moved to Frankfurt.")
    deadline = time.monotonic() + 30
    while client.documents.get("notes", ref.id).system.status not in ("done", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    client.search("notes", query="where is the staging database?")
    search = f"{url}/xrpc/garden.engram.searchMemories"
    assert httpx.get(search, params={"space": NO_SPACE, "q": "x"}).status_code == 400  # the day's one search
    assert httpx.get(search, params={"space": NO_SPACE, "q": "x"}).status_code == 429
    assert httpx.get(f"{url}/no/such/route/{os.getpid()}").status_code == 404
    after = scrape(url)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("engram_http_requests_total", route="/ns/{namespace}/search", method="POST", code="200") == 1
    assert moved("engram_http_requests_total", route="/ns/{namespace}/document", method="POST", code="200") == 1
    assert moved("engram_http_requests_total", route="/ns/{namespace}/document/{id}", method="GET", code="200") >= 1
    # An unknown path is one bounded label value, whatever the path was.
    assert moved("engram_http_requests_total", route="unmatched", method="GET", code="404") == 1
    assert moved("engram_http_request_duration_seconds_count", route="/ns/{namespace}/search") == 1
    assert moved("engram_searches_total", face="supermemory", result="ok") == 1
    assert moved("engram_searches_total", face="garden.engram", result="invalid") == 1
    assert moved("engram_searches_total", face="garden.engram", result="rate_limited") == 1
    assert moved("engram_refusals_total", reason="rate_limited") == 1
    assert moved("engram_query_embedding_duration_seconds_count") >= 1  # the v5 search embedded its query
    # The document became searchable (its wait from the acknowledged add to indexed).
    assert moved("engram_index_lag_seconds_count") >= 1
    assert value(after, "engram_memories") >= 1
    assert value(after, "engram_collections_loaded") >= 1
    assert value(after, "engram_collections") >= 1
    assert value(after, "engram_http_requests_in_flight") == 1  # the scrape itself


def test_serve_with_workers_counts_the_requests_of_every_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)  # serve makes its own for its workers
    server = ServeProcess(tmp_path, "--embedder", "none", "--workers", "2")
    describe = f"{server.url}/xrpc/garden.engram.describeService"
    server.start()
    try:
        for _ in range(8):
            # A new connection each time: the two workers share the listening socket.
            assert httpx.get(describe).status_code == 200
        for _ in range(6):  # whichever worker answers the scrape, it adds up both workers' counts
            samples = scrape(server.url)
            assert value(samples, "engram_http_requests_total", route="/xrpc/garden.engram.describeService",
                         method="GET", code="200") == 8
    finally:
        server.stop()


def test_route_labels_stay_bounded_whatever_paths_clients_send(served: tuple[str, str]) -> None:
    url, token = served
    for i in range(5):
        httpx.get(f"{url}/no/such/{i}/{os.getpid()}")
        httpx.post(f"{url}/ns/namespace{i}/search", headers={"authorization": f"Bearer {token}"},
                   json={"query": "x"})
    routes = {dict(labels)["route"] for name, labels in scrape(url) if name == "engram_http_requests_total"}
    # The metrics are the process's: other tests' routes may be there too, never these raw paths.
    assert not any(f"namespace{i}" in r for r in routes for i in range(5))
    assert not any("/no/such" in r for r in routes) and "unmatched" in routes
    assert "/ns/{namespace}/search" in routes
