"""The hashing embedder: deterministic feature hashing of the analyzer's terms."""

from __future__ import annotations

import hashlib

import numpy as np

from engram_index.embed.base import Embedder
from engram_index.embed.hashing import DESCRIPTION, HashingEmbedder, hashing_identity
from engram_index.engine.analyzer import ANALYZER_VERSION

TEXTS = ["The HTTPServer timed out on friday", "pasta with tomatoes", "東京の天気は晴れ", "🙂", "", "a the of"]


def test_hashing_is_deterministic_across_instances_and_batch_sizes() -> None:
    a = HashingEmbedder(64).embed_documents(TEXTS)
    b = HashingEmbedder(64, batch_size=1).embed_documents(list(reversed(TEXTS)))[::-1]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, HashingEmbedder(64).embed_queries(TEXTS))


def test_hashing_vectors_are_normalised_float16_exact_and_never_zero() -> None:
    got = HashingEmbedder(32).embed_documents(TEXTS)
    assert got.shape == (len(TEXTS), 32) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=2e-3)
    assert np.array_equal(got, got.astype(np.float16).astype(np.float32))


def test_texts_sharing_words_are_closer_than_texts_that_share_none() -> None:
    emb = HashingEmbedder(384)
    q, near, far = emb.embed_queries(["http server timeout", "the http server timed out", "pasta with tomatoes"])
    assert float(q @ near) > float(q @ far) + 0.2


def test_the_hashing_identity_names_its_recipe_and_dims() -> None:
    emb = HashingEmbedder(16)
    assert isinstance(emb, Embedder)
    digest = hashlib.sha256(DESCRIPTION.format(version=ANALYZER_VERSION).encode()).hexdigest()
    assert emb.identity == hashing_identity(16)
    assert (emb.identity.model, emb.identity.digest, emb.identity.dims) == ("hashing-v1", "sha256:" + digest, 16)
