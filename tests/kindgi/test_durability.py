"""An answered fact write is never lost: kill -9 the server, restart it, and every fact is retrievable."""

from __future__ import annotations

import pytest
from pathlib import Path

from kindgi.client import Kindgi

from engram_index.keys import KeyStore
from tests.limits import ServeProcess

pytestmark = pytest.mark.long(18)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

SCOPE = {"tenantId": "acme", "projectId": "web"}


def test_every_answered_write_survives_kill_9_in_the_store_and_in_every_index(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token, _ = KeyStore(data).create("kindgi", {"tenant": "acme", "user": "alice", "projects": ["web"]})
    server = ServeProcess(data, "--embedder", "hashing:64")
    server.start()
    try:
        client = Kindgi(base_url=server.url, token=token, max_retries=0)
        written = {client.memory.write_fact(type="note", scope=SCOPE, content=f"kiwi{i}bird words").id: f"kiwi{i}bird"
                   for i in range(40)}
        first = next(iter(written))
        client.memory.supersede_fact(first, content="moa extinct words")
        server.kill()  # right after the last answer: keyword writes since the last commit were never committed
        server.start()
        again = Kindgi(base_url=server.url, token=token, max_retries=0)
        assert {f.id for f in again.memory.list_facts(limit=100).data} == set(written)
        for fact_id, word in written.items():
            text = f"{word} words"
            if fact_id == first:
                word, text = "moa", "moa extinct words"
            found = again.memory.retrieve(mode="keyword", query=word).results
            assert [r.fact.id for r in found] == [fact_id], word
            # The text the fact was embedded as (its words and its type: revisions.embedding_text).
            near = again.memory.retrieve(mode="semantic", query=f"{text}\n\nTags: type:note", limit=50).results
            assert {r.fact.id for r in near} == set(written)  # every fact has its vector back
            assert next(r.score for r in near if r.fact.id == fact_id) > 0.99  # its own embedded text: cosine 1
        assert again.memory.retrieve(mode="keyword", query="kiwi0bird").results == []
        assert again.memory.get_fact(first).version == 2
    finally:
        server.kill()
