"""One JSON POST to an LLM or rerank endpoint, with bounded retries inside one overall deadline.

A call is retried on a connection error, a timeout, a 5xx or a 429, at most `retries` times
after the first try, waiting `backoff`, 2 x `backoff`, ... (at most `max_backoff`, or the
server's Retry-After when it is shorter), and never past the deadline: the whole call,
retries included, takes at most `timeout_s`. Any other 4xx fails at once. Every failure is
the `error` class given (an `Unavailable`, 503: try later) with a message naming the service
and the path, not the host (the log names the host).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx

from engram_index.errors import EngramError
from engram_index.http_answers import excerpt, retry_after

log = logging.getLogger(__name__)

DEFAULT_RETRIES = 2
DEFAULT_BACKOFF_S = 0.5
MAX_BACKOFF_S = 4.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a call is retried."""

    retries: int = DEFAULT_RETRIES
    backoff_s: float = DEFAULT_BACKOFF_S
    max_backoff_s: float = MAX_BACKOFF_S

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("retries and backoff must be >= 0")


class Rejected(Exception):
    """The endpoint refused the request with a 4xx other than 429 (not worth retrying as is)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail


def check_base_url(url: str, what: str) -> str:
    """The URL without a trailing slash, if it is http(s) with a host; ValueError otherwise."""
    try:
        parsed = httpx.URL(url)
    except Exception:
        raise ValueError(f"{what} URL is not a URL: {url!r}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"{what} URL must be http:// or https:// with a host, got {url!r}")
    return url.rstrip("/")


def post_json(
    client: httpx.Client,
    path: str,
    body: Any,
    *,
    service: str,
    error: type[EngramError],
    timeout_s: float,
    policy: RetryPolicy,
) -> Any:
    """POST `body` as JSON and return the parsed JSON answer; Rejected on a plain 4xx, `error` otherwise."""
    if timeout_s <= 0:
        raise ValueError("timeout_s must be > 0")
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        response: httpx.Response | None = None
        remaining = deadline - time.monotonic()
        try:
            response = client.post(path, json=body, timeout=httpx.Timeout(max(remaining, 0.001)))
        except httpx.TimeoutException:
            problem = f"did not answer within {timeout_s:g} s"
        except httpx.TransportError as exc:
            problem = f"could not be reached ({type(exc).__name__})"
        else:
            code = response.status_code
            if code < 300:
                try:
                    return response.json()
                except ValueError:
                    raise error(f"{service} answered {path} with a body that is not JSON") from None
            if 400 <= code < 500 and code != 429:
                raise Rejected(code, excerpt(response))
            problem = f"answered {code}: {excerpt(response)}"
        wait = min(policy.max_backoff_s, policy.backoff_s * 2**attempt)
        hinted = retry_after(response)
        if hinted is not None and 0 <= hinted <= policy.max_backoff_s:
            wait = hinted
        if attempt >= policy.retries or time.monotonic() + wait >= deadline:
            raise error(f"{service} {problem} on {path} (after {attempt + 1} tries)")
        log.warning("%s %s%s %s; retrying in %.2fs", service, client.base_url, path, problem, wait)
        time.sleep(wait)
        attempt += 1
