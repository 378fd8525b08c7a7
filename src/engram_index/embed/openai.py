"""Embeddings from an OpenAI-compatible server: `POST /v1/embeddings`.

    POST {base}/v1/embeddings  {"model": "...", "input": ["...", ...]}
      -> {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [...]}, ...]}

Rows are put back in input order by `index` (every index from 0 to n - 1 exactly once). The
API reports no digest of the weights, so the operator sets it: it must name the exact build
the server runs. An API key, if given, is sent as `Authorization: Bearer <key>`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engram_index.engine.types import ModelIdentity
from engram_index.embed.base import DEFAULT_BATCH_SIZE, BadEmbedding
from engram_index.embed.remote import DEFAULT_BACKOFF_S, DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, HttpEmbedder, vectors_from_json


class OpenAIEmbedder(HttpEmbedder):
    """A model behind an OpenAI-compatible embeddings endpoint; its digest is the operator's."""

    provider = "OpenAI-compatible embedder"

    def __init__(
        self,
        model: str,
        dims: int,
        digest: str,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if dims < 1:
            raise ValueError(f"dims must be at least 1, got {dims}")
        if not digest:
            raise ValueError("an OpenAI-compatible model needs its digest set by the operator")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        super().__init__(base_url, headers=headers, timeout=timeout, retries=retries, backoff=backoff,
                         batch_size=batch_size)
        self.model = model
        self.identity = ModelIdentity(model, digest, dims)

    def _embed_batch(self, texts: list[str], kind: str) -> np.ndarray:
        body = self._call("POST", "/v1/embeddings", {"model": self.model, "input": texts})
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise BadEmbedding(f"{self.provider} answered without a data list")
        indexes = [item.get("index") for item in data]
        if sorted(i for i in indexes if type(i) is int) != list(range(len(data))):
            raise BadEmbedding(f"{self.provider} answered indexes {indexes[:10]} instead of 0..{len(data) - 1}")
        ordered: list[Any] = [None] * len(data)
        for item in data:
            ordered[item["index"]] = item.get("embedding")
        return vectors_from_json(ordered, self.identity, len(texts), self.provider)
