"""The int8 all-MiniLM-L6-v2: quantized at load time from the verified weights, its own model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from engram_index.embed.base import ModelFilesError
from engram_index.embed.factory import embedder_from_spec, face_embedder_from_spec
from engram_index.embed.hashing import HashingEmbedder
from engram_index.embed.local import (
    MINILM_DIGEST,
    MINILM_IDENTITY,
    MINILM_INT8_DIGEST,
    MINILM_INT8_IDENTITY,
    WEIGHTS_FILE,
    MiniLMEmbedder,
    _read_verified,
    default_cache_dir,
    int8_cache_path,
    int8_graph,
    packaged_model_dir,
)
from engram_index.embed.minilm_graph import MiniLMGraph, build_minilm_graph
from engram_index.embed.quantize import digest, quantize_graph


@pytest.fixture(scope="module")
def graph() -> MiniLMGraph:
    from safetensors.numpy import load

    return build_minilm_graph(load(_read_verified(packaged_model_dir() / WEIGHTS_FILE, MINILM_DIGEST)))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("int8-cache")


@pytest.fixture(scope="module")
def int8(cache_dir: Path) -> Iterator[MiniLMEmbedder]:
    emb = MiniLMEmbedder(int8=True, cache_dir=cache_dir)
    yield emb
    emb.close()


def test_the_int8_graph_is_the_same_bytes_on_every_build_and_has_the_pinned_digest(graph: MiniLMGraph) -> None:
    first = quantize_graph(graph.model, graph.weights)
    second = quantize_graph(graph.model, graph.weights)
    assert first == second
    assert digest(first) == MINILM_INT8_DIGEST


def test_an_int8_graph_of_another_digest_is_refused(graph: MiniLMGraph) -> None:
    with pytest.raises(ModelFilesError, match="refusing the int8 graph .*expected sha256:0000"):
        int8_graph(graph, "sha256:" + "0" * 64)


def test_the_int8_model_is_a_model_of_its_own(int8: MiniLMEmbedder) -> None:
    assert int8.identity == MINILM_INT8_IDENTITY
    assert (MINILM_INT8_IDENTITY.model, MINILM_INT8_IDENTITY.dims) == ("all-MiniLM-L6-v2-int8", 384)
    assert MINILM_INT8_IDENTITY != MINILM_IDENTITY and MINILM_INT8_IDENTITY.digest != MINILM_IDENTITY.digest


def test_int8_query_vectors_stay_close_to_the_float32_ones(int8: MiniLMEmbedder, scifact_dir: Path) -> None:
    with open(scifact_dir / "queries.jsonl", encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for line in fh]
    reference = np.load(scifact_dir / "queries.minilm.f32.npy").astype(np.float64)
    got = int8.embed_queries(queries).astype(np.float64)
    cos = (got * reference).sum(1) / np.linalg.norm(reference, axis=1)
    assert float(cos.min()) >= 0.98 and float(cos.mean()) >= 0.99
    assert np.array_equal(got, got.astype(np.float16).astype(np.float64))  # finished as every vector


def test_an_int8_vector_is_the_same_whatever_texts_are_embedded_beside_it(int8: MiniLMEmbedder) -> None:
    # The graph quantizes each pass's activations with one scale: a text batched with others would
    # get a vector that depends on them (cosine 0.989 between two batchings of one abstract).
    texts = ["The patient was given aspirin.", "Vitamin D deficiency is common in the elderly population of"
             " northern countries, where sunlight is scarce for half of the year.", "ok",
             "Mutations in BRCA1 raise the risk of breast cancer.", "I moved to Berlin last spring."]
    alone = np.stack([int8.embed_documents([text])[0] for text in texts])
    together = int8.embed_documents(texts)
    beside_others = int8.embed_documents(texts[::-1] + ["A much longer text than the others, with many more"
                                                        " words in it, so that it would set a batch's padding."])
    assert np.array_equal(together, alone)
    assert np.array_equal(beside_others[:len(texts)][::-1], alone)
    assert np.array_equal(int8.embed_queries(texts), np.stack([int8.embed_queries([t])[0] for t in texts]))


def test_quantization_works_on_any_local_graph_with_matmuls() -> None:
    weight = np.arange(-32, 32, dtype=np.float32).reshape(8, 8) / 7
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    quantized = quantize_graph(model.SerializeToString(), np.zeros(0, np.uint8))
    import onnxruntime as ort

    session = ort.InferenceSession(quantized, providers=["CPUExecutionProvider"])
    assert any(node.op_type == "MatMulInteger" or node.op_type.startswith("DynamicQuantize")
               for node in _nodes(quantized))
    x = np.eye(8, dtype=np.float32)
    np.testing.assert_allclose(session.run(["y"], {"x": x})[0], weight, atol=0.05)


def _nodes(model: bytes) -> list[helper.NodeProto]:
    from onnx import ModelProto

    proto = ModelProto()
    proto.ParseFromString(model)
    return list(proto.graph.node)


def test_local_int8_is_an_embedder_spec(int8: MiniLMEmbedder) -> None:
    emb = embedder_from_spec("local-int8")
    assert emb is not None and emb.identity == MINILM_INT8_IDENTITY
    emb.close()


def test_the_faces_embed_with_int8_when_garden_embeds_with_the_local_model() -> None:
    garden = MiniLMEmbedder()
    face = face_embedder_from_spec("auto", "local", garden)
    assert face is not None and face.identity == MINILM_INT8_IDENTITY
    face.close()
    asked = face_embedder_from_spec("local", "local", garden)  # float32 when asked
    assert asked is not None and asked is not garden and asked.identity == MINILM_IDENTITY
    asked.close()
    garden.close()


def test_every_other_embedder_choice_is_kept_for_the_faces() -> None:
    hashing = HashingEmbedder(16)
    assert face_embedder_from_spec("auto", "hashing:16", hashing) is hashing
    assert face_embedder_from_spec("auto", "none", None) is None
    with pytest.raises(ValueError, match="unknown embedder"):
        face_embedder_from_spec("bogus", "local", hashing)


def test_the_int8_graph_is_cached_under_the_float32_digest_and_the_onnxruntime_version(
        int8: MiniLMEmbedder, cache_dir: Path) -> None:
    import onnxruntime

    path = int8_cache_path(cache_dir)
    assert path.parent == cache_dir
    assert MINILM_DIGEST.removeprefix("sha256:")[:16] in path.name and onnxruntime.__version__ in path.name
    assert digest(path.read_bytes()) == MINILM_INT8_DIGEST
    assert [p.name for p in cache_dir.iterdir()] == [path.name]  # no temporary file left behind


def test_a_second_start_reads_the_cached_graph_instead_of_writing_it_again(
        int8: MiniLMEmbedder, cache_dir: Path) -> None:
    path = int8_cache_path(cache_dir)
    before = path.stat()
    again = MiniLMEmbedder(int8=True, cache_dir=cache_dir)
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    texts = ["a cached graph embeds as the quantized one", "short"]
    assert again.identity == MINILM_INT8_IDENTITY
    assert np.array_equal(again.embed_queries(texts), int8.embed_queries(texts))
    again.close()


def test_a_cached_graph_of_another_digest_is_rebuilt(int8: MiniLMEmbedder, tmp_path: Path) -> None:
    path = int8_cache_path(tmp_path)
    path.write_bytes(b"not the int8 graph")
    emb = MiniLMEmbedder(int8=True, cache_dir=tmp_path)
    assert digest(path.read_bytes()) == MINILM_INT8_DIGEST
    texts = ["a rebuilt graph embeds as the quantized one"]
    assert np.array_equal(emb.embed_queries(texts), int8.embed_queries(texts))
    emb.close()


def test_a_cache_folder_that_cannot_be_written_still_gives_the_int8_model(
        int8: MiniLMEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("a file where the cache folder would be")
    emb = MiniLMEmbedder(int8=True, cache_dir=blocked)
    assert emb.identity == MINILM_INT8_IDENTITY
    texts = ["no cache, the same vectors"]
    assert np.array_equal(emb.embed_queries(texts), int8.embed_queries(texts))
    assert "cannot cache the graph" in caplog.text
    emb.close()


def test_the_cache_folder_is_engram_cache_dir_else_the_users_cache(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ENGRAM_CACHE_DIR", str(tmp_path / "chosen"))
    assert default_cache_dir() == tmp_path / "chosen"
    monkeypatch.delenv("ENGRAM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "engram-index"
