"""Every face through its own client against a served app on each store: SQLite and `--store postgresql://…`."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.limits import roomy_app
from engram_index.collections import Collections
from engram_index.embed.hashing import HashingEmbedder
from engram_index.engine.types import Document
from engram_index.engram.auth import InsecureOpen
from engram_index.store.base import StoredDocument
from engram_index.testkit.serve import serving
from tests.engram.api.server import wait_until_loaded
from tests.kindgi.server import kindgi_server
from tests.supermemory.conftest import running, wait_done

SPACE = "at://did:plc:both234both234both234both/space/garden.engram.space/s"
SCOPE = {"tenantId": "acme", "projectId": "web"}


def test_the_kindgi_sdk_writes_supersedes_lists_and_retrieves_facts(tmp_path: Path, store_url: str | None) -> None:
    with kindgi_server(tmp_path / "data", store=store_url) as server:
        client = server.client(user="alice", projects=["web"])
        first = client.memory.write_fact(type="preference", scope=SCOPE, content={"drink": "green tea"})
        second = client.memory.supersede_fact(first.id, content={"drink": "oolong"}, expect_version=1)
        assert second.version == 2 and client.memory.get_fact(first.id, version=1).content == {"drink": "green tea"}
        listed = client.memory.list_facts(scope_kind="project", scope_id="web")
        assert [f.id for f in listed.data] == [first.id]
        found = client.memory.retrieve(mode="keyword", query="oolong")
        assert [r.fact.id for r in found.results] == [first.id]


def test_the_supermemory_sdk_adds_a_document_and_finds_its_memory(tmp_path: Path, store_url: str | None) -> None:
    with running(tmp_path / "data", HashingEmbedder(256), store=store_url) as server:
        client = server.client()
        ref = client.add("notes", content="I live in Paris. I work at Acme as an engineer.")
        assert wait_done(client, "notes", ref.id).system.status == "done"
        found = client.search("notes", query="where do I live", search_mode="memories")
        assert [r.memory for r in found.results][0] == "I live in Paris."


def test_garden_engram_search_answers_from_records_written_to_the_store(tmp_path: Path, store_url: str | None) -> None:
    data = tmp_path / "data"
    spaces = Collections(data, store=store_url)
    spaces.ensure_collection(SPACE)
    spaces.write(SPACE, [StoredDocument(Document(
        id=f"{SPACE}/did:plc:a/garden.engram.memory/r{i}", author="did:plc:a", text=text,
        created_ms=1_700_000_000_000 + i, metadata={"cid": "bafyreiexample"}))
        for i, text in enumerate(["deploy the HTTPServer on friday", "pasta with tomatoes"])])
    spaces.close()
    with serving(roomy_app(data, "did:web:index.example", authenticator=InsecureOpen(), store=store_url)) as url:
        wait_until_loaded(url, SPACE)
        answer = httpx.get(f"{url}/xrpc/garden.engram.searchMemories", params={"space": SPACE, "q": "pasta"})
        assert answer.status_code == 200
        assert [m["text"] for m in answer.json()["memories"]] == ["pasta with tomatoes"]


def test_a_nul_character_is_a_kindgi_400_on_postgresql_and_kept_on_sqlite(tmp_path: Path, store_url: str | None) -> None:
    with kindgi_server(tmp_path / "data", store=store_url) as server:
        token = server.token(user="alice", projects=["web"])
        answer = httpx.post(f"{server.url}/v1/memory/facts", headers={"Authorization": f"Bearer {token}"},
                            json={"type": "note", "scope": SCOPE, "content": "a\u0000b"})
        if store_url is None:
            assert answer.status_code == 201
        else:
            assert answer.status_code == 400 and answer.json()["error"]["code"] == "bad-input"
