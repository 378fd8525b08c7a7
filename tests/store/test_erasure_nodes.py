"""An erased Kindgi fact leaves no byte in any node's cache: nodes purge it when they read the erasure's mark."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kindgi.client import Kindgi

from engram_index.collections import Collections
from tests.kindgi.server import kindgi_server
from tests.limits import PATIENCE_S

SCOPE = {"tenantId": "acme", "projectId": "web"}


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _cache_bytes(cache: Path) -> bytes:
    return b"".join(p.read_bytes() for p in cache.rglob("*") if p.is_file())


def _files_holding(cache: Path, word: bytes) -> list[str]:
    return [str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file() and word in p.read_bytes()]


def _finished(admin: Kindgi, erasure_id: str) -> str:
    deadline = time.monotonic() + PATIENCE_S
    while (status := admin.memory.get_erasure(erasure_id).status) not in ("completed", "failed"):
        assert time.monotonic() < deadline, "the erasure did not finish"
        time.sleep(0.05)
    return str(status)


def test_a_fact_erased_through_one_node_leaves_no_byte_in_another_nodes_cache(
        tmp_path: Path, postgres_server: object) -> None:
    url = postgres_server.database()  # type: ignore[attr-defined]
    with kindgi_server(tmp_path / "node-a", store=url) as a, kindgi_server(tmp_path / "node-b", store=url) as b:
        writer, admin = a.client(user="alice", projects=["web"]), a.client(admin=True)
        reader = b.client(user="alice", projects=["web"])
        fact = writer.memory.write_fact(type="note", scope=SCOPE, content="the bilbysecret of the vault")
        kept = writer.memory.write_fact(type="note", scope=SCOPE, content="the kept words")
        _until(lambda: [r.fact.id for r in reader.memory.retrieve(mode="keyword", query="bilbysecret").results]
               == [fact.id], "node B never found the fact")
        node_b: Collections = b.app.state.spaces
        node_b.commit()  # the word is in node B's keyword segments and term counts on disk
        assert _files_holding(b.data, b"bilbysecret"), "node B's cache should hold the word before the erasure"

        assert _finished(admin, str(admin.memory.create_erasure({"factId": fact.id}).id)) == "completed"
        space = next(uri for uri in node_b.store.collections())
        mark = node_b.store.purges([node_b.info(space).id])[node_b.info(space).id]  # type: ignore[attr-defined]
        assert mark > 0
        _until(lambda: node_b.purged(space) >= mark, "node B did not report purging the erasure")

        assert b"bilbysecret" not in _cache_bytes(b.data), _files_holding(b.data, b"bilbysecret")
        assert b"bilbysecret" not in _cache_bytes(a.data), _files_holding(a.data, b"bilbysecret")
        assert reader.memory.retrieve(mode="keyword", query="bilbysecret").results == []
        assert [r.fact.id for r in reader.memory.retrieve(mode="keyword", query="kept").results] == [kept.id]


def test_a_node_that_was_away_during_an_erasure_purges_its_cache_when_it_loads_again(
        tmp_path: Path, postgres_server: object) -> None:
    url = postgres_server.database()  # type: ignore[attr-defined]
    with kindgi_server(tmp_path / "node-a", store=url) as a:
        writer, admin = a.client(user="alice", projects=["web"]), a.client(admin=True)
        fact = writer.memory.write_fact(type="note", scope=SCOPE, content="the dibblersecret of the vault")
        with kindgi_server(tmp_path / "node-b", store=url) as b:
            reader = b.client(user="alice", projects=["web"])
            _until(lambda: bool(reader.memory.retrieve(mode="keyword", query="dibblersecret").results),
                   "node B never found the fact")
        assert _files_holding(tmp_path / "node-b", b"dibblersecret")  # node B stopped with the word on disk
        assert _finished(admin, str(admin.memory.create_erasure({"factId": fact.id}).id)) == "completed"
        with kindgi_server(tmp_path / "node-b", store=url) as b:
            reader = b.client(user="alice", projects=["web"])
            assert reader.memory.retrieve(mode="keyword", query="dibblersecret").results == []
            node_b: Collections = b.app.state.spaces
            space = next(uri for uri in node_b.store.collections())
            _until(lambda: node_b.purged(space) > 0, "node B did not purge the erasure it missed")
            assert _files_holding(b.data, b"dibblersecret") == []
