"""The garden.engram face's credential errors: a space credential or signature that does not check out.

    AuthError (errors.py)           the caller may not query the space (401)
    ├── InvalidToken                the space credential is malformed, forged or not for this space
    ├── ExpiredToken                the space credential has expired
    ├── RevokedToken                the space's authority revoked the credential
    ├── BadSpaceAudience            Atproto-Space-Audience is missing or is not this service's DID
    └── BadSpaceSignature           the RFC 9421 request signature is missing, wrong or replayed
    Unavailable (errors.py)
    └── AuthorityUnreachable        the DID document needed to check a credential could not be fetched
"""

from __future__ import annotations

from engram_index.errors import AuthError, Unavailable


class InvalidToken(AuthError):
    """The space credential is malformed, forged, or not for this space."""

    code = "invalid_token"


class ExpiredToken(AuthError):
    """The space credential has expired (or is not valid yet)."""

    code = "expired_token"


class RevokedToken(AuthError):
    """The space's authority revoked this credential."""

    code = "revoked_token"


class BadSpaceAudience(AuthError):
    """Atproto-Space-Audience is missing, doubled, or not this service's DID."""

    code = "bad_space_audience"


class BadSpaceSignature(AuthError):
    """The RFC 9421 request signature is missing, malformed, wrong, stale or replayed."""

    code = "bad_space_signature"


class AuthorityUnreachable(Unavailable):
    """A DID document needed to check a credential could not be fetched right now."""

    code = "authority_unreachable"
