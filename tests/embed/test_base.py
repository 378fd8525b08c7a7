"""The embedder interface's helpers: the texts embedded, finishing vectors, batching."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engram_index.embed.base import (
    BadEmbedding,
    BatchedEmbedder,
    EmbedderError,
    EmbedderUnavailable,
    document_text,
    finish,
    query_text,
)
from engram_index.engine.types import ModelIdentity
from engram_index.errors import EngramError, Unavailable


def test_document_text_is_prefix_text_then_tags_as_the_go_implementation_makes_it(shared_dir: Path) -> None:
    cases = json.loads((shared_dir / "data" / "interop" / "engram-go-vectors.json").read_text())["embedText"]
    assert cases
    for case in cases:
        assert document_text(case["prefix"], case["text"], case["tags"]) == case["want"]


def test_document_text_adds_tags_after_a_blank_line_and_none_when_there_are_none() -> None:
    assert document_text("search_document: ", "hi", ["a", "b"]) == "search_document: hi\n\nTags: a, b"
    assert document_text("", "hi", []) == "hi"
    assert document_text("", "hi", None) == "hi"


def test_a_query_is_embedded_as_the_query_prefix_then_q() -> None:
    assert query_text("search_query: ", "http timeout") == "search_query: http timeout"
    assert query_text("", "q") == "q"


def test_finish_normalises_and_rounds_through_float16_as_a_client_sends() -> None:
    raw = np.array([[3.0, 4.0, 0.0], [1e-3, 1e-3, 1e-3], [-2.0, 0.1, 0.7]])
    got = finish(raw, 3)
    assert got.dtype == np.float32 and got.shape == (3, 3)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-3)
    assert np.array_equal(got, got.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(got[0], np.array([0.6, 0.8, 0.0], np.float16).astype(np.float32))


@pytest.mark.parametrize(("raw", "count", "message"), [
    (np.ones((2, 4)), None, "embeddings have 4 dimensions, the model has 3"),
    (np.ones((2, 3)), 3, "expected 3 embeddings, got 2"),
    (np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), None, "embedding 1 is all zeros"),
    (np.array([[1.0, np.nan, 0.0]]), None, "embedding 0 holds NaN"),
    (np.array([[1.0, np.inf, 0.0]]), None, "embedding 0 holds NaN or infinite"),
    (np.ones(3), None, "must form a matrix"),
])
def test_finish_refuses_unusable_vectors_with_a_clear_error(raw: np.ndarray, count: int | None, message: str) -> None:
    with pytest.raises(BadEmbedding, match=message):
        finish(raw, 3, count)


def test_embedder_errors_are_engram_errors_and_unavailability_is_a_503() -> None:
    assert issubclass(EmbedderError, EngramError) and EmbedderError.status == 500
    assert issubclass(BadEmbedding, EmbedderError)
    assert issubclass(EmbedderUnavailable, Unavailable) and EmbedderUnavailable.status == 503


class Recording(BatchedEmbedder):
    """Embeds a text as its length and records every batch it is given."""

    def __init__(self, batch_size: int) -> None:
        super().__init__(batch_size)
        self.identity = ModelIdentity("recording", "sha256:00", 2)
        self.batches: list[tuple[list[str], str]] = []

    def _embed_batch(self, texts: list[str], kind: str) -> np.ndarray:
        self.batches.append((texts, kind))
        return np.array([[len(t), 1.0] for t in texts])


def test_inputs_are_split_into_batches_and_come_back_in_order() -> None:
    emb = Recording(batch_size=3)
    texts = [str(i) * i for i in range(1, 8)]
    got = emb.embed_documents(texts)
    assert [b for b, _ in emb.batches] == [texts[0:3], texts[3:6], texts[6:7]]
    np.testing.assert_array_equal(got, finish(np.array([[len(t), 1.0] for t in texts]), 2))
    emb.embed_queries(["q"])
    assert emb.batches[-1] == (["q"], "query")


def test_the_default_batch_is_32_texts_and_no_input_is_no_batch() -> None:
    emb = Recording(batch_size=32)
    emb.embed_documents(["x"] * 70)
    assert [len(b) for b, _ in emb.batches] == [32, 32, 6]
    assert Recording(32).embed_documents([]).shape == (0, 2)


def test_a_single_string_is_refused_rather_than_embedded_letter_by_letter() -> None:
    with pytest.raises(TypeError):
        Recording(4).embed_queries("hello")  # type: ignore[arg-type]
