"""A real engram-index server on loopback for the Kindgi face, and official-SDK clients for it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kindgi.client import Kindgi

from engram_index.admission import Admission
from tests.limits import roomy_app, roomy_embedding
from engram_index.embed.base import Embedder
from engram_index.embed.hashing import HashingEmbedder
from engram_index.engram.auth import InsecureOpen
from engram_index.keys import KeyStore
from engram_index.testkit.serve import serving

DID = "did:web:localhost"
DIMS = 64
NO_EMBEDDER = object()


@dataclass
class Server:
    """A running server: its URL and data directory, minting tokens as `keys create kindgi` does."""

    url: str
    data: Path
    app: Any = None  # the served app, in this process (its state is what in-process tests hold)
    store: str | None = None  # the PostgreSQL store it serves (None: the data directory's SQLite)

    def keys(self) -> KeyStore:
        """The server's keys, as `engram-index keys` reaches them."""
        return KeyStore(self.data, self.app.state.spaces.shared_store() if self.app is not None else None)

    def store_args(self) -> list[str]:
        """The CLI options that reach the same store."""
        return ["--store", self.store] if self.store else []

    def token(self, tenant: str = "acme", *, expires_ms: int | None = None, **grants: Any) -> str:
        """A new token for a principal of `tenant` (user, service, orgs, projects, admin)."""
        full = {"tenant": tenant, "user": grants.get("user"), "orgs": sorted(grants.get("orgs", ())),
                "projects": sorted(grants.get("projects", ())), "admin": bool(grants.get("admin"))}
        if grants.get("service"):
            full["service"] = grants["service"]
        token, _ = self.keys().create("kindgi", full, expires_ms=expires_ms)
        return token

    def client(self, tenant: str = "acme", **grants: Any) -> Kindgi:
        """An official SDK client holding a new token."""
        return Kindgi(base_url=self.url, token=self.token(tenant, **grants), max_retries=0)


@contextmanager
def kindgi_server(data: Path, embedder: Embedder | None | object = None,
                  key_limits: Admission | None = None, store: str | None = None, **options: Any) -> Iterator[Server]:
    """Serve a data directory (with the hashing embedder unless told otherwise; caching `store` when given;
    other `create_app` options as given) until the block ends."""
    chosen = HashingEmbedder(DIMS) if embedder is None else None if embedder is NO_EMBEDDER else embedder
    app = roomy_app(data, DID, authenticator=InsecureOpen(), embedding=roomy_embedding(chosen),  # type: ignore[arg-type]
                     key_limits=key_limits, store=store, **options)
    with serving(app) as url:
        yield Server(url, data, app, store)
