"""PostgreSQL going away under a served app: each face answers a clear 503 in its own envelope, then recovers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engram_index.testkit.postgres import PostgresServer
from tests.kindgi.server import kindgi_server
from tests.supermemory.conftest import running

SCOPE = {"tenantId": "acme", "projectId": "web"}


@pytest.fixture
def own_server(postgres_server: object) -> Iterator[PostgresServer]:
    """A server of this test's own (it is stopped and started again), once the suite's server has started."""
    server = PostgresServer()
    yield server
    server.close()


def test_while_postgresql_is_down_kindgi_answers_503_in_its_envelope_and_nothing_acknowledged_is_lost(
        tmp_path: Path, own_server: PostgresServer) -> None:
    with kindgi_server(tmp_path / "data", store=own_server.database()) as server:
        token = server.token(user="alice", projects=["web"])
        headers = {"Authorization": f"Bearer {token}"}
        written = httpx.post(f"{server.url}/v1/memory/facts", headers=headers,
                             json={"type": "note", "scope": SCOPE, "content": "kept"})
        assert written.status_code == 201
        own_server.stop()
        down = httpx.post(f"{server.url}/v1/memory/facts", headers=headers,
                          json={"type": "note", "scope": SCOPE, "content": "refused"}, timeout=30)
        assert down.status_code == 503 and down.json()["error"]["code"] == "service-unavailable"
        own_server.start()
        back = httpx.get(f"{server.url}/v1/memory/facts/{written.json()['id']}", headers=headers, timeout=30)
        assert back.status_code == 200 and back.json()["content"] == "kept"


def test_while_postgresql_is_down_supermemory_answers_503_in_its_envelope(
        tmp_path: Path, own_server: PostgresServer) -> None:
    with running(tmp_path / "data", None, store=own_server.database()) as server:
        headers = {"Authorization": f"Bearer {server.key}"}
        added = httpx.post(f"{server.url}/ns/notes/document", headers=headers, json={"content": "kept"})
        assert added.status_code < 300
        own_server.stop()
        down = httpx.post(f"{server.url}/ns/notes/document", headers=headers, json={"content": "x"}, timeout=30)
        assert down.status_code == 503 and down.headers["content-type"].startswith("application/json")
        assert set(down.json()) >= {"error"}
        own_server.start()
        back = httpx.get(f"{server.url}/ns/notes/document/{added.json()['id']}", headers=headers, timeout=30)
        assert back.status_code == 200
