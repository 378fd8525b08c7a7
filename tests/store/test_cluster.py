"""Three `serve --store postgresql://…` processes on loopback over one PostgreSQL: writes through one node,
reads through the others, `kill -9` of the writing node mid-write, and a node joining later."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kindgi.client import Kindgi

from engram_index.keys import KeyStore
from engram_index.store.postgres import PostgresStore
from tests.limits import ServeProcess

pytestmark = pytest.mark.long(90)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

SCOPE = {"tenantId": "acme", "projectId": "web"}
KILLS = 3


def node(cache: Path, url: str) -> ServeProcess:
    return ServeProcess(cache, "--store", url, "--embedder", "hashing:64")  # roomy limits: ServeProcess


@pytest.fixture
def cluster(tmp_path: Path, postgres_server: object) -> Iterator[tuple[str, str, list[ServeProcess]]]:
    url = postgres_server.database()  # type: ignore[attr-defined]
    store = PostgresStore(url)
    token, _ = KeyStore(tmp_path, store).create("kindgi", {"tenant": "acme", "user": "alice", "orgs": [],
                                                           "projects": ["web"], "admin": False})
    store.close()
    nodes = [node(tmp_path / f"node-{name}", url) for name in "abc"]
    for each in nodes:  # side by side: each start is mostly imports, which need no other node
        each.launch()
    for each in nodes:
        each.wait_ready()
    yield url, token, nodes
    for each in nodes:
        each.kill()


def write_until_stopped(url: str, token: str, stop: threading.Event, acknowledged: list[str]) -> None:
    """Write facts through one node until told to stop, keeping the id of every one acknowledged (201)."""
    n = 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as client:
        while not stop.is_set():
            n += 1
            try:
                answer = client.post("/v1/memory/facts", json={"type": "note", "scope": SCOPE,
                                                               "content": f"ledger entry {n} zebra{n}"})
            except httpx.TransportError:
                return  # the node was killed: nothing more is acknowledged by it
            if answer.status_code == 201:
                acknowledged.append(answer.json()["id"])


def test_no_acknowledged_write_is_lost_when_the_writing_node_is_killed_and_the_others_keep_answering(
        cluster: tuple[str, str, list[ServeProcess]]) -> None:
    _, token, (a, b, c) = cluster
    rng = random.Random(27)
    acknowledged: list[str] = []
    for _ in range(KILLS):
        stop = threading.Event()
        writer = threading.Thread(target=write_until_stopped, args=(a.url, token, stop, acknowledged))
        before = len(acknowledged)
        writer.start()
        deadline = time.monotonic() + 30
        while len(acknowledged) < before + 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.2))
        a.kill()  # mid-write: the writer's request in flight is cut
        stop.set()
        writer.join()
        reader = Kindgi(base_url=b.url, token=token, max_retries=0)
        assert reader.memory.get_fact(acknowledged[-1]).id == acknowledged[-1]  # B answers meanwhile
        a.start()
    assert len(acknowledged) >= 5 * KILLS
    for reader_node in (b, c):
        reader = Kindgi(base_url=reader_node.url, token=token, max_retries=0)
        missing = [i for i in acknowledged if _status(reader_node.url, token, i) != 200]
        assert missing == []
        last = int(reader.memory.get_fact(acknowledged[-1]).content.split()[2])  # type: ignore[union-attr]
        assert _eventually(lambda: acknowledged[-1] in [
            r.fact.id for r in reader.memory.retrieve(mode="keyword", query=f"zebra{last}").results])


def test_a_node_joining_later_serves_every_fact_written_before_it(
        tmp_path: Path, cluster: tuple[str, str, list[ServeProcess]]) -> None:
    url, token, (a, _, _) = cluster
    writer = Kindgi(base_url=a.url, token=token, max_retries=0)
    ids = [writer.memory.write_fact(type="note", scope=SCOPE, content=f"harbour note {i}").id for i in range(12)]
    joined = node(tmp_path / "node-d", url)
    joined.start()
    try:
        reader = Kindgi(base_url=joined.url, token=token, max_retries=0)
        assert _eventually(lambda: sorted(r.fact.id for r in reader.memory.retrieve(
            mode="keyword", query="harbour", limit=50).results) == sorted(ids))
        later = writer.memory.write_fact(type="note", scope=SCOPE, content="harbour late").id
        assert _eventually(lambda: later in [r.fact.id for r in reader.memory.retrieve(
            mode="keyword", query="late").results])
    finally:
        joined.kill()


def _status(url: str, token: str, fact_id: str) -> int:
    return httpx.get(f"{url}/v1/memory/facts/{fact_id}", headers={"Authorization": f"Bearer {token}"}).status_code


def _eventually(check: object, within_s: float = 30.0) -> bool:
    """Whether `check()` holds before a generous deadline (waiting for a condition, timing nothing)."""
    assert callable(check)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return bool(check())
