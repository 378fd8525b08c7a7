"""Calling a remote JSON service: bounded retries, and what a failed answer says (its message, Retry-After).

Shared by the clients of embedding providers (`embed/remote.py`) and of LLM and rerank endpoints
(`llm/http.py`), which retry and read failed answers the same way; each keeps its own errors and
its own deadline (none beyond each try's timeout, or one for the whole call).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Retries:
    """How often and how patiently a call is retried: `retries` after the first try, waiting
    `backoff_s`, twice that, ... at most `max_backoff_s` (or the server's shorter Retry-After)."""

    retries: int
    backoff_s: float
    max_backoff_s: float


def call_json(
    send: Callable[[float | None], httpx.Response],
    retries: Retries,
    *,
    describe: str,
    deadline_s: float | None = None,
    bad_json: Callable[[], Exception],
    rejected: Callable[[httpx.Response], Exception],
    failed: Callable[[str, int], Exception],
) -> Any:
    """The parsed JSON answer of `send(timeout)`, retried on a connection error, a timeout, a 5xx or a 429.

    `send` gets the seconds left of `deadline_s` (None without one: each try keeps its client's
    timeout); no wait runs past the deadline. A 2xx that is not JSON raises `bad_json()`, any other
    4xx `rejected(response)` at once, and the last failure `failed(problem, tries)`.
    """
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    attempt = 0
    while True:
        response: httpx.Response | None = None
        left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
        try:
            response = send(left)
        except httpx.TimeoutException:
            problem = "timed out" if deadline_s is None else f"did not answer within {deadline_s:g} s"
        except httpx.TransportError as exc:
            problem = f"could not be reached ({type(exc).__name__})"
        else:
            code = response.status_code
            if code < 300:
                try:
                    return response.json()
                except ValueError:
                    raise bad_json() from None
            if 400 <= code < 500 and code != 429:
                raise rejected(response)
            problem = f"answered {code}: {excerpt(response)}"
        wait = min(retries.max_backoff_s, retries.backoff_s * 2**attempt)
        hinted = retry_after(response)
        if hinted is not None and 0 <= hinted <= retries.max_backoff_s:
            wait = hinted
        if attempt >= retries.retries or (deadline is not None and time.monotonic() + wait >= deadline):
            raise failed(problem, attempt + 1)
        log.warning("%s %s; retrying in %.2fs", describe, problem, wait)
        time.sleep(wait)
        attempt += 1


def excerpt(response: httpx.Response) -> str:
    """The service's own error message if it gave one (`error`, `error.message`, `message` or `detail`),
    else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error", body.get("message", body.get("detail")))
        if isinstance(error, dict):
            error = error.get("message")
        if isinstance(error, str):
            return error[:200]
    return response.text[:200]


def retry_after(response: httpx.Response | None) -> float | None:
    """The seconds a Retry-After header asks for, if the answer has a usable one."""
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
