"""The reference Python client against us, unmodified: every request its agent makes (warm, recall,
list, get, status), signed as it signs them, addressed to the DID it derives from our URL; every
field it reads is there, every response follows the published lexicon, and a restart answers its
first searches instead of IndexLoading. See reference_client.py for which client function each
request reproduces."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from engram_index.app import space_credentials
from tests.limits import roomy_app
from engram_index.cli import default_service_did
from engram_index.collections import Collections
from engram_index.engine.types import Document, ModelIdentity
from engram_index.engram.api.lexicon import Lexicons
from engram_index.engram.api.limits import SpaceLimits
from engram_index.engram.auth.mint import mint_credential
from engram_index.engram.records import encode_query_vector, format_datetime_ms
from engram_index.store.sqlite import StoredDocument
from engram_index.testkit.authority import SpaceAuthority
from engram_index.testkit.plc import FakePlc
from engram_index.testkit.serve import free_port, serving

from .reference_client import MEMORY_FIELDS, Agent, XrpcError, appview_did_of, did_key, grant_url

MODEL = ModelIdentity("m", "sha256:00", 4)
AUTHORS = ["did:plc:alice", "did:plc:bob"]
N = 3000  # enough that loading the index after a restart takes a while
BASE_MS = 1_760_000_000_000
LEX = Lexicons.bundled()


def axis(i: int) -> np.ndarray:
    v = np.zeros(4, np.float32)
    v[i] = 1
    return v


def docs(space: str, n: int = N) -> list[StoredDocument]:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((n, 4)).astype(np.float16)
    vectors[0] = axis(2).astype(np.float16)  # the one memory pointing along axis 2
    out = []
    for i in range(n):
        author = AUTHORS[i % 2]
        text = "the retry policy of the deploy pipeline" if i == 0 else f"memory number {i} about gardening"
        out.append(StoredDocument(Document(
            id=f"{space}/{author}/garden.engram.memory/r{i:05d}", author=author, text=text,
            tags=("ops",) if i % 3 == 0 else ("garden",), source="https://example.com" if i % 5 == 0 else None,
            created_ms=BASE_MS + i * 1000, indexed_ms=BASE_MS + N * 1000, metadata={"cid": "bafyreiexample"},
            vector=vectors[i].tobytes())))
    return out


@dataclass
class World:
    url: str
    space: str
    authority: SpaceAuthority

    def agent(self, space: str | None = None) -> Agent:
        key = ec.generate_private_key(ec.SECP256R1())
        space = space or self.space
        credential = mint_credential(self.authority.credential_key, self.authority.did, space, did_key(key),
                                     kid=self.authority.kid)
        return Agent(self.url, space, credential, key)


@contextmanager
def world(data: Path, *, restarts: int = 0, n: int = N) -> Iterator[World]:
    """A directory with the authority, a space of N memories, and the service as `serve` runs it:
    real credentials, the DID a client derives from the URL; restarted `restarts` times first."""
    plc = FakePlc()
    with ExitStack() as stack:
        plc_url = stack.enter_context(serving(plc.app(), probe="/_health"))
        authority = SpaceAuthority(plc)
        space = authority.space("main")
        spaces = Collections(data)
        spaces.ensure_collection(space, MODEL)
        spaces.write(space, docs(space, n))
        spaces.close()
        port = free_port()
        did = default_service_did("127.0.0.1")

        def app() -> Any:
            return roomy_app(data, did, authenticator=space_credentials(data, did, plc_url=plc_url),
                              limits=SpaceLimits(rate=1e6, burst=1e6))

        for _ in range(restarts):
            with serving(app(), port=port):
                pass  # served (its indexes loaded at start), then stopped
            # As after a crash before the keyword index's commit: the restart rebuilds it from the records.
            for keyword in (data / "spaces").glob("*/keyword"):
                shutil.rmtree(keyword)
        url = stack.enter_context(serving(app(), port=port))
        yield World(url, space, authority)


@pytest.fixture(scope="module")
def w(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with world(tmp_path_factory.mktemp("data")) as made:
        yield made


def vector_param(v: np.ndarray) -> str:
    return encode_query_vector(v)


def check_views(memories: list[dict[str, Any]], *, similarity: bool) -> None:
    for m in memories:
        missing = [f for f in MEMORY_FIELDS if f not in m]
        assert not missing, f"fields the client reads are missing: {missing}"
        if similarity:
            assert "similarity" in m


def test_the_service_did_is_the_one_the_client_derives_from_our_url(w: World) -> None:
    assert appview_did_of(w.url) == default_service_did("127.0.0.1") == "did:web:127.0.0.1"
    body = w.agent().list(limit=1)
    assert len(body["memories"]) == 1  # the audience it derived was accepted


def test_after_a_restart_the_agents_warm_and_first_recall_are_answered_not_503(tmp_path: Path) -> None:
    # 20,000 memories: rebuilding the keyword index takes the restarted service over a second.
    with world(tmp_path, restarts=1, n=20_000) as restarted:
        agent = restarted.agent()
        agent.warm()  # returns at once; the index loads meanwhile
        out = agent.recall("retry policy", vector_param(axis(2)), "m", "sha256:00", limit=3)
        assert out["memories"][0]["text"] == "the retry policy of the deploy pipeline"
        assert out["mode"] == "hybrid" and not out.get("approximate")
        check_views(out["memories"], similarity=True)


def test_recall_hybrid_vector_and_keyword_with_the_agents_filters(w: World) -> None:
    agent = w.agent()
    hybrid = agent.recall("retry policy", vector_param(axis(2)), "m", "sha256:00", limit=5)
    assert hybrid["mode"] == "hybrid" and hybrid["memories"][0]["uri"].endswith("/r00000")
    vector = agent.recall("anything", vector_param(axis(2)), "m", "sha256:00", limit=5, mode="vector")
    assert vector["mode"] == "vector" and vector["memories"][0]["uri"].endswith("/r00000")
    assert all("match" not in m or "keyword" not in m["match"] for m in vector["memories"])
    keyword = agent.recall("retry policy", "", "", "", limit=5, mode="keyword")
    assert keyword["mode"] == "keyword" and [m["uri"][-6:] for m in keyword["memories"]] == ["r00000"]
    since = format_datetime_ms(BASE_MS + (N - 10) * 1000)
    filtered = agent.recall("gardening", vector_param(axis(0)), "m", "sha256:00", limit=50,
                            author=AUTHORS[1], tags=["ops"], since=since)
    assert filtered["memories"], "some memories pass the filters"
    for m in filtered["memories"]:
        assert m["author"] == AUTHORS[1] and "ops" in m["tags"] and m["createdAt"] >= since
    for out in (hybrid, vector, filtered):
        check_views(out["memories"], similarity=True)
        assert all(0 <= m["similarity"] <= 1000 for m in out["memories"])


def test_list_pages_newest_first_and_get_returns_what_list_showed(w: World) -> None:
    agent = w.agent()
    first = agent.list(limit=100)
    second = agent.list(limit=100, cursor=first["cursor"])
    uris = [m["uri"] for m in first["memories"] + second["memories"]]
    assert len(uris) == len(set(uris)) == 200
    times = [m["createdAt"] for m in first["memories"] + second["memories"]]
    assert times == sorted(times, reverse=True)
    only = agent.list(limit=10, author=AUTHORS[0], tags=["ops"])
    assert all(m["author"] == AUTHORS[0] and "ops" in m["tags"] for m in only["memories"])
    check_views(first["memories"], similarity=False)
    got = agent.get(first["memories"][0]["uri"])["memory"]
    assert got == first["memories"][0]
    assert "similarity" not in got


def test_status_of_an_imported_space_says_nothing_of_access_so_the_agent_warns_of_nothing(w: World) -> None:
    agent = w.agent()
    assert agent.indexing() == ""  # the client's "appview doesn't say": no warning
    status = agent.query("garden.engram.getSpaceStatus", {"space": w.space})
    assert status["memories"] == N and status["skipped"] == []
    assert status["active"] == {"model": "m", "modelDigest": "sha256:00", "dims": 4} == status["config"]


def test_describe_service_names_our_did_and_closed_registration_and_no_grant_page(w: World) -> None:
    agent = w.agent()
    body = agent.query("garden.engram.describeService", {})
    assert body["did"] == agent.appview_did and body["registration"] == "closed"
    assert grant_url(w.url) == ""  # the client then says the appview takes no indexing grants


def test_errors_reach_the_client_with_the_names_and_statuses_of_the_reference_server(w: World) -> None:
    other = w.authority.space("elsewhere")
    with pytest.raises(XrpcError) as unknown:
        w.agent(other).list()
    assert (unknown.value.status, unknown.value.name) == (400, "UnknownSpace")
    with pytest.raises(XrpcError) as mismatch:
        w.agent().recall("x", vector_param(axis(0)), "other-model", "sha256:00")
    assert (mismatch.value.status, mismatch.value.name) == (400, "ModelMismatch")  # the agent re-reads its config
    with pytest.raises(XrpcError) as missing:
        w.agent().get(f"{w.space}/{AUTHORS[0]}/garden.engram.memory/nope")
    assert (missing.value.status, missing.value.name) == (404, "MemoryNotFound")
    stranger = Agent(w.url, w.space, w.agent().credential, ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(XrpcError) as forged:
        stranger.list()  # a credential bound to another key: the client retries once on 401
    assert forged.value.status == 401


def test_every_response_the_client_got_follows_the_published_lexicon(w: World) -> None:
    agent = w.agent()
    agent.warm()
    agent.recall("retry policy", vector_param(axis(2)), "m", "sha256:00", limit=5)
    agent.recall("retry policy", "", "", "", mode="keyword")
    page = agent.list(limit=3)
    agent.get(page["memories"][0]["uri"])
    agent.indexing()
    agent.query("garden.engram.getMemoryGraph", {"space": w.space, "limit": 50})
    agent.query("garden.engram.describeService", {})
    seen = set()
    for nsid, body in agent.responses:
        seen.add(nsid)
        if "output" in LEX.main(nsid):
            assert LEX.output_errors(nsid, body) == [], nsid
        else:
            assert body in (None, {}), nsid  # warmSpace declares no output
    assert seen == {"garden.engram.warmSpace", "garden.engram.searchMemories", "garden.engram.listMemories",
                    "garden.engram.getMemory", "garden.engram.getSpaceStatus", "garden.engram.getMemoryGraph",
                    "garden.engram.describeService"}


def test_warm_of_a_space_not_indexed_here_is_unknown_space(w: World) -> None:
    with pytest.raises(XrpcError) as unknown:
        w.agent(w.authority.space("elsewhere")).warm()
    assert (unknown.value.status, unknown.value.name) == (400, "UnknownSpace")


def test_a_search_waits_for_a_loading_index_only_up_to_its_deadline(tmp_path: Path) -> None:
    import asyncio

    from engram_index.engram.api.spaces import loaded_index
    from engram_index.errors import IndexLoading

    space = "at://did:plc:loading/space/garden.engram.space/s"
    spaces = Collections(tmp_path)
    spaces.ensure_collection(space, MODEL)
    spaces.write(space, docs(space))
    spaces.close()
    reopened = Collections(tmp_path)
    try:
        with pytest.raises(IndexLoading, match="still loading after 0 s"):
            asyncio.run(loaded_index(reopened, space, wait_s=0))
        assert len(asyncio.run(loaded_index(reopened, space, wait_s=30))) == N
    finally:
        reopened.close()
