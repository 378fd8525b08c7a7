"""all-MiniLM-L6-v2 on onnxruntime, from the packaged weights: agrees with sentence-transformers."""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from engram_index.embed.base import Embedder, EmbedderError, ModelFilesError, document_text
from engram_index.embed.local import (
    MAX_TOKENS,
    MINILM_IDENTITY,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    MiniLMEmbedder,
    packaged_model_dir,
)


@pytest.fixture(scope="module")
def minilm() -> Iterator[MiniLMEmbedder]:
    emb = MiniLMEmbedder()
    yield emb
    emb.close()


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.asarray((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))


def test_every_scifact_query_agrees_with_the_reference_embeddings(minilm: MiniLMEmbedder, scifact_dir: Path) -> None:
    with open(scifact_dir / "queries.jsonl", encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for line in fh]
    reference = np.load(scifact_dir / "queries.minilm.f32.npy")
    assert reference.shape == (len(queries), 384) == (300, 384)
    got = minilm.embed_queries(queries)
    assert got.shape == (300, 384) and got.dtype == np.float32
    assert float(cosines(got, reference).min()) >= 0.9999


def test_documents_longer_than_256_tokens_agree_with_the_reference(minilm: MiniLMEmbedder, scifact_dir: Path) -> None:
    reference = np.load(scifact_dir / "corpus.minilm.f16.npy")
    rows, texts = [], []
    with open(scifact_dir / "corpus.jsonl", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            doc = json.loads(line)
            text = doc["title"] + " " + doc["text"]
            if len(text) > 2000:  # well over 256 tokens: exercises truncation
                rows.append(i)
                texts.append(text)
            if len(rows) == 6:
                break
    got = minilm.embed_documents(texts)
    assert float(cosines(got, reference[rows]).min()) >= 0.9999


def test_outputs_are_l2_normalised_and_exactly_float16_representable(minilm: MiniLMEmbedder) -> None:
    got = minilm.embed_documents([document_text("", "hello world", ["a", "b"]), "", "東京の天気は晴れ"])
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=2e-3)
    assert np.array_equal(got, got.astype(np.float16).astype(np.float32))


def test_text_past_256_tokens_is_cut_and_text_before_it_is_not(minilm: MiniLMEmbedder) -> None:
    head = "the quick brown fox jumps over the lazy dog. " * 20  # 221 tokens with [CLS]
    tail = "completely different words about pasta and tomatoes " * 60
    other = "unrelated sentences on distributed databases and servers " * 60
    assert len(minilm._tokenizer.encode(head).ids) < 230
    cut, longer, changed = minilm.embed_documents([head + tail, head + tail + other, head + other])
    assert float(cosines(cut[None], longer[None])[0]) >= 0.99999  # beyond 256 tokens: ignored
    assert float(cut @ changed) < 0.999  # tokens 222..256 count (tokenizer.json alone cuts at 128)
    tokens = minilm._tokenizer.encode(head + tail).ids
    assert len(tokens) == MAX_TOKENS and tokens[-1] == 102  # [SEP] closes the cut text


def test_a_text_embeds_the_same_alone_or_padded_in_a_batch(minilm: MiniLMEmbedder) -> None:
    alone = minilm.embed_queries(["mitochondria and aging"])
    batched = minilm.embed_queries(["a much longer text that forces padding of the short one " * 5,
                                    "mitochondria and aging", "x"])
    assert float(cosines(alone, batched[1:2])[0]) >= 0.99999


def test_one_query_is_embedded_in_one_pass_of_its_own_tokens_as_the_batch_path_embeds_it(
        minilm: MiniLMEmbedder) -> None:
    texts = ["mitochondria and aging", "", "東京の天気は晴れ", "the quick brown fox jumps over the lazy dog. " * 40]
    passes: list[list[list[int]]] = []
    forward = minilm.forward
    minilm.forward = lambda batch: (passes.append(batch), forward(batch))[1]  # type: ignore[method-assign]
    try:
        for text in texts:
            passes.clear()
            alone = minilm.embed_queries([text])
            assert passes == [[minilm._tokenizer.encode(text).ids]]  # one pass, the text's own (cut) tokens
            assert alone.shape == (1, 384) and alone.dtype == np.float32
            assert np.array_equal(alone, minilm._embed([text], "query"))  # bit for bit the batch path's
    finally:
        del minilm.forward
    with pytest.raises(TypeError):
        minilm.embed_queries("one string")  # type: ignore[arg-type]


def test_a_closed_embedder_refuses_one_query_too() -> None:
    emb = MiniLMEmbedder()
    emb.close()
    with pytest.raises(EmbedderError, match="closed"):
        emb.embed_queries(["anything"])


def test_a_pass_holds_at_most_batch_size_texts_and_pass_tokens_padded_tokens() -> None:
    emb = MiniLMEmbedder(batch_size=4, pass_tokens=64)
    passes: list[list[list[int]]] = []
    forward = emb.forward
    emb.forward = lambda batch: (passes.append(batch), forward(batch))[1]  # type: ignore[method-assign]
    texts = [" ".join(["word"] * n) for n in (1, 30, 2, 3, 70, 4, 5, 6, 7, 8, 9, 10, 40, 3, 1)]
    got = emb.embed_documents(texts)
    assert sorted(len(row) for batch in passes for row in batch) == sorted(len(emb._tokenizer.encode(t).ids) for t in texts)
    for batch in passes:  # a text longer than pass_tokens goes alone
        assert len(batch) <= 4
        assert len(batch) == 1 or len(batch) * max(len(row) for row in batch) <= 64
    assert any(len(batch) == 1 and len(batch[0]) > 64 for batch in passes)
    alone = np.concatenate([emb.embed_documents([t]) for t in texts])
    assert float(cosines(got, alone).min()) >= 0.99999
    emb.close()


def test_fewer_than_one_token_per_pass_is_refused() -> None:
    with pytest.raises(ValueError, match="pass_tokens must be at least 1"):
        MiniLMEmbedder(pass_tokens=0)


def test_the_identity_is_all_minilm_l6_v2_by_its_weights_digest(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.identity == MINILM_IDENTITY
    assert (MINILM_IDENTITY.model, MINILM_IDENTITY.dims) == ("all-MiniLM-L6-v2", 384)
    assert MINILM_IDENTITY.digest == "sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def test_weights_with_another_digest_are_refused(tmp_path: Path) -> None:
    source = packaged_model_dir()
    shutil.copy(source / TOKENIZER_FILE, tmp_path / TOKENIZER_FILE)
    weights = bytearray((source / WEIGHTS_FILE).read_bytes())
    weights[len(weights) // 2] ^= 0x01  # one bit of one weight: still a valid safetensors file
    (tmp_path / WEIGHTS_FILE).write_bytes(weights)
    with pytest.raises(ModelFilesError, match="refusing the model weights .*expected sha256:53aa5117"):
        MiniLMEmbedder(tmp_path)


def test_missing_weights_are_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelFilesError, match="cannot read the model weights"):
        MiniLMEmbedder(tmp_path)


def test_loading_and_embedding_never_touch_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    emb = MiniLMEmbedder(batch_size=2)
    assert emb.embed_queries(["offline", "only", "please"]).shape == (3, 384)
    emb.close()


def test_a_pass_runs_on_the_calling_thread_alone_unless_more_threads_are_asked_for(minilm: MiniLMEmbedder) -> None:
    assert minilm.threads == 1
    assert minilm._session.get_session_options().intra_op_num_threads == 1
    emb = MiniLMEmbedder(threads=2)
    assert emb._session.get_session_options().intra_op_num_threads == 2
    emb.close()


def test_fewer_than_one_thread_is_refused() -> None:
    with pytest.raises(ValueError, match="threads must be at least 1"):
        MiniLMEmbedder(threads=0)


def test_concurrent_callers_get_the_vectors_a_single_caller_gets(minilm: MiniLMEmbedder) -> None:
    batches = [[f"query {i} about topic {j}" for j in range(i + 1)] for i in range(8)]
    alone = [minilm.embed_queries(batch) for batch in batches]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(minilm.embed_queries, batches))
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_closed_embedder_refuses_to_embed() -> None:
    emb = MiniLMEmbedder()
    emb.close()
    with pytest.raises(EmbedderError, match="closed"):
        emb.embed_queries(["too late"])


def test_pooling_weighted_outputs_of_one_sentence_gives_its_own_vector(minilm: MiniLMEmbedder) -> None:
    from engram_index.embed.base import pool

    texts = ["The harbour closes at dusk.", "The harbour closes at dusk."]
    vectors, weights = minilm.embed_documents_weighted(texts)
    assert np.array_equal(vectors, minilm.embed_documents(texts))
    assert weights[0] == weights[1] > 0
    assert cosines(pool(vectors, weights, 384)[None, :], vectors[:1])[0] > 0.9999


def test_pooled_sentences_come_close_to_the_model_on_their_joined_text(minilm: MiniLMEmbedder) -> None:
    from engram_index.embed.base import pool

    sentences = ["High tide is at noon today.", "The harbour closes at dusk.",
                 "Ferries to the island leave every hour from the north pier."]
    vectors, weights = minilm.embed_documents_weighted(sentences)
    whole = minilm.embed_documents([" ".join(sentences)])
    pooled = pool(vectors, weights, 384)[None, :]
    # Over SciFact's chunks the pooled vector is at cosine 0.939 (p50) from the model's own
    # (bench/v5_chunk_vectors.py); each token saw only its sentence, so not exactly it.
    assert 0.85 < cosines(pooled, whole)[0] < 0.9999
