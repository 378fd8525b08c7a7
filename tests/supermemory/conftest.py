"""A real v5 server on loopback, keys minted in its data directory, and the official SDK as the client."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from supermemory import Supermemory

from engram_index.admission import Admission
from engram_index.collections import Collections
from tests.limits import roomy_app, roomy_embedding, PATIENCE_S
from engram_index.embed.base import Embedder
from engram_index.embed.hashing import HashingEmbedder
from engram_index.engram.auth import InsecureOpen
from engram_index.keys import KeyStore
from engram_index.llm.base import LLM, Reranker
from engram_index.supermemory.face import Face
from engram_index.testkit.serve import serving
from tests.conftest import chosen_store


@dataclass
class Server:
    """A running server: its URL, data directory, and a client with a key that reaches everything."""

    url: str
    data: Path
    key: str
    app: Any

    def client(self, key: str | None = None, **options: Any) -> Supermemory:
        """An SDK client (no retries, so that each call is one request)."""
        return Supermemory(api_key=key or self.key, base_url=self.url, max_retries=0, **options)

    def keys(self) -> KeyStore:
        """The server's keys, as `engram-index keys` reaches them (its PostgreSQL store's, when it has one)."""
        return KeyStore(self.data, self.app.state.spaces.shared_store())

    def mint(self, namespaces: list[str] | None = None, expires_ms: int | None = None) -> tuple[str, str]:
        """A new key (and its id) reaching the given namespaces (None: all)."""
        token, record = self.keys().create("supermemory", {"namespaces": namespaces}, expires_ms=expires_ms)
        return token, record.id


@contextmanager
def running(data: Path, embedder: Embedder | None, llm: LLM | None = None,
            reranker: Reranker | None = None, allow_private_urls: bool = True,
            key_limits: Admission | None = None, store: str | None = None) -> Iterator[Server]:
    """Serve a data directory (caching `store` when given) with an embedder (None: keyword search only),
    and an LLM and a reranker if given."""
    app = roomy_app(data, "did:web:localhost", authenticator=InsecureOpen(), embedding=roomy_embedding(embedder),
                    llm=llm, reranker=reranker, key_limits=key_limits, store=store)
    app.state.allow_private_urls = allow_private_urls  # the tests' pages are served on loopback
    with serving(app) as url:
        token, _ = KeyStore(data, app.state.spaces.shared_store()).create("supermemory", {"namespaces": None})
        yield Server(url, data, token, app)


@pytest.fixture
def face(tmp_path: Path) -> Iterator[Face]:
    """The face alone over a fresh data directory (the hashing embedder; no server, no pipeline)."""
    spaces = Collections(tmp_path)
    face = Face(spaces, KeyStore(tmp_path), HashingEmbedder())
    try:
        yield face
    finally:
        face.close()
        spaces.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Server]:
    """One server per module, with the hashing embedder (vectors without a model download; on PostgreSQL
    when ENGRAM_TEST_STORE=postgresql)."""
    with running(tmp_path_factory.mktemp("v5"), HashingEmbedder(256), store=chosen_store(request)) as srv:
        yield srv


@pytest.fixture(scope="module")
def keyword_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server per module without any embedder (keyword search only)."""
    with running(tmp_path_factory.mktemp("v5kw"), None) as srv:
        yield srv


@pytest.fixture
def client(server: Server) -> Supermemory:
    """An SDK client of the module's server."""
    return server.client()


@pytest.fixture
def ns() -> str:
    """A fresh namespace name for each test."""
    return "t_" + uuid.uuid4().hex[:12]


def wait_done(client: Supermemory, ns: str, doc_id: str, timeout: float = PATIENCE_S) -> Any:
    """Poll a document until it is done or failed; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        doc = client.documents.get(ns, doc_id)
        if doc.system.status in ("done", "failed"):
            return doc
        assert time.monotonic() < deadline, f"{doc_id} stuck in {doc.system.status}"
        time.sleep(0.02)


def add_done(client: Supermemory, ns: str, content: str, **fields: Any) -> str:
    """Add a document and wait until it is processed; returns its id."""
    ref = client.add(ns, content=content, **fields)
    doc = wait_done(client, ns, ref.id)
    assert doc.system.status == "done", doc
    return str(ref.id)


Waiter = Callable[[Supermemory, str, str], Any]
