"""Under `serve --workers` the processes are read-only: searches work, every write is refused clearly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import supermemory

from tests.limits import roomy_app, roomy_embedding
from engram_index.collections import Collections
from engram_index.embed.hashing import HashingEmbedder
from engram_index.engram.auth import InsecureOpen
from engram_index.testkit.serve import serving
from tests.supermemory.conftest import Server, add_done, running

pytestmark = pytest.mark.long(22)  # seconds in all on a 2-core machine: run first (tests/conftest.py)


def _read_only_app(data: Path) -> Any:
    """A read-only app over `data`, as `serve --workers` makes one: every index caught up first."""
    writer = Collections(data)
    writer.catch_up()
    writer.close()
    return roomy_app(data, "did:web:localhost", authenticator=InsecureOpen(),
                     embedding=roomy_embedding(HashingEmbedder(64)), read_only=True)


def test_a_read_only_process_searches_and_refuses_writes(tmp_path: Path) -> None:
    with running(tmp_path, HashingEmbedder(64)) as srv:
        add_done(srv.client(), "shared", "Read-only replicas still answer searches.")
        key = srv.key
    app = _read_only_app(tmp_path)
    with serving(app) as url:
        client = Server(url, tmp_path, key, app).client()
        assert client.search("shared", query="replicas", search_mode="memories").results
        for write in (lambda: client.add("shared", content="x"), lambda: client.memories.forget("shared", ids=["m"]),
                      lambda: client.namespaces.delete("shared")):
            with pytest.raises(supermemory.PermissionDeniedError) as err:
                write()
            assert "--workers" in err.value.body["details"]


def test_serve_workers_on_a_fresh_data_directory_answers_v5_reads(tmp_path: Path) -> None:
    from supermemory import Supermemory

    from engram_index.keys import KeyStore
    from tests.limits import ServeProcess

    token, _ = KeyStore(tmp_path).create("supermemory", {"namespaces": None})
    with ServeProcess(tmp_path, "--embedder", "hashing:64", "--workers", "2") as server:
        client = Supermemory(api_key=token, base_url=server.url, max_retries=0)
        assert client.namespaces.list().namespaces == []
        assert client.search("nothing", query="x").results == []
        with pytest.raises(supermemory.PermissionDeniedError):
            client.add("nothing", content="x")


def test_a_read_only_process_leaves_expired_memories_out_without_sweeping_them(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from engram_index.supermemory import expiry
    from engram_index.supermemory.face import stamp

    with running(tmp_path, HashingEmbedder(64)) as srv:
        add_done(srv.client(), "shared", "The promo code works this week.",
                 metadata={"forgetAfter": "2000-01-01T00:00:00Z"})
        add_done(srv.client(), "shared", "The promo banner is blue.")
        key = srv.key
    app = _read_only_app(tmp_path)
    with serving(app) as url:
        client = Server(url, tmp_path, key, app).client()
        found = client.search("shared", query="promo code banner", search_mode="memories", threshold=0).results
        assert [r.memory for r in found] == ["The promo banner is blue."]
        face = app.state.supermemory
        face.sweeps.shutdown(wait=True)  # whatever sweep the search scheduled has run
        assert expiry.unswept(face, "shared", stamp())
        assert not [r for r in caplog.records if "sweeping" in r.getMessage()]
