"""PostgreSQL stopped (pg_ctl stop -m fast) and started again under load: two `serve --store` nodes serving
every face, a steady writer through one and a searcher through the other. While it is down each face
answers 503 in its own envelope (never a 500, never a hang); after it is back no acknowledged write is
lost and both nodes follow each other's writes again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from engram_index.collections import Collections
from engram_index.keys import KeyStore
from engram_index.store.postgres import PostgresStore
from engram_index.testkit.postgres import PostgresServer
from tests.limits import ServeProcess
from tests.limits import PATIENCE_S

SCOPE = {"tenantId": "acme", "projectId": "web"}
SPACE = "at://did:plc:outage234outage234outage2/space/garden.engram.space/s"
# Statuses a request may get while PostgreSQL goes away and comes back: served, or 503 (never a 500).
SERVED_OR_UNAVAILABLE = {200, 201, 503}


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _read_past_503s(client: httpx.Client, path: str) -> int:
    """A GET's status once it is not 503: a node's pool may still be reconnecting just after the restart
    (a 503 is its clear "retry", not a lost write)."""
    deadline = time.monotonic() + PATIENCE_S
    while (status := client.get(path).status_code) == 503:
        assert time.monotonic() < deadline, f"{path} stayed 503"
        time.sleep(0.05)
    return status


class Load:
    """A writer of Kindgi facts through one node and a searcher through the other, until stopped."""

    def __init__(self, writer_url: str, searcher_url: str, token: str) -> None:
        self.acknowledged: list[str] = []
        self.statuses: set[int] = set()
        self.stop = threading.Event()
        headers = {"Authorization": f"Bearer {token}"}
        self._threads = [threading.Thread(target=self._write, args=(writer_url, headers)),
                         threading.Thread(target=self._search, args=(searcher_url, headers))]

    def _write(self, url: str, headers: dict[str, str]) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=PATIENCE_S) as client:
            n = 0
            while not self.stop.is_set():
                n += 1
                answer = client.post("/v1/memory/facts", json={"type": "note", "scope": SCOPE,
                                                               "content": f"ledger entry {n}"})
                self.statuses.add(answer.status_code)
                if answer.status_code == 201:
                    self.acknowledged.append(answer.json()["id"])
                else:
                    time.sleep(0.05)  # a client backing off a 503

    def _search(self, url: str, headers: dict[str, str]) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=PATIENCE_S) as client:
            while not self.stop.is_set():
                answer = client.post("/v1/memory/retrieve", json={"mode": "keyword", "query": "ledger", "limit": 5})
                self.statuses.add(answer.status_code)
                time.sleep(0.02)

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(PATIENCE_S)


@pytest.fixture
def nodes(tmp_path: Path, postgres_server: object) -> Iterator[tuple[PostgresServer, str, str, str, str]]:
    """A PostgreSQL server of this test's own (it is stopped and started), two nodes over it, a Kindgi token
    and a v5 key; a garden.engram space with one memory."""
    server = PostgresServer()
    url = server.database()
    store = PostgresStore(url)
    token, _ = KeyStore(tmp_path, store).create("kindgi", {"tenant": "acme", "user": "alice", "orgs": [],
                                                           "projects": ["web"], "admin": False})
    v5_key, _ = KeyStore(tmp_path, store).create("supermemory", {"namespaces": None})
    store.close()
    seed = Collections(tmp_path / "seed", store=url)
    seed.ensure_collection(SPACE)
    seed.close()
    a, b = (ServeProcess(tmp_path / f"node-{name}", "--store", url, "--embedder", "hashing:64") for name in "ab")
    a.start()
    b.start()
    yield server, a.url, b.url, token, v5_key
    a.kill()
    b.kill()
    server.close()


def _probe_every_face(url: str, token: str, v5_key: str) -> list[tuple[str, httpx.Response]]:
    """One request of each face that must reach the store (a write, or a lookup of a key or space)."""
    kindgi = {"Authorization": f"Bearer {token}"}
    v5 = {"Authorization": f"Bearer {v5_key}"}
    with httpx.Client(base_url=url, timeout=PATIENCE_S) as client:
        return [
            ("kindgi", client.post("/v1/memory/facts", headers=kindgi,
                                   json={"type": "note", "scope": SCOPE, "content": "refused"})),
            ("v5", client.post("/ns/notes/document", headers=v5, json={"content": "refused"})),
            ("v5", client.post("/ns/notes/search", headers=v5, json={"query": "refused"})),
            ("xrpc", client.get("/xrpc/garden.engram.searchMemories", params={"space": SPACE, "q": "refused"})),
        ]


def _an_envelope_of(face: str, answer: httpx.Response) -> bool:
    """Whether a 503 is the face's own JSON error envelope."""
    body = answer.json()
    if face == "kindgi":
        return bool(body["error"]["code"] == "service-unavailable" and body["error"]["message"])
    if face == "xrpc":
        return isinstance(body.get("error"), str) and isinstance(body.get("message"), str)
    return "error" in body  # supermemory v5: {"error": …, "details": …}


def test_postgresql_restarted_under_load_answers_503s_in_each_envelope_and_loses_no_acknowledged_write(
        nodes: tuple[PostgresServer, str, str, str, str]) -> None:
    server, a, b, token, v5_key = nodes
    headers = {"Authorization": f"Bearer {token}"}
    with Load(a, b, token) as load:
        _until(lambda: len(load.acknowledged) >= 20, "the writer made no progress before the outage")
        server.stop()
        for url in (a, b):
            for face, answer in _probe_every_face(url, token, v5_key):
                assert answer.status_code == 503, (face, url, answer.status_code, answer.text)
                assert answer.headers["content-type"].startswith("application/json"), (face, answer.text)
                assert _an_envelope_of(face, answer), (face, answer.text)
        acknowledged_while_down = len(load.acknowledged)
        server.start()
        _until(lambda: len(load.acknowledged) > acknowledged_while_down + 20, "the writer did not resume")
    assert load.statuses <= SERVED_OR_UNAVAILABLE, load.statuses

    for url in (a, b):  # nothing acknowledged before, during or after the outage is missing on either node
        with httpx.Client(base_url=url, headers=headers, timeout=PATIENCE_S) as client:
            answers = {i: _read_past_503s(client, f"/v1/memory/facts/{i}") for i in load.acknowledged}
        assert [s for s in answers.values() if s != 200] == [], (url, len(load.acknowledged))

    # Both nodes tail again: a fact written through one after the restart is found by the other's index.
    fresh = httpx.post(f"{a}/v1/memory/facts", headers=headers, timeout=PATIENCE_S,
                       json={"type": "note", "scope": SCOPE, "content": "afterwards platypus"}).json()["id"]

    def found_on_b() -> bool:
        answer = httpx.post(f"{b}/v1/memory/retrieve", headers=headers, timeout=PATIENCE_S,
                            json={"mode": "keyword", "query": "platypus"})
        return answer.status_code == 200 and [r["fact"]["id"] for r in answer.json()["results"]] == [fresh]

    _until(found_on_b, "node B did not resume tailing the change log")
