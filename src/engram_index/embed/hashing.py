"""A deterministic hashing embedder, for tests and demos: no model, no randomness.

Feature hashing of the analyzer's index terms: each term goes to bucket
`blake2b-64(term) mod dims` with the sign of the hash's top bit, counts add up, the vector is
L2-normalised (and rounded through float16 like any other). Texts sharing terms get a
positive cosine, so ranking by meaning is crudely imitated by ranking by shared words.
A text without any term hashes its whole text as the one feature, so no vector is all zeros.

The identity's digest is the sha256 of `DESCRIPTION` with the analyzer version, so vectors
made under another analyzer (other terms) never pass for comparable ones.
"""

from __future__ import annotations

import hashlib

import numpy as np

from engram_index.engine.analyzer import ANALYZER_VERSION, index_terms
from engram_index.engine.types import ModelIdentity
from engram_index.embed.base import DEFAULT_BATCH_SIZE, BatchedEmbedder

HASHING_MODEL = "hashing-v1"
DESCRIPTION = (
    "hashing-v1: engram_index analyzer index_terms (version {version}); each term to bucket "
    "blake2b-64(utf-8 term, big-endian) mod dims, sign + when the top bit is 0; counts; L2-normalised"
)


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


def hashing_identity(dims: int) -> ModelIdentity:
    """The identity of the hashing embedder with `dims` buckets."""
    description = DESCRIPTION.format(version=ANALYZER_VERSION)
    return ModelIdentity(HASHING_MODEL, "sha256:" + hashlib.sha256(description.encode()).hexdigest(), dims)


class HashingEmbedder(BatchedEmbedder):
    """Feature hashing of analyzer terms into `dims` signed buckets; same input, same vector."""

    def __init__(self, dims: int = 384, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        super().__init__(batch_size)
        if dims < 1:
            raise ValueError(f"dims must be at least 1, got {dims}")
        self.identity = hashing_identity(dims)

    def _embed_batch(self, texts: list[str], kind: str) -> np.ndarray:
        dims = self.identity.dims
        out = np.zeros((len(texts), dims), np.float64)
        for row, text in enumerate(texts):
            for term in index_terms(text) or [text]:
                h = _hash64(term)
                out[row, h % dims] += -1.0 if h >> 63 else 1.0
            if not out[row].any():  # every term cancelled out: fall back to the whole text
                out[row, _hash64(text) % dims] = 1.0
        return out
