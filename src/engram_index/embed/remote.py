"""What the HTTP embedders (Ollama, OpenAI-compatible) share: one JSON call with bounded retries.

A call is retried on a connection error, a timeout, a 5xx or a 429, at most `retries` times
after the first try, waiting `backoff`, 2 x `backoff`, ... (at most `max_backoff`; a
Retry-After of at most `max_backoff` seconds is honoured). Then it fails with
EmbedderUnavailable (503: try later). Any other 4xx is EmbedderRejected at once, and an answer
that is not JSON of the expected shape is BadEmbedding. Messages name the provider and the
path but not the host; the log names the host.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import numpy as np

from engram_index.engine.types import ModelIdentity
from engram_index.http_answers import Retries, call_json, excerpt
from engram_index.embed.base import DEFAULT_BATCH_SIZE, BadEmbedding, BatchedEmbedder, EmbedderError, EmbedderRejected, EmbedderUnavailable

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF_S = 0.5
MAX_BACKOFF_S = 4.0


class HttpEmbedder(BatchedEmbedder):
    """An embedder reached over HTTP with JSON bodies. Subclasses implement `_embed_batch`."""

    provider = "embedder"

    def __init__(
        self,
        base_url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S,
        max_backoff: float = MAX_BACKOFF_S,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        super().__init__(batch_size)
        if not base_url.startswith(("http://", "https://")):
            raise EmbedderError(f"{self.provider} URL must start with http:// or https://, got {base_url!r}")
        if retries < 0 or timeout <= 0 or backoff < 0:
            raise ValueError("retries and backoff must be >= 0 and timeout > 0")
        self.base_url = base_url.rstrip("/")
        self.retries, self.backoff, self.max_backoff = retries, backoff, max_backoff
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        """One JSON request with bounded retries; the parsed JSON answer."""
        return call_json(
            lambda _left: self._client.request(method, path, json=body),
            Retries(self.retries, self.backoff, self.max_backoff),
            describe=f"{self.provider} {self.base_url}{path}",
            bad_json=lambda: BadEmbedding(f"{self.provider} answered {path} with malformed JSON"),
            rejected=lambda response: EmbedderRejected(
                f"{self.provider} refused {path} ({response.status_code}): {excerpt(response)}"),
            failed=lambda problem, tries: EmbedderUnavailable(f"{self.provider} {problem} on {path} after {tries} tries"),
        )


def vectors_from_json(rows: Any, identity: ModelIdentity, count: int, provider: str) -> np.ndarray:
    """Check a provider's list of embeddings (count, dims, numbers) and make it a float64 matrix."""
    if not isinstance(rows, list):
        raise BadEmbedding(f"{provider} answered without a list of embeddings")
    if len(rows) != count:
        raise BadEmbedding(f"{provider} answered {len(rows)} embeddings for {count} texts")
    for i, row in enumerate(rows):
        if not isinstance(row, list) or any(type(v) not in (int, float) for v in row):
            raise BadEmbedding(f"{provider} embedding {i} is not a list of numbers")
        if len(row) != identity.dims:
            raise BadEmbedding(
                f"{provider} embedding {i} has {len(row)} dimensions, {identity.model} has {identity.dims}"
            )
    return np.asarray(rows, np.float64).reshape(count, identity.dims)
