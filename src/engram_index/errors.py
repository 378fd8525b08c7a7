"""The one error root of engram-index and its hierarchy.

    EngramError                     every error this package raises on purpose
    ├── InvalidInput                the caller sent something malformed (400)
    │   ├── BadVector               a vector that cannot be decoded or has the wrong dimensions
    │   ├── BadRecord               a record that does not follow garden.engram.memory
    │   ├── WrongMethod             an HTTP method the route does not take (405)
    │   └── RequestTimeout          the request head did not arrive in time (408)
    ├── SpaceError                  about a space as a whole
    │   ├── UnknownSpace            the space is not indexed here
    │   ├── NoModel                 the space has no declared embedding model
    │   ├── ModelMismatch           the query's model is not the space's model
    │   └── ModelNotHosted          q alone, and this service cannot embed it for the space
    ├── AuthError                   the caller may not query the space (401)
    ├── RateLimited                 too many requests (429)
    ├── NotFound                    a document that does not exist
    ├── Unavailable                 temporary: retry shortly (503)
    │   ├── IndexLoading            the space's index is loading
    │   ├── StoreUnavailable        the shared record store (PostgreSQL) cannot be reached right now
    │   └── StoreConflict           another node wrote the same rows at the same moment: retry
    ├── TooLarge                    the request is larger than any valid one (413)
    │   ├── TargetTooLong           the request target is (414)
    │   └── HeadTooLarge            the request head is (431)
    ├── UnknownMethod               a method this service does not serve, as configured (404)
    └── StorageError                the data directory is unusable

Each error carries a neutral `code` (and its HTTP status); each face names the codes in its own
envelope in one place (garden.engram: engram/api/xrpc.py's XRPC_NAMES), so that the core speaks no
face. The AT Protocol credential errors are the garden.engram face's own (engram/auth/errors.py).
"""

from __future__ import annotations


class EngramError(Exception):
    """Root of every error engram-index raises on purpose."""

    code: str = "internal"
    status: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(EngramError):
    """The caller sent something malformed."""

    code = "invalid_input"
    status = 400


class BadVector(InvalidInput):
    """A vector that cannot be decoded or has the wrong dimensions."""


class BadRecord(InvalidInput):
    """A record that does not follow the garden.engram.memory lexicon."""


class SpaceError(EngramError):
    """An error about a space as a whole."""


class UnknownSpace(SpaceError):
    """The space is not indexed by this service."""

    code = "unknown_collection"
    status = 400  # as the reference server answers it


class NoModel(SpaceError):
    """The space's authority has not declared an embedding model."""

    code = "no_model"
    status = 400


class ModelMismatch(SpaceError):
    """The query's model is not the space's model."""

    code = "model_mismatch"
    status = 400


class ModelNotHosted(SpaceError):
    """q was sent without a vector and this service does not run the space's model."""

    code = "model_not_hosted"
    status = 400


class AuthError(EngramError):
    """The caller has not proved membership of the space."""

    code = "auth_required"
    status = 401







class RateLimited(EngramError):
    """Too many requests for this space (or key) right now; `retry_after_s`: when one can be admitted."""

    code = "rate_limited"
    status = 429

    def __init__(self, message: str, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TooLarge(EngramError):
    """The request is larger than any valid request."""

    code = "too_large"
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

    code = "unknown_method"
    status = 404


class NotFound(EngramError):
    """A document that does not exist."""

    code = "not_found"
    status = 404


class Unavailable(EngramError):
    """A temporary condition: the caller should retry shortly."""

    code = "unavailable"
    status = 503


class IndexLoading(Unavailable):
    """The space's index is loading."""

    code = "index_loading"



class StoreUnavailable(Unavailable):
    """The shared record store (PostgreSQL) cannot be reached right now."""

    code = "store_unavailable"


class StoreConflict(Unavailable):
    """Another node wrote the same rows at the same moment (shared store): the retry reads afresh."""

    code = "store_conflict"


class StorageError(EngramError):
    """The data directory cannot be used."""
