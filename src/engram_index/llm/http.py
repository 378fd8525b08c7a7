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
from dataclasses import dataclass
from typing import Any

import httpx

from engram_index.errors import EngramError
from engram_index.http_answers import Retries, call_json, excerpt

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
    return call_json(
        lambda left: client.post(path, json=body, timeout=httpx.Timeout(left)),
        Retries(policy.retries, policy.backoff_s, policy.max_backoff_s),
        describe=f"{service} {client.base_url}{path}", deadline_s=timeout_s,
        bad_json=lambda: error(f"{service} answered {path} with a body that is not JSON"),
        rejected=lambda response: Rejected(response.status_code, excerpt(response)),
        failed=lambda problem, tries: error(f"{service} {problem} on {path} (after {tries} tries)"),
    )
