"""The one error root of engram-index and its hierarchy.

    EngramError                     every error this package raises on purpose
    ├── InvalidInput                the caller sent something malformed (XRPC 400 InvalidRequest)
    │   ├── BadVector               a vector that cannot be decoded or has the wrong dimensions
    │   ├── BadRecord               a record that does not follow garden.engram.memory
    │   ├── WrongMethod             an HTTP method the route does not take (405)
    │   └── RequestTimeout          the request head did not arrive in time (408)
    ├── SpaceError                  about a space as a whole
    │   ├── UnknownSpace            the space is not indexed here
    │   ├── NoModel                 the space has no declared embedding model
    │   ├── ModelMismatch           the query's model is not the space's model
    │   └── ModelNotHosted          q alone, and this service cannot embed it for the space
    ├── AuthError                   the caller may not query the space (XRPC 401 AuthRequired)
    │   ├── InvalidToken            the space credential is malformed, forged or not for this space
    │   ├── ExpiredToken            the space credential has expired
    │   ├── RevokedToken            the space's authority revoked the credential
    │   ├── BadSpaceAudience        Atproto-Space-Audience is missing or is not this service's DID
    │   └── BadSpaceSignature       the RFC 9421 request signature is missing, wrong or replayed
    ├── RateLimited                 too many requests (XRPC 429 RateLimitExceeded)
    ├── NotFound                    a document that does not exist
    ├── Unavailable                 temporary: retry shortly (XRPC 503)
    │   ├── IndexLoading            the space's index is loading
    │   ├── AuthorityUnreachable    the DID document needed to check a credential could not be fetched
    │   ├── StoreUnavailable        the shared record store (PostgreSQL) cannot be reached right now
    │   └── StoreConflict           another node wrote the same rows at the same moment: retry
    ├── TooLarge                    the request is larger than any valid one (XRPC 413)
    │   ├── TargetTooLong           the request target is (414)
    │   └── HeadTooLarge            the request head is (431)
    ├── UnknownMethod               a method this service does not serve, as configured (404 MethodNotImplemented)
    └── StorageError                the data directory is unusable

Each error carries the XRPC error name it maps to, so that one place (the API layer) can turn
any of them into a response without knowing the engine.
"""

from __future__ import annotations


class EngramError(Exception):
    """Root of every error engram-index raises on purpose."""

    xrpc_name: str = "InternalServerError"
    status: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(EngramError):
    """The caller sent something malformed."""

    xrpc_name = "InvalidRequest"
    status = 400


class BadVector(InvalidInput):
    """A vector that cannot be decoded or has the wrong dimensions."""


class BadRecord(InvalidInput):
    """A record that does not follow the garden.engram.memory lexicon."""


class SpaceError(EngramError):
    """An error about a space as a whole."""


class UnknownSpace(SpaceError):
    """The space is not indexed by this service."""

    xrpc_name = "UnknownSpace"
    status = 400  # as the reference server answers it


class NoModel(SpaceError):
    """The space's authority has not declared an embedding model."""

    xrpc_name = "NoModel"
    status = 400


class ModelMismatch(SpaceError):
    """The query's model is not the space's model."""

    xrpc_name = "ModelMismatch"
    status = 400


class ModelNotHosted(SpaceError):
    """q was sent without a vector and this service does not run the space's model."""

    xrpc_name = "ModelNotHosted"
    status = 400


class AuthError(EngramError):
    """The caller has not proved membership of the space."""

    xrpc_name = "AuthRequired"
    status = 401


class InvalidToken(AuthError):
    """The space credential is malformed, forged, or not for this space."""

    xrpc_name = "InvalidToken"


class ExpiredToken(AuthError):
    """The space credential has expired (or is not valid yet)."""

    xrpc_name = "ExpiredToken"


class RevokedToken(AuthError):
    """The space's authority revoked this credential."""

    xrpc_name = "RevokedToken"


class BadSpaceAudience(AuthError):
    """Atproto-Space-Audience is missing, doubled, or not this service's DID."""

    xrpc_name = "BadSpaceAudience"


class BadSpaceSignature(AuthError):
    """The RFC 9421 request signature is missing, malformed, wrong, stale or replayed."""

    xrpc_name = "BadSpaceSignature"


class RateLimited(EngramError):
    """Too many requests for this space (or key) right now; `retry_after_s`: when one can be admitted."""

    xrpc_name = "RateLimitExceeded"
    status = 429

    def __init__(self, message: str, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TooLarge(EngramError):
    """The request is larger than any valid request."""

    xrpc_name = "PayloadTooLarge"
    status = 413


class TargetTooLong(TooLarge):
    """The request target is longer than any valid one."""

    status = 414


class HeadTooLarge(TooLarge):
    """The request's header fields are larger than any valid ones."""

    status = 431


class WrongMethod(InvalidInput):
    """An HTTP method the route does not take."""

    status = 405


class RequestTimeout(InvalidInput):
    """The request head or body did not arrive within the time the server waits for it."""

    status = 408


class UnknownMethod(EngramError):
    """A method this service does not serve (at all, or as configured): retrying cannot help."""

    xrpc_name = "MethodNotImplemented"
    status = 404


class NotFound(EngramError):
    """A document that does not exist."""

    xrpc_name = "MemoryNotFound"
    status = 404


class Unavailable(EngramError):
    """A temporary condition: the caller should retry shortly."""

    xrpc_name = "Unavailable"
    status = 503


class IndexLoading(Unavailable):
    """The space's index is loading."""

    xrpc_name = "IndexLoading"


class AuthorityUnreachable(Unavailable):
    """A DID document needed to check a credential could not be fetched right now."""

    xrpc_name = "AuthorityUnreachable"


class StoreUnavailable(Unavailable):
    """The shared record store (PostgreSQL) cannot be reached right now."""

    xrpc_name = "Unavailable"


class StoreConflict(Unavailable):
    """Another node wrote the same rows at the same moment (shared store): the retry reads afresh."""

    xrpc_name = "Unavailable"


class StorageError(EngramError):
    """The data directory cannot be used."""
