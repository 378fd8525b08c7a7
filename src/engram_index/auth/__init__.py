"""Who may query a space: one `authenticate(request, space)` interface for every query.

The space-credential check (JWT from the space's authority + an RFC 9421 signature addressed to
this service's DID) is its own module; until it lands the only authenticator is `InsecureOpen`,
which the operator must choose explicitly (`--insecure-open`) and which logs a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from starlette.requests import Request


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller: who they are (a DID) and which space they proved membership of."""

    did: str | None
    space: str


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
