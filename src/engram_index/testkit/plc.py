"""An in-process PLC directory (and did:web host) serving DID documents over real HTTP.

It can be told to misbehave as real directories do: answer slowly, return a malformed or
mismatched document, or lose a DID.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engram_index.engram.identity.keys import PrivateKey

_B32 = "abcdefghijklmnopqrstuvwxyz234567"


def new_plc_did() -> str:
    """A random, well-formed did:plc."""
    return "did:plc:" + "".join(secrets.choice(_B32) for _ in range(24))


def did_document(did: str, keys: dict[str, PrivateKey], services: dict[str, tuple[str, str]] | None = None,
                 handle: str | None = None) -> dict[str, Any]:
    """A DID document with Multikey verification methods `#name` and services `#name: (type, url)`."""
    return {
        "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"],
        "id": did,
        "alsoKnownAs": [f"at://{handle or did.rsplit(':', 1)[-1] + '.test'}"],
        "verificationMethod": [
            {"id": f"{did}{fragment}", "type": "Multikey", "controller": did, "publicKeyMultibase": key.multibase}
            for fragment, key in keys.items()
        ],
        "service": [
            {"id": fragment, "type": kind, "serviceEndpoint": url}
            for fragment, (kind, url) in (services or {}).items()
        ],
    }


@dataclass
class FakePlc:
    """DID documents by DID, served at `/{did}` (PLC) and `/.well-known/did.json` (did:web)."""

    documents: dict[str, Any] = field(default_factory=dict)
    delay: float = 0.0
    malformed: set[str] = field(default_factory=set)
    requests: int = 0
    web_did: str | None = None  # the did:web this host answers for at /.well-known/did.json

    def publish(self, did: str, document: dict[str, Any]) -> None:
        """Serve (or replace) a DID's document."""
        self.documents[did] = document

    def remove(self, did: str) -> None:
        """Stop serving a DID (the directory answers 404)."""
        self.documents.pop(did, None)

    def app(self) -> Starlette:
        """The ASGI app."""

        async def document(request: Request) -> Response:
            did = request.path_params["did"]
            return await self._answer(did)

        async def web(request: Request) -> Response:
            return await self._answer(self.web_did or "")

        async def health(request: Request) -> Response:
            return JSONResponse({})

        return Starlette(routes=[
            Route("/_health", health),
            Route("/.well-known/did.json", web),
            Route("/{did:str}", document),
        ])

    async def _answer(self, did: str) -> Response:
        self.requests += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if did not in self.documents:
            return JSONResponse({"message": f"DID not registered: {did}"}, status_code=404)
        if did in self.malformed:
            return Response(b'{"id": "' + did.encode() + b'", "verificationMethod": "nope"', media_type="application/json")
        return Response(json.dumps(self.documents[did]), media_type="application/did+ld+json")
