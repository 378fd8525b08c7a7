"""The v5 face's errors and its two error bodies (ErrorResponse and ValidationErrorResponse).

    EngramError
    └── V5Error                    an error with a v5 status and an ErrorResponse body
        ├── Unauthorized           401: a missing, unknown, expired or revoked key
        ├── Forbidden              403: the key does not reach the namespace, or may not write
        ├── Missing                404: no such namespace, document or memory here
        ├── Conflict               409: the document is still processing, a namespace is busy
        ├── NotConfigured          400: a feature whose setting (an LLM, a reranker, an embedder) is off
        └── Invalid                400: a body, query or path that does not follow the schema
                                   (ValidationErrorResponse, with each issue's path)

Every other EngramError keeps its own status (InvalidInput 400, Unavailable 503, ...); `http.py`
turns all of them into a response in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram_index.errors import EngramError

Path = list[str | int]


class V5Error(EngramError):
    """An error with a v5 status and an ErrorResponse body `{error, details}`."""

    status = 500

    def __init__(self, message: str, details: str | None = None) -> None:
        super().__init__(message)
        self.details = details

    def body(self) -> dict[str, Any]:
        """The ErrorResponse body."""
        out: dict[str, Any] = {"error": self.message}
        if self.details:
            out["details"] = self.details
        return out


class Unauthorized(V5Error):
    """A missing, unknown, expired or revoked key."""

    status = 401


class Forbidden(V5Error):
    """The key does not reach this namespace, or this process may not write."""

    status = 403


class Missing(V5Error):
    """No such namespace, document or memory in this namespace."""

    status = 404


class Conflict(V5Error):
    """The document is still processing, or the namespace is busy."""

    status = 409


class NotConfigured(V5Error):
    """A feature that needs a setting this server was started without."""

    status = 400


class BadRequest(V5Error):
    """400 with an ErrorResponse: a request the v5 API refuses before any body is read (its content type)."""

    status = 400


class Invalid(V5Error):
    """A request that does not follow the schema: a ValidationErrorResponse with every issue."""

    status = 400

    def __init__(self, issues: Sequence[tuple[str, Path]]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, p)) or '(body)'}: {m}" for m, p in issues))
        self.issues = list(issues)

    def body(self) -> dict[str, Any]:
        """The ValidationErrorResponse body."""
        return {"success": False, "error": [{"message": m, "path": p} for m, p in self.issues]}


def invalid(message: str, *path: str | int) -> Invalid:
    """One validation issue at a path."""
    return Invalid([(message, list(path))])
