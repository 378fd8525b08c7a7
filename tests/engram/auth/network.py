"""A small AT Protocol world for credential tests: a PLC directory, authorities, and an engram-index
server that checks credentials, all over real HTTP on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engram_index.engram.api.limits import SpaceLimits
from tests.limits import roomy_app
from engram_index.engram.auth.credentials import SpaceCredentials
from engram_index.engram.auth.state import AuthState
from engram_index.engine.types import Document, ModelIdentity
from engram_index.engram.identity.did import DidResolver
from engram_index.engram.identity.keys import K256, P256
from engram_index.collections import Collections
from engram_index.store.sqlite import StoredDocument
from engram_index.testkit.authority import SpaceAuthority
from engram_index.testkit.plc import FakePlc
from engram_index.testkit.serve import serving

from ..api.server import wait_until_loaded

SERVICE_DID = "did:web:index.example"
MODEL = ModelIdentity("m", "sha256:00", 4)


@dataclass
class Network:
    """What a test can reach: the directory, three authorities, the service and its checker."""

    plc: FakePlc
    plc_url: str
    url: str
    p256: SpaceAuthority  # ES256 with an #atproto_space key
    k256: SpaceAuthority  # ES256K with an #atproto_space key
    fallback: SpaceAuthority  # ES256, only an #atproto key
    credentials: SpaceCredentials
    data: Path


def _index(data: Path, spaces_: list[str]) -> None:
    spaces = Collections(data)
    for space in spaces_:
        spaces.ensure_collection(space, MODEL)
        spaces.write(space, [
            StoredDocument(Document(id=f"{space}/did:plc:a/garden.engram.memory/r{i}", author="did:plc:a",
                                    text=text, tags=("t",), created_ms=1_700_000_000_000 + i,
                                    vector=np.eye(4, dtype="<f2")[i].tobytes()))
            for i, text in enumerate(["deploy the server", "pasta with tomatoes"])
        ])
    spaces.close()


@contextmanager
def network(data: Path, *, resolver_timeout: float = 3.0) -> Iterator[Network]:
    """Start the directory and the service; index one space of each authority."""
    plc = FakePlc()
    with ExitStack() as stack:
        plc_url = stack.enter_context(serving(plc.app(), probe="/_health"))
        p256 = SpaceAuthority(plc, P256)
        k256 = SpaceAuthority(plc, K256)
        fallback = SpaceAuthority(plc, P256, space_key=False)
        _index(data, [p256.space(), k256.space(), fallback.space()])
        resolver = DidResolver(plc_url, min_refresh=0.0, timeout=resolver_timeout)
        credentials = SpaceCredentials(SERVICE_DID, resolver, AuthState(data / "auth.sqlite"))
        app = roomy_app(data, SERVICE_DID, authenticator=credentials, limits=SpaceLimits(rate=1e6, burst=1e6))
        url = stack.enter_context(serving(app))
        wait_until_loaded(url, p256.space(), k256.space(), fallback.space(),
                          headers=lambda space: _authority_of(space, [p256, k256, fallback]).member(
                              space, SERVICE_DID).headers())
        yield Network(plc, plc_url, url, p256, k256, fallback, credentials, data)


def _authority_of(space: str, authorities: list[SpaceAuthority]) -> SpaceAuthority:
    return next(a for a in authorities if space.startswith(f"at://{a.did}/"))
