"""AT Protocol service-auth JWTs: how space hosts and authorities call this service's procedures.

A service-auth token is an ES256/ES256K JWT signed with the issuer's `#atproto` key, with `aud`
naming this service (here `<our DID>#atproto_space_syncer`, or our bare DID), `lxm` the NSID of
the method called, and a short life.
"""

from __future__ import annotations

import secrets
import time
from typing import Callable

from starlette.requests import Request

from engram_index.keys import bearer_token
from engram_index.errors import AuthError
from engram_index.engram.auth.errors import AuthorityUnreachable, ExpiredToken, InvalidToken
from engram_index.engram.identity.did import DidResolver, ResolveError
from engram_index.engram.identity.keys import PrivateKey
from engram_index.engram.auth import jwt

SYNCER_FRAGMENT = "#atproto_space_syncer"


class ServiceAuth:
    """Verifies service-auth JWTs addressed to this service."""

    def __init__(
        self,
        service_did: str,
        resolver: DidResolver,
        *,
        skew: float = 5.0,
        max_lifetime: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.audiences = frozenset({service_did, f"{service_did}{SYNCER_FRAGMENT}"})
        self.resolver = resolver
        self.skew, self.max_lifetime = skew, max_lifetime
        self.clock = clock

    async def verify(self, request: Request, lxm: str) -> str:
        """The issuer DID of the request's `Authorization: Bearer` service-auth token for method `lxm`."""
        values = request.headers.getlist("authorization")
        if len(values) != 1:
            raise AuthError("send one Authorization: Bearer <service-auth JWT>")
        token = bearer_token(values[0])
        if token is None:
            raise AuthError("Authorization must be 'Bearer <service-auth JWT>'")
        return await self.verify_token(token, lxm)

    async def verify_token(self, token: str, lxm: str) -> str:
        """Check a service-auth token for method `lxm`; return its issuer DID."""
        parsed = jwt.decode(token, typ=None)
        claims = parsed.claims
        if parsed.header.get("typ") not in (None, "JWT"):
            raise InvalidToken("a service-auth token's typ must be JWT")
        if claims.get("aud") not in self.audiences:
            raise InvalidToken("the token is not addressed to this service")
        if claims.get("lxm") != lxm:
            raise InvalidToken(f"the token is not for {lxm}")
        exp = jwt.numeric_date(claims, "exp")
        now = self.clock()
        if "iat" in claims:
            iat = jwt.numeric_date(claims, "iat")
            if iat > now + self.skew:
                raise InvalidToken("the token is not valid yet")
            if exp - iat > self.max_lifetime:
                raise InvalidToken(f"the token lives longer than {self.max_lifetime:g} s")
        elif exp - now > self.max_lifetime:
            raise InvalidToken(f"the token lives longer than {self.max_lifetime:g} s")
        if exp < now - self.skew:
            raise ExpiredToken("the token has expired")
        iss = claims.get("iss")
        if not isinstance(iss, str) or not iss.startswith("did:"):
            raise InvalidToken("the token's iss must be a DID")
        did = iss.split("#", 1)[0]
        for fresh in (False, True):
            try:
                doc = await self.resolver.resolve(did, fresh=fresh)
            except ResolveError as exc:
                if exc.temporary:
                    raise AuthorityUnreachable(f"could not resolve {did}: {exc}") from exc
                raise InvalidToken(f"{did} cannot be resolved: {exc}") from exc
            key = doc.key("#atproto")
            if key is not None and parsed.verify(key):
                return did
        raise InvalidToken("the token is not signed by its issuer's #atproto key")


def mint_service_auth(
    key: PrivateKey, issuer: str, audience: str, lxm: str, *, lifetime: int = 60, now: float | None = None
) -> str:
    """A service-auth JWT from `issuer` (signing with its #atproto `key`) for method `lxm` at `audience`."""
    issued = int(time.time() if now is None else now)
    claims = {"iss": issuer, "aud": audience, "lxm": lxm, "iat": issued, "exp": issued + lifetime,
              "jti": secrets.token_hex(16)}
    return jwt.encode({"typ": "JWT"}, claims, key)
