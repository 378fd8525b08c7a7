"""Who may query a space: one `authenticate(request, space)` interface for every query.

The real check is `credentials.SpaceCredentials` (a JWT from the space's authority + an RFC 9421
signature addressed to this service's DID). `InsecureOpen` skips it; the operator must choose it
explicitly (`--insecure-open`) and it logs a warning at every start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from starlette.requests import Request


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller: who they are (a DID, when known), the space they proved membership of,
    and the did:key their request was signed with (when they signed one)."""

    did: str | None
    space: str
    key: str | None = None


class Authenticator(Protocol):
    """Decides whether a request may query a space; raises an `AuthError` when not."""

    async def authenticate(self, request: Request, space: str) -> Caller:
        """Return the caller, or raise AuthRequired / InvalidToken / Forbidden."""
        ...


class InsecureOpen:
    """Lets every caller query every space: for trusted networks and development only."""

    async def authenticate(self, request: Request, space: str) -> Caller:
        """Accept anyone."""
        return Caller(None, space)
