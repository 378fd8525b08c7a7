"""The access layer: one credential, the face it belongs to, and the calls both the MCP server and the page make.

Every call goes through a face's own HTTP API (in process over ASGI, or to a running service), so the
face checks the credential, validates the input and answers its own errors: this layer adds no
authority of its own. A `sm_` key is a v5 key, a `kg_` key a Kindgi key; anything else (or nothing,
for a service started with --insecure-open) reaches the garden.engram face. A garden.engram space
credential is the four headers a member signs (`Authorization: Atproto-Space …`, its audience and
the RFC 9421 signature over those two): they cover no request target, so they are forwarded as
they came, and the face checks them on each call.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

import base64
import json

import httpx

from engram_index.console import faces
from engram_index.keys import bearer_token
from engram_index.console.shapes import MAX_TEXT_CHARS, Query, Refused, cut

__all__ = ["MAX_TEXT_CHARS", "Console", "Query", "Refused", "cut"]  # shapes.py's names, for callers

Face = Literal["engram", "v5", "kindgi"]
# The headers that ask each face for its explanations (v5: x-engram-explain, Kindgi: x-kindgi-explain).
EXPLAIN_HEADERS = ("x-engram-explain", "x-kindgi-explain")
# Bounded outputs: an agent's context is small (a memory's text is cut at shapes.MAX_TEXT_CHARS).
MAX_RESULTS = 50
MAX_LIST = 100
SPACE_SCHEME = "atproto-space"
# The headers of a signed space-credential request (engram/auth/mint.py writes them).
SPACE_HEADERS = ("authorization", "atproto-space-audience", "signature", "signature-input")


def face_of(credential: str | None) -> Face:
    """Which face a credential belongs to (keys carry their face's prefix)."""
    if credential and credential.startswith("sm_"):
        return "v5"
    if credential and credential.startswith("kg_"):
        return "kindgi"
    return "engram"


def credential_of(headers: Any) -> tuple[str | None, dict[str, str] | None]:
    """A request's credential: a bearer key, or a space credential's headers (else neither)."""
    value = str(headers.get("authorization") or "")
    token = bearer_token(value)
    if token is not None:
        return token, None
    scheme, _, token = value.partition(" ")
    if scheme.lower() == SPACE_SCHEME and token.strip():
        return None, {name: str(headers[name]) for name in SPACE_HEADERS if headers.get(name)}
    return None, None


def credential_space(space_headers: dict[str, str]) -> str:
    """The space a space credential names (its `sub`), read unverified: only to offer it; the face checks it."""
    token = space_headers.get("authorization", "").partition(" ")[2].strip()
    try:
        part = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
        return str(claims["sub"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise Refused("the space credential is not a JWT naming its space (sub)", 401) from None


class Console:
    """The calls of one caller, holding one credential, against one service's faces."""

    def __init__(self, client: httpx.AsyncClient, credential: str | None = None,
                 spaces: Callable[[], list[str] | None] | None = None,
                 space_headers: dict[str, str] | None = None) -> None:
        """Call through `client` (its base URL is the service) with `credential`.

        `spaces` lists the garden.engram spaces of a service that checks no credentials (None: it checks them).
        """
        self.client = client
        self.credential = credential or None
        self.space_headers = space_headers or None
        self.face: Face = "engram" if self.space_headers else face_of(self.credential)
        self._spaces = spaces

    async def call(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                   body: Any = None, explain: bool = False) -> Any:
        """One request to a face; its JSON answer, or Refused with the face's own message."""
        headers = {"accept": "application/json"}
        if self.space_headers:
            headers.update(self.space_headers)
        elif self.credential:
            headers["authorization"] = f"Bearer {self.credential}"
        if explain:
            headers.update(dict.fromkeys(EXPLAIN_HEADERS, "1"))
        try:
            answer = await self.client.request(method, path, params=params, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise Refused(f"the service could not be reached: {exc}", 503) from exc
        try:
            data = answer.json()
        except ValueError:
            data = None
        if answer.status_code >= 400:
            raise Refused(error_message(answer.status_code, data), answer.status_code)
        return data

    async def list_collections(self) -> list[dict[str, Any]]:
        """The collections this credential can read."""
        return await faces.FACES[self.face].collections(self)

    async def recall(self, collection: str, q: Query) -> dict[str, Any]:
        """Search a collection: results with their explanations, the scope searched, and notes."""
        if not q.query.strip():
            raise Refused("query must not be empty")
        if not 1 <= q.limit <= MAX_RESULTS:
            raise Refused(f"limit must be between 1 and {MAX_RESULTS}")
        return await faces.FACES[self.face].recall(self, collection, q)

    async def get(self, collection: str, ident: str) -> dict[str, Any]:
        """One memory, with its versions or revisions where the face keeps them."""
        return await faces.FACES[self.face].get(self, collection, ident)

    async def page(self, collection: str, limit: int = 25, cursor: str | None = None) -> dict[str, Any]:
        """A page of a collection's memories, newest first, and the cursor of the next page."""
        if not 1 <= limit <= MAX_LIST:
            raise Refused(f"limit must be between 1 and {MAX_LIST}")
        return await faces.FACES[self.face].page(self, collection, limit, cursor)

    async def remember(self, collection: str, text: str, tags: list[str], metadata: dict[str, Any]) -> dict[str, Any]:
        """Write a memory; its id."""
        if not text.strip():
            raise Refused("text must not be empty")
        return await faces.FACES[self.face].remember(self, collection, text, tags, metadata)

    async def forget(self, collection: str, ident: str) -> dict[str, Any]:
        """Delete a memory for good."""
        return await faces.FACES[self.face].forget(self, collection, ident)

    async def write_fact(self, body: dict[str, Any]) -> dict[str, Any]:
        """Kindgi: write a fact (type, scope, content, …); the fact as stored."""
        self.need("kindgi", "write_fact")
        fact = await self.call("POST", "/v1/memory/facts", body=body)
        return {"fact": fact}

    async def retrieve(self, body: dict[str, Any]) -> dict[str, Any]:
        """Kindgi: retrieve by intent (mode list/keyword/semantic/both), with each result's explanation."""
        self.need("kindgi", "retrieve")
        answer = await self.call("POST", "/v1/memory/retrieve", body=body, explain=True)
        return dict(answer)

    def need(self, face: Face, tool: str) -> None:
        """Refuse a face-specific call made with another face's credential."""
        if self.face != face:
            raise Refused(f"{tool} works on Kindgi scopes: sign in with a Kindgi key (kg_…); this credential"
                          f" reaches the {self.face} face")

    def open_spaces(self) -> list[str]:
        """The garden.engram spaces this caller may try: its credential's space, or every space of an open service."""
        if self.space_headers:
            return [credential_space(self.space_headers)]
        if self.credential is not None:
            raise Refused("this is neither a v5 key (sm_…) nor a Kindgi key (kg_…); a garden.engram space credential"
                          " comes as its signed headers (Authorization: Atproto-Space …, Atproto-Space-Audience,"
                          " Signature, Signature-Input), not as a bearer key", 401)
        spaces = self._spaces() if self._spaces is not None else None
        if spaces is None:
            raise Refused("this service checks credentials: sign in with a v5 key (sm_…) or a Kindgi key (kg_…)", 401)
        return spaces


def error_message(status: int, data: Any) -> str:
    """A face's error answer as one readable sentence (each face spells its envelope its own way)."""
    message = ""
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):  # Kindgi: {"error": {code, message}}
            message = f"{err.get('code', '')}: {err.get('message', '')}".strip(": ")
        elif isinstance(data.get("message"), str):  # XRPC: {"error", "message"}
            message = f"{err}: {data['message']}" if err else str(data["message"])
        elif err is not None:  # v5: {"error", "details"?}
            message = str(err) + (f": {data['details']}" if data.get("details") else "")
    return f"HTTP {status}: {message or 'the service refused the request'}"
