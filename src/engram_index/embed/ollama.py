"""Embeddings from an Ollama server: `POST /api/embed`, the model's digest from `GET /api/tags`.

    POST {base}/api/embed  {"model": "nomic-embed-text", "input": ["...", ...]}
      -> {"model": ..., "embeddings": [[...], ...]}
    GET  {base}/api/tags
      -> {"models": [{"name": "nomic-embed-text:latest", "model": ..., "digest": "<hex>", ...}]}

The identity's digest is Ollama's digest of the pulled model, as `sha256:<hex>`: it is what
spaces name in `modelDigest`. It is read when the embedder is made; give `expected_digest`
to refuse a server whose model is another build, and call `check_identity()` to notice a
model pulled again under the same name.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from engram_index.engine.types import ModelIdentity
from engram_index.embed.base import DEFAULT_BATCH_SIZE, BadEmbedding, EmbedderError, ModelFilesError
from engram_index.embed.remote import DEFAULT_BACKOFF_S, DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, HttpEmbedder, vectors_from_json

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
_HEX_DIGEST = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


def _same_model(wanted: str, entry: dict[str, Any]) -> bool:
    """Whether a /api/tags entry is the model asked for (`name` means `name:latest`)."""
    full = wanted if ":" in wanted.rsplit("/", 1)[-1] else wanted + ":latest"
    return any(entry.get(key) in (wanted, full) for key in ("name", "model"))


class OllamaEmbedder(HttpEmbedder):
    """A model served by Ollama, identified by the digest Ollama reports for it."""

    provider = "Ollama"

    def __init__(
        self,
        model: str,
        dims: int,
        base_url: str = DEFAULT_OLLAMA_URL,
        *,
        expected_digest: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        super().__init__(base_url, timeout=timeout, retries=retries, backoff=backoff, batch_size=batch_size)
        if dims < 1:
            raise ValueError(f"dims must be at least 1, got {dims}")
        self.model = model
        try:
            self.identity = ModelIdentity(model, self.served_digest(), dims)
            if expected_digest is not None and self.identity.digest != expected_digest:
                raise ModelFilesError(
                    f"Ollama serves {model} with digest {self.identity.digest}, expected {expected_digest}"
                )
        except BaseException:
            self.close()
            raise

    def served_digest(self) -> str:
        """The digest Ollama reports now for the model, as `sha256:<hex>`."""
        body = self._call("GET", "/api/tags")
        models = body.get("models") if isinstance(body, dict) else None
        if not isinstance(models, list):
            raise BadEmbedding("Ollama answered /api/tags without a list of models")
        for entry in models:
            if isinstance(entry, dict) and _same_model(self.model, entry):
                match = _HEX_DIGEST.fullmatch(str(entry.get("digest", "")))
                if match is None:
                    raise BadEmbedding(f"Ollama reports no sha256 digest for {self.model}: {entry.get('digest')!r}")
                return "sha256:" + match.group(1)
        raise EmbedderError(f"Ollama does not have the model {self.model} (pull it first)")

    def check_identity(self) -> None:
        """Refuse (ModelFilesError) if the server's model changed since this embedder was made."""
        served = self.served_digest()
        if served != self.identity.digest:
            raise ModelFilesError(f"Ollama's {self.model} changed: digest {served}, was {self.identity.digest}")

    def _embed_batch(self, texts: list[str], kind: str) -> np.ndarray:
        body = self._call("POST", "/api/embed", {"model": self.model, "input": texts})
        rows = body.get("embeddings") if isinstance(body, dict) else None
        return vectors_from_json(rows, self.identity, len(texts), self.provider)
