"""XRPC plumbing: query parameters and the one place that turns errors into responses."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import EngramError, InvalidInput

log = logging.getLogger("engram_index.api")

Handler = Callable[[Request], Awaitable[Any]]


class Params:
    """Typed access to a request's query parameters, raising InvalidRequest on bad input."""

    def __init__(self, request: Request) -> None:
        """Wrap the request's query string."""
        self._q = request.query_params

    def string(self, name: str, *, required: bool = False, max_length: int | None = None) -> str | None:
        """A single string parameter."""
        values = self._q.getlist(name)
        if len(values) > 1:
            raise InvalidInput(f"{name} given more than once")
        if not values:
            if required:
                raise InvalidInput(f"{name} is required")
            return None
        value = values[0]
        if max_length is not None and len(value) > max_length:
            raise InvalidInput(f"{name} is longer than {max_length} characters")
        return value

    def integer(self, name: str, default: int, minimum: int, maximum: int) -> int:
        """An integer parameter within bounds."""
        raw = self.string(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError as exc:
            raise InvalidInput(f"{name} must be an integer") from exc
        if not minimum <= value <= maximum:
            raise InvalidInput(f"{name} must be between {minimum} and {maximum}")
        return value

    def strings(self, name: str, max_items: int) -> list[str]:
        """A repeated string parameter."""
        values = self._q.getlist(name)
        if len(values) > max_items:
            raise InvalidInput(f"at most {max_items} {name}")
        return values


def xrpc(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a query handler: JSON out, every error as an XRPC error envelope, never a traceback."""

    async def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(await handler(request))
        except EngramError as exc:
            return error_response(exc.status, exc.xrpc_name, exc.message)
        except Exception:
            request_id = uuid.uuid4().hex[:16]
            log.exception("request %s failed", request_id)
            return error_response(500, "InternalServerError", f"internal error (request id {request_id})")

    return endpoint


def error_response(status: int, name: str, message: str) -> JSONResponse:
    """An XRPC error: {"error": name, "message": message}."""
    return JSONResponse({"error": name, "message": message}, status_code=status)
