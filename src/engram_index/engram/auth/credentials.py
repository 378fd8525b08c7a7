"""The space-credential check: an authority-signed JWT bound to the caller's key, plus an RFC 9421
signature addressed to this service's DID (the protocol's §3), and the guards it leaves out.

Order matters: everything that needs no network (headers, token shape, claims, revocation, the
request signature with the caller's own key) is checked before the authority's DID is
resolved, so junk requests never make this service fetch documents. Beyond the protocol:
`created`/`expires` signature parameters, when sent, must be fresh; a `nonce`, when sent, may be
used once per credential; revoked credentials are refused.

A member sends the same four header fields (credential, audience, signature input, signature) with
many requests. What they proved for a space is remembered (without a nonce, which must be spent
each time): a request with the same fields is then checked only for what can change, in the same
order (the time window its claims and signature parameters allow, revocation, the authority's
document being the one whose key verified), and anything short of that is checked from scratch,
which says what failed. That spares ~25-40 µs of a served search's check (docs/design/service.md).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Callable

from starlette.requests import Request

from engram_index.bounded import Bounded
from engram_index.errors import AuthError, BadRecord
from engram_index.engram.auth.errors import AuthorityUnreachable, BadSpaceAudience, BadSpaceSignature, ExpiredToken, InvalidToken, RevokedToken
from engram_index.engram.identity.did import DidDoc, DidResolver, ResolveError
from engram_index.engram.identity.keys import P256, BadKey, PublicKey, parse_public_key
from engram_index.engram.records import parse_space_uri
from engram_index.engram.auth import Caller, httpsig, jwt
from engram_index.engram.auth.state import AuthState

SCHEME = "atproto-space"
CREDENTIAL_TYP = "atproto-space-credential+jwt"
AUDIENCE_HEADER = "atproto-space-audience"
COVERED = frozenset({"authorization", AUDIENCE_HEADER})
SPACE_KEY, REPO_KEY = "#atproto_space", "#atproto"


REMEMBERED = 2048  # requests' verified header fields kept at most (more: start over)


@dataclass(frozen=True, slots=True)
class Claims:
    """The checked claims of a credential that the rest of the check needs (valid from, until: the
    moments its iat and exp allow, with the skew)."""

    issuer: str
    jti: str
    exp: float
    holder: PublicKey
    valid_from: float
    valid_until: float


@dataclass(frozen=True, slots=True)
class Verified:
    """What a request's credential header fields proved for a space: its claims, the moments between
    which they stand (the credential's and the signature's windows), the authority's document that verified."""

    claims: Claims
    valid_from: float
    valid_until: float
    doc: DidDoc


@dataclass(frozen=True)
class Policy:
    """The numbers of the check (seconds)."""

    skew: float = 5.0
    max_lifetime: float = 3600.0
    max_signature_age: float = 300.0  # `created` older than this is stale
    max_jti_chars: int = 256
    max_nonce_chars: int = 256


class SpaceCredentials:
    """Authenticates members of a space for this service (`did`)."""

    def __init__(
        self,
        service_did: str,
        resolver: DidResolver,
        state: AuthState,
        *,
        policy: Policy = Policy(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.service_did = service_did
        self.resolver = resolver
        self.state = state
        self.policy = policy
        self.clock = clock
        self._verified: Bounded[tuple[str, bytes, bytes, bytes, bytes], Verified] = Bounded(REMEMBERED)

    async def authenticate(self, request: Request, space: str) -> Caller:
        """Return the caller when the request proves membership of `space`; raise an AuthError when not."""
        fields = _credential_fields(request.scope["headers"])
        key = _fields_key(fields, space)
        known = self._verified.get(key) if key is not None else None
        if known is not None:
            caller = await self._still(known, space)
            if caller is not None:
                return caller
        headers = _credential_headers(fields)
        authorizations = headers.get("authorization", ())
        if not authorizations:
            raise AuthError("this space is private: send a space credential (Authorization: Atproto-Space …)")
        if len(authorizations) > 1:
            raise InvalidToken("send exactly one Authorization header")
        scheme, _, token = authorizations[0].strip().partition(" ")
        if scheme.lower() != SCHEME or not token.strip():
            raise AuthError("Authorization must be 'Atproto-Space <credential>'")
        audiences = headers.get(AUDIENCE_HEADER, ())
        if len(audiences) != 1:
            raise BadSpaceAudience("send exactly one Atproto-Space-Audience header")
        if audiences[0].strip() != self.service_did:
            raise BadSpaceAudience(f"Atproto-Space-Audience must be this service's DID, {self.service_did}")
        now = self.clock()
        token_ = _decoded(token.strip())
        claims = self._check_claims(token_, space, now)
        nonce, signed_from, signed_until = self._check_request_signature(headers, claims.holder, now)
        if self.state.is_revoked(claims.issuer, claims.jti):
            raise RevokedToken("the space's authority revoked this credential")
        doc = await self._check_token_signature(token_, claims.issuer)
        if nonce is not None:
            if not self.state.use_nonce(f"{claims.issuer} {claims.jti}", nonce, claims.exp + self.policy.skew):
                raise BadSpaceSignature("this request's nonce was already used")
        elif key is not None:  # (a nonce is spent once: such fields are never remembered)
            self._verified.keep(key, Verified(claims, max(claims.valid_from, signed_from),
                                              min(claims.valid_until, signed_until), doc))
        return Caller(None, space, key=claims.holder.did_key)

    async def _still(self, known: Verified, space: str) -> Caller | None:
        """The caller of remembered header fields, when what they proved stands now: within their window,
        not revoked, the authority's document the one that verified (None: check them from scratch)."""
        claims = known.claims
        if not known.valid_from <= self.clock() <= known.valid_until:
            return None
        if self.state.is_revoked(claims.issuer, claims.jti):
            return None
        if await self._resolve(claims.issuer, fresh=False) is not known.doc:
            return None
        return Caller(None, space, key=claims.holder.did_key)

    def _check_claims(self, token: jwt.Jwt, space: str, now: float) -> Claims:
        """iss, sub, iat/exp, lifetime, jti and cnf, exactly as the protocol says."""
        claims = token.claims
        try:
            authority = parse_space_uri(space).authority
        except BadRecord as exc:
            raise InvalidToken(f"space is not a space URI: {exc.message}") from exc
        if claims.get("sub") != space:
            raise InvalidToken("the credential's sub is not the space asked for")
        if claims.get("iss") != authority:
            raise InvalidToken("the credential's iss is not the space's authority")
        iat, exp = jwt.numeric_date(claims, "iat"), jwt.numeric_date(claims, "exp")
        if exp <= iat:
            raise InvalidToken("the credential expires before it was issued")
        if exp - iat > self.policy.max_lifetime:
            raise InvalidToken(f"the credential lives longer than {self.policy.max_lifetime:g} s")
        if now + self.policy.skew < iat:
            raise InvalidToken("the credential is not valid yet (iat is in the future)")
        if now - self.policy.skew > exp:
            raise ExpiredToken("the credential has expired")
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti or len(jti) > self.policy.max_jti_chars:
            raise InvalidToken("the credential needs a jti")
        cnf = claims.get("cnf")
        kid = cnf.get("kid") if isinstance(cnf, dict) else None
        if not isinstance(kid, str):
            raise InvalidToken("the credential needs cnf.kid, the caller's did:key")
        try:
            key = parse_public_key(kid)
        except BadKey as exc:
            raise InvalidToken(f"cnf.kid: {exc}") from exc
        if key.alg != P256:
            raise InvalidToken("cnf.kid must be a P-256 did:key")
        return Claims(authority, jti, exp, key, iat - self.policy.skew, exp + self.policy.skew)

    def _check_request_signature(self, headers: dict[str, list[str]], key: PublicKey,
                                 now: float) -> tuple[str | None, float, float]:
        """The RFC 9421 signature by the credential's cnf key; returns its nonce, if any, and the moments
        between which its `created` and `expires` let it stand."""
        inputs, signatures = headers.get("signature-input", ()), headers.get("signature", ())
        if not inputs or not signatures:
            raise BadSpaceSignature("sign the request (Signature-Input and Signature, label atproto-space)")
        if len(inputs) > 1 or len(signatures) > 1:
            raise BadSpaceSignature("send exactly one Signature-Input and one Signature header")
        params = _verified_signature(
            inputs[0], signatures[0], headers["authorization"][0], headers[AUDIENCE_HEADER][0], key.did_key)
        created, expires = _int_param(params, "created"), _int_param(params, "expires")
        if created is not None:
            if created > now + self.policy.skew:
                raise BadSpaceSignature("the signature was created in the future")
            if created < now - self.policy.max_signature_age:
                raise BadSpaceSignature(f"the signature is older than {self.policy.max_signature_age:g} s")
        if expires is not None and expires < now - self.policy.skew:
            raise BadSpaceSignature("the signature has expired")
        nonce = params.get("nonce")
        if nonce is not None and (not isinstance(nonce, str) or not nonce or len(nonce) > self.policy.max_nonce_chars):
            raise BadSpaceSignature("the signature's nonce must be a short string")
        skew, age = self.policy.skew, self.policy.max_signature_age
        return (nonce if isinstance(nonce, str) else None,
                created - skew if created is not None else float("-inf"),
                min(created + age if created is not None else float("inf"),
                    expires + skew if expires is not None else float("inf")))

    async def _check_token_signature(self, token: jwt.Jwt, issuer: str) -> DidDoc:
        """The authority's signature, with its current key: on failure with a cached document, resolve again;
        returns the document whose key verified."""
        doc = await self._resolve(issuer, fresh=False)
        if self._signed_by(token, doc):
            return doc
        newer = await self._resolve(issuer, fresh=True)
        if newer is doc or not self._signed_by(token, newer):
            raise InvalidToken("the credential is not signed by the space authority's key")
        return newer

    def _signed_by(self, token: jwt.Jwt, doc: DidDoc) -> bool:
        kid = token.header.get("kid")
        method = SPACE_KEY if doc.key(SPACE_KEY) is not None else REPO_KEY
        if kid is not None and kid not in (method, f"{doc.did}{method}"):
            return False
        key = doc.key(method)
        return key is not None and _token_signed_by(token.signing_input, token.signature, token.alg, key.did_key)

    async def _resolve(self, did: str, *, fresh: bool) -> DidDoc:
        try:
            return await self.resolver.resolve(did, fresh=fresh)
        except ResolveError as exc:
            if exc.temporary:
                raise AuthorityUnreachable(f"could not resolve the space's authority: {exc}") from exc
            raise InvalidToken(f"the space's authority cannot be resolved: {exc}") from exc


# A member reuses one credential, and (without a nonce) the very same signature headers, for many
# requests: remembering what verified spares the two ECDSA checks that dominate a check's cost.
# Both functions are pure (same inputs, same answer); failures raise and are never cached.
@functools.lru_cache(maxsize=8192)
def _verified_signature(
    signature_input: str, signature: str, authorization: str, audience: str, holder: str
) -> dict[str, object]:
    """The parameters of a request signature that verified with the `holder` key."""
    sig = httpsig.parse(signature_input, signature)
    if len(sig.components) != len(COVERED) or set(sig.components) != COVERED:
        raise BadSpaceSignature('the signature must cover exactly ("authorization" "atproto-space-audience")')
    params = sig.params
    if "keyid" in params and params["keyid"] != holder:
        raise BadSpaceSignature("the signature's keyid is not the credential's cnf.kid")
    if "alg" in params and params["alg"] != httpsig.ECDSA_P256:
        raise BadSpaceSignature(f"the signature's alg must be {httpsig.ECDSA_P256}")
    if not parse_public_key(holder).verify(sig.base({"authorization": authorization, AUDIENCE_HEADER: audience}),
                                           sig.signature):
        raise BadSpaceSignature("the request signature does not verify with the credential's cnf.kid")
    return params


_CREDENTIAL_HEADERS = frozenset({b"authorization", AUDIENCE_HEADER.encode(), b"signature-input", b"signature"})
_AUDIENCE = AUDIENCE_HEADER.encode()


def _credential_fields(raw: list[tuple[bytes, bytes]]) -> dict[bytes, list[bytes]]:
    """The values of the header fields the check reads, by name and in order, from the request's raw
    (lowercase) fields in one pass, as they came."""
    out: dict[bytes, list[bytes]] = {}
    for name, value in raw:
        if name in _CREDENTIAL_HEADERS:
            out.setdefault(name, []).append(value)
    return out


def _fields_key(fields: dict[bytes, list[bytes]], space: str) -> tuple[str, bytes, bytes, bytes, bytes] | None:
    """The space and the four credential header fields, when each was sent once (else None: not to be
    remembered): what a remembered check is found by."""
    if len(fields) != 4 or any(len(values) != 1 for values in fields.values()):
        return None
    return (space, fields[b"authorization"][0], fields[_AUDIENCE][0], fields[b"signature-input"][0],
            fields[b"signature"][0])


def _credential_headers(fields: dict[bytes, list[bytes]]) -> dict[str, list[str]]:
    """The fields (`_credential_fields`) as the check reads them: names and values as Starlette's Headers
    reads each (latin-1)."""
    return {name.decode("latin-1"): [value.decode("latin-1") for value in values] for name, values in fields.items()}


@functools.lru_cache(maxsize=8192)
def _decoded(token: str) -> jwt.Jwt:
    """A credential's decoded parts (pure: a member sends the same token on every request; never mutated)."""
    return jwt.decode(token, typ=CREDENTIAL_TYP)


@functools.lru_cache(maxsize=8192)
def _token_signed_by(signing_input: bytes, signature: bytes, alg: str, key: str) -> bool:
    """Whether a JWT's signature verifies with the did:key `key` under `alg`."""
    public = parse_public_key(key)
    return public.alg == alg and public.verify(signing_input, signature)


def _int_param(params: dict[str, object], name: str) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadSpaceSignature(f"the signature's {name} must be an integer")
    return value
