"""The Kindgi face's errors: one class carrying the wire code, its status and details.

    EngramError
    └── KindgiError        code (a Kindgi domain code), status (from STATUS), details

Every route raises `KindgiError(code, message, details)`; `wire.error_response` is the one place
that turns it (or any other EngramError) into the envelope.
"""

from __future__ import annotations

from typing import Any

from engram_index.errors import EngramError

# The domain codes this face answers and their HTTP statuses (the SDK maps them by code).
STATUS: dict[str, int] = {
    "bad-input": 400,
    "unknown-field": 400,
    "validation-failed": 400,
    "scope-mismatch": 400,
    "scope-invalid": 400,
    "auth-missing": 401,
    "auth-expired": 401,
    "auth-revoked": 401,
    "permission-denied": 403,
    "fact-not-found": 404,
    "not-found": 404,
    "method-not-allowed": 405,
    "fact-changed": 409,
    "legal-hold": 409,
    "idempotency-key-body-mismatch": 409,
    "idempotency-key-in-flight": 409,
    "idempotency-key-replay-withheld": 409,
    "request-too-large": 413,
    "semantic-unavailable": 422,
    "rate-limit-exceeded": 429,
    "internal-server-error": 500,
    "memory-operation-unsupported": 501,
    "service-unavailable": 503,
}


class KindgiError(EngramError):
    """An error the Kindgi face answers with its own code."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        """An error with its wire code, a message and optional details."""
        super().__init__(message)
        self.code = code
        self.status = STATUS.get(code, 500)
        self.details = details


def not_found(fact_id: str) -> KindgiError:
    """The answer for a fact that does not exist or that the caller may not see (the same)."""
    return KindgiError("fact-not-found", f'No fact with id "{fact_id}"', {"factId": fact_id})


def unsupported(what: str) -> KindgiError:
    """The answer for something this runtime's memory cannot do."""
    return KindgiError("memory-operation-unsupported", f"This runtime's memory doesn't support {what}.")
