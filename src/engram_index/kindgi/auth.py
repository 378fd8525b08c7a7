"""Bearer tokens to principals: who is calling, in which tenant, holding which containers.

A token is minted by `engram-index keys create kindgi` and looked up afresh on every request
(`keys.KeyStore`), so a revocation holds from the next request. Missing or malformed or unknown
→ 401 auth-missing, expired → 401 auth-expired, revoked → 401 auth-revoked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from engram_index.keys import KeyState, KeyStore, bearer
from engram_index.kindgi.errors import KindgiError


@dataclass(frozen=True, slots=True)
class Principal:
    """A caller in one tenant: a user or a service with its orgs and projects, or a tenant admin."""

    tenant: str
    key_id: str
    user: str | None = None
    service: str | None = None
    orgs: frozenset[str] = frozenset()
    projects: frozenset[str] = frozenset()
    admin: bool = False

    @property
    def ref(self) -> str:
        """`user:<id>` or `service:<id>`: who did something, for a record."""
        if self.user is not None:
            return f"user:{self.user}"
        return f"service:{self.service or 'key-' + self.key_id}"

    def attribution(self) -> dict[str, str]:
        """Who asserts a fact this caller writes (`attributedTo`)."""
        kind, _, ident = self.ref.partition(":")
        return {"kind": kind, "id": ident}


def principal_from_grants(key_id: str, grants: dict[str, Any]) -> Principal:
    """The principal a token's stored grants describe."""
    return Principal(
        tenant=str(grants["tenant"]),
        key_id=key_id,
        user=grants.get("user") or None,
        service=grants.get("service") or None,
        orgs=frozenset(grants.get("orgs") or ()),
        projects=frozenset(grants.get("projects") or ()),
        admin=bool(grants.get("admin")),
    )


def authenticate(request: Request, keys: KeyStore) -> Principal:
    """The caller of a request, or the 401 its token deserves."""
    state, record = bearer(request.headers.get("authorization"), keys, "kindgi")
    if state is KeyState.MISSING:
        raise KindgiError("auth-missing", "This route needs a bearer token (Authorization: Bearer <token>).")
    if state is KeyState.MALFORMED:
        raise KindgiError("auth-missing", "The Authorization header must be `Bearer <token>`.")
    if state is KeyState.EXPIRED:
        raise KindgiError("auth-expired", "The bearer token has expired.")
    if state is KeyState.REVOKED:
        raise KindgiError("auth-revoked", "The bearer token was revoked.")
    if state is not KeyState.VALID or record is None:
        raise KindgiError("auth-missing", "The bearer token is not one this service issued.")
    return principal_from_grants(record.id, record.grants)
