"""What every embedder is: one interface, the texts it embeds, and how its vectors are finished.

An embedder turns final texts (built with `document_text` / `query_text`) into rows of a
float32 matrix of the model's dimensions, L2-normalised and then rounded through float16,
exactly as a client would send them in a record or a query (`f16le`). `finish` is the one
place that checks and shapes vectors, whatever produced them.

Errors (all `EngramError`s):

    EmbedderError           500: the embedder cannot be used or gave something unusable
    ├── ModelFilesError     the model's files are missing or are not the expected ones
    ├── BadEmbedding        a vector of the wrong dimensions, NaN, all zeros, a wrong count,
    │                       or a provider's answer that is not what its API returns
    └── EmbedderRejected    a provider refused the request (an HTTP 4xx other than 429)
    EmbedderUnavailable     503 (an `Unavailable`): a provider is down, timed out or kept
                            failing after the bounded retries
    └── EmbedderBusy        503: too many texts are being embedded right now
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from engram_index.engine.types import ModelIdentity
from engram_index.errors import EngramError, Unavailable
from engram_index.embed.text import embed_text

DEFAULT_BATCH_SIZE = 32


class EmbedderError(EngramError):
    """The embedder cannot be used, or it produced something unusable."""

    status = 500


class ModelFilesError(EmbedderError):
    """The model's files are missing, unreadable, or not the expected ones (wrong digest)."""


class BadEmbedding(EmbedderError):
    """A vector or an answer that cannot be used: wrong dimensions or count, NaN, all zeros."""


class EmbedderRejected(EmbedderError):
    """A provider refused the request (an HTTP 4xx other than 429)."""


class EmbedderUnavailable(Unavailable):
    """A provider is down, timed out, or kept failing: retry later."""


class EmbedderBusy(EmbedderUnavailable):
    """Too many texts are being embedded at once."""

    code = "embedder_busy"


@runtime_checkable
class Embedder(Protocol):
    """Something that embeds texts with one exactly identified model."""

    identity: ModelIdentity

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed final document texts: (len(texts), dims) float32, normalised, float16-exact."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed final query texts: (len(texts), dims) float32, normalised, float16-exact."""
        ...

    def close(self) -> None:
        """Release what the embedder holds (weights, connections)."""
        ...


def document_text(prefix: str, text: str, tags: Sequence[str] | None) -> str:
    """The text a memory is embedded as: prefix + text, then a blank line and `Tags: a, b`."""
    return embed_text(prefix, text, tuple(tags) if tags else None)


def query_text(prefix: str, q: str) -> str:
    """The text a query is embedded as: the space's query prefix, then q."""
    return prefix + q


def finish(vectors: np.ndarray, dims: int, count: int | None = None) -> np.ndarray:
    """Check raw model output and shape it as sent: L2-normalised, rounded through float16.

    Refuses (BadEmbedding) a matrix of the wrong shape or row count, NaN or infinite values,
    and all-zero rows, naming the first offending row.
    """
    arr = np.asarray(vectors)
    if arr.ndim != 2:
        raise BadEmbedding(f"embeddings must form a matrix, got an array of shape {arr.shape}")
    if count is not None and arr.shape[0] != count:
        raise BadEmbedding(f"expected {count} embeddings, got {arr.shape[0]}")
    if arr.shape[1] != dims:
        raise BadEmbedding(f"embeddings have {arr.shape[1]} dimensions, the model has {dims}")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise BadEmbedding(f"embeddings must be real numbers, got {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        raise BadEmbedding(f"embedding {int(np.argmin(finite))} holds NaN or infinite values")
    norms = np.linalg.norm(arr, axis=1)
    nonzero = norms > 0
    if not nonzero.all():
        raise BadEmbedding(f"embedding {int(np.argmin(nonzero))} is all zeros")
    unit = (arr / norms[:, None]).astype(np.float32)
    sent: np.ndarray = unit.astype("<f2").astype(np.float32)  # the values f16le(unit) sends
    return sent


def word_weights(texts: Sequence[str]) -> np.ndarray:
    """Each text's word count (at least 1): the weight of its vector in a pooled one."""
    return np.array([max(1, len(t.split())) for t in texts], np.float64)


def embed_weighted(embedder: Embedder, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors of document texts and their pooling weights: the embedder's own
    `embed_documents_weighted` where it has one (a mean-pooling model: tokens × unnormalised
    norm), else word counts."""
    method = getattr(embedder, "embed_documents_weighted", None)
    if method is not None:
        vectors, weights = method(texts)
        return vectors, weights
    return embedder.embed_documents(texts), word_weights(texts)


def pool(vectors: np.ndarray, weights: np.ndarray, dims: int) -> np.ndarray:
    """One unit vector for several texts: their weighted sum, normalised and rounded as sent.

    With a mean-pooling model whose weights are each text's tokens times its unnormalised norm,
    this is the mean of all their tokens' states: what the model gives the texts joined, except
    that each token saw only its own sentence (docs/design/supermemory.md measures the difference).
    """
    summed = (np.asarray(vectors, np.float64) * np.asarray(weights, np.float64)[:, None]).sum(axis=0)
    row: np.ndarray = finish(summed[None, :], dims, 1)[0]
    return row


class BatchedEmbedder:
    """Shared behaviour: split inputs into batches, embed each, finish the result.

    A subclass sets `identity` and implements `_embed_batch(texts, kind)` returning the raw
    (len(texts), dims) output of the model for one batch.
    """

    identity: ModelIdentity

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed final document texts (see `document_text`)."""
        return self._embed(texts, "document")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed final query texts (see `query_text`)."""
        return self._embed(texts, "query")

    def close(self) -> None:
        """Release resources; the default holds none."""

    def __enter__(self) -> BatchedEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """Embed in batches of `batch_size`, in order, and finish every batch."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not one string")
        dims = self.identity.dims
        out = np.empty((len(texts), dims), np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start:start + self.batch_size])
            out[start:start + len(batch)] = finish(self._embed_batch(batch, kind), dims, len(batch))
        return out

    def _embed_batch(self, texts: list[str], kind: str) -> np.ndarray:
        raise NotImplementedError
