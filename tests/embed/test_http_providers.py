"""Ollama and OpenAI-compatible embedders against a real HTTP server on a loopback port."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import numpy as np
import pytest

from engram_index.embed.base import (
    BadEmbedding,
    Embedder,
    EmbedderError,
    EmbedderRejected,
    EmbedderUnavailable,
    ModelFilesError,
    finish,
)
from engram_index.embed.ollama import OllamaEmbedder
from engram_index.embed.openai import OpenAIEmbedder

from .fake_provider import DIGEST_HEX, FakeProvider, raw_vector

DIMS = 8
TEXTS = ["the http server timed out", "pasta with tomatoes", "東京の天気", "", "résumé"]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeProvider]:
    provider = FakeProvider(DIMS)
    yield provider
    provider.close()


@pytest.fixture
def fake(server: FakeProvider) -> FakeProvider:
    server.reset()
    return server


def expected(texts: list[str]) -> np.ndarray:
    return finish(np.array([raw_vector(t, DIMS) for t in texts]), DIMS)


def ollama(fake: FakeProvider, **kw: object) -> OllamaEmbedder:
    kw = {"retries": 2, "backoff": 0.0, "timeout": 5.0} | kw
    return OllamaEmbedder("nomic-embed-text", DIMS, fake.url, **kw)  # type: ignore[arg-type]


def openai(fake: FakeProvider, **kw: object) -> OpenAIEmbedder:
    kw = {"retries": 2, "backoff": 0.0, "timeout": 5.0} | kw
    return OpenAIEmbedder("text-embedding-test", DIMS, "sha256:" + "c" * 64, fake.url, **kw)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- Ollama ----------------------------------------------------------------------------------


def test_ollama_names_the_model_by_the_digest_its_tags_report(fake: FakeProvider) -> None:
    with ollama(fake) as emb:
        assert emb.identity.model == "nomic-embed-text"
        assert emb.identity.digest == "sha256:" + DIGEST_HEX
        assert emb.identity.dims == DIMS
        assert isinstance(emb, Embedder)
    assert fake.requests[0]["method"] == "GET" and fake.requests[0]["path"] == "/api/tags"


def test_ollama_embeds_in_input_order_in_batches_normalised_and_float16_exact(fake: FakeProvider) -> None:
    with ollama(fake, batch_size=2) as emb:
        got = emb.embed_documents(TEXTS)
    np.testing.assert_array_equal(got, expected(TEXTS))
    assert got.dtype == np.float32
    assert np.array_equal(got, got.astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=2e-3)
    posts = fake.posts()
    assert [p["path"] for p in posts] == ["/api/embed"] * 3
    assert [p["body"]["input"] for p in posts] == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:]]
    assert all(p["body"]["model"] == "nomic-embed-text" for p in posts)


def test_ollama_refuses_a_model_it_does_not_have(fake: FakeProvider) -> None:
    with pytest.raises(EmbedderError, match="does not have the model mxbai"):
        OllamaEmbedder("mxbai-embed-large", DIMS, fake.url)


def test_ollama_refuses_a_model_whose_digest_is_not_the_expected_one(fake: FakeProvider) -> None:
    with pytest.raises(ModelFilesError, match="expected sha256:aaaa"):
        ollama(fake, expected_digest="sha256:" + "a" * 64)
    with ollama(fake, expected_digest="sha256:" + DIGEST_HEX) as emb:
        emb.check_identity()


def test_a_500_then_success_is_retried_and_succeeds(fake: FakeProvider) -> None:
    with ollama(fake) as emb:
        fake.plan += ["500"]
        np.testing.assert_array_equal(emb.embed_queries(["q"]), expected(["q"]))
    assert len(fake.posts()) == 2


def test_retries_are_bounded_then_the_embedder_is_unavailable(fake: FakeProvider) -> None:
    with ollama(fake, retries=2) as emb:
        fake.plan += ["503"] * 5
        with pytest.raises(EmbedderUnavailable, match="answered 503.*after 3 tries") as info:
            emb.embed_queries(["q"])
    assert info.value.status == 503
    assert len(fake.posts()) == 3


def test_a_dropped_connection_and_a_429_are_retried(fake: FakeProvider) -> None:
    with ollama(fake) as emb:
        fake.plan += ["drop", "429"]
        np.testing.assert_array_equal(emb.embed_queries(["q"]), expected(["q"]))
    assert len(fake.posts()) == 3


def test_a_slow_answer_times_out_and_is_retried(fake: FakeProvider) -> None:
    with ollama(fake, timeout=0.25, retries=1) as emb:
        fake.plan += ["slow"]
        np.testing.assert_array_equal(emb.embed_queries(["q"]), expected(["q"]))
        fake.plan += ["slow", "slow"]
        with pytest.raises(EmbedderUnavailable, match="timed out"):
            emb.embed_queries(["q"])


def test_a_server_that_is_not_listening_is_unavailable() -> None:
    with pytest.raises(EmbedderUnavailable, match="could not be reached.*after 2 tries"):
        OllamaEmbedder("nomic-embed-text", DIMS, f"http://127.0.0.1:{free_port()}", retries=1, backoff=0.0)


def test_a_4xx_is_refused_at_once_with_the_providers_message(fake: FakeProvider) -> None:
    with ollama(fake) as emb:
        fake.plan += ["404"]
        with pytest.raises(EmbedderRejected, match="404.*not found, try pulling it first"):
            emb.embed_documents(["d"])
    assert len(fake.posts()) == 1


@pytest.mark.parametrize(("behaviour", "message"), [
    ("dims", "embedding 1 has 9 dimensions, nomic-embed-text has 8"),
    ("zero", "embedding 0 is all zeros"),
    ("short", "answered 1 embeddings for 2 texts"),
    ("malformed", "malformed JSON"),
])
def test_unusable_answers_are_clear_errors(fake: FakeProvider, behaviour: str, message: str) -> None:
    with ollama(fake) as emb:
        fake.plan += [behaviour]
        with pytest.raises(BadEmbedding, match=message) as info:
            emb.embed_documents(["a", "b"])
    assert info.value.status == 500
    assert len(fake.posts()) == 1  # not retried


# -- OpenAI-compatible -----------------------------------------------------------------------


def test_openai_embeds_with_the_operators_digest_and_bearer_key(fake: FakeProvider) -> None:
    with openai(fake, api_key="sk-test", batch_size=3) as emb:
        assert emb.identity.digest == "sha256:" + "c" * 64
        got = emb.embed_documents(TEXTS)
    np.testing.assert_array_equal(got, expected(TEXTS))
    posts = fake.posts()
    assert [p["path"] for p in posts] == ["/v1/embeddings"] * 2
    assert [p["body"] for p in posts] == [{"model": "text-embedding-test", "input": TEXTS[:3]},
                                          {"model": "text-embedding-test", "input": TEXTS[3:]}]
    assert {p["authorization"] for p in posts} == {"Bearer sk-test"}


def test_openai_without_a_key_sends_no_authorization(fake: FakeProvider) -> None:
    with openai(fake) as emb:
        emb.embed_queries(["q"])
    assert fake.posts()[0]["authorization"] is None


def test_openai_rows_are_put_back_in_order_by_index(fake: FakeProvider) -> None:
    with openai(fake) as emb:
        fake.plan += ["shuffled"]
        np.testing.assert_array_equal(emb.embed_documents(TEXTS), expected(TEXTS))


def test_openai_refuses_repeated_indexes(fake: FakeProvider) -> None:
    with openai(fake) as emb:
        fake.plan += ["dup-index"]
        with pytest.raises(BadEmbedding, match="indexes"):
            emb.embed_documents(["a", "b", "c"])


def test_openai_retries_a_500_and_refuses_a_401(fake: FakeProvider) -> None:
    with openai(fake) as emb:
        fake.plan += ["500"]
        np.testing.assert_array_equal(emb.embed_queries(["q"]), expected(["q"]))
        fake.plan += ["401"]
        with pytest.raises(EmbedderRejected, match="401.*Incorrect API key"):
            emb.embed_queries(["q"])


@pytest.mark.parametrize(("behaviour", "message"), [
    ("dims", "has 9 dimensions"),
    ("zero", "embedding 0 is all zeros"),
    ("short", "answered 1 embeddings for 2 texts"),
    ("malformed", "malformed JSON"),
])
def test_openai_unusable_answers_are_clear_errors(fake: FakeProvider, behaviour: str, message: str) -> None:
    with openai(fake) as emb:
        fake.plan += [behaviour]
        with pytest.raises(BadEmbedding, match=message):
            emb.embed_documents(["a", "b"])


def test_an_empty_input_makes_no_request(fake: FakeProvider) -> None:
    with openai(fake) as emb:
        assert emb.embed_documents([]).shape == (0, DIMS)
    assert fake.posts() == []
