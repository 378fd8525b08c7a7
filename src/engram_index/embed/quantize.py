"""Int8 dynamic quantization of a local ONNX graph, built at load time from verified weights.

onnxruntime's `quantize_dynamic` rewrites MatMul and Attention nodes to their integer forms
(weights int8 per output channel, activations quantized per call), for any graph whose tensors
are ours: the graph is handed over with its weights inlined, quantized in a private temporary
folder and read back as one self-contained model. Nothing is downloaded and nothing outlives
the call.

The result is a pure function of the graph and of the onnxruntime version (pinned): the same
bytes on every run. Callers pin the sha256 of those bytes in their model identity and refuse
anything else, so that two processes never embed with two different int8 graphs under one name.

Quantizing costs seconds of CPU at every start, so callers keep the bytes in a cache file
(`read_cached`, `write_cached`): a cached file is used only when its digest is the pinned one, and
is rebuilt when missing or wrong; it is written whole (a temporary file renamed over it).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from onnx import ModelProto, TensorProto

QUANTIZED_OPS = ("MatMul", "Attention")

log = logging.getLogger(__name__)


def inline_weights(model: bytes, weights: np.ndarray) -> ModelProto:
    """The model with every tensor held in an in-memory weights file copied into the tensor itself."""
    proto = ModelProto()
    proto.ParseFromString(model)
    flat = np.asarray(weights, np.uint8).reshape(-1)
    for tensor in proto.graph.initializer:
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        fields = {entry.key: entry.value for entry in tensor.external_data}
        offset, length = int(fields.get("offset", "0")), int(fields["length"])
        tensor.raw_data = flat[offset:offset + length].tobytes()
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT
    return proto


def quantize_graph(model: bytes, weights: np.ndarray, op_types: Sequence[str] = QUANTIZED_OPS,
                   per_channel: bool = True) -> bytes:
    """The serialized int8 model of a graph (`model` with its tensors in `weights`): MatMul and
    Attention weights quantized per channel, everything else as it was."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    proto = inline_weights(model, weights)
    # The quantizer logs each node it cannot handle and a pre-processing hint at INFO/WARNING.
    quiet = logging.getLogger()
    level = quiet.level
    with tempfile.TemporaryDirectory(prefix="engram-int8-") as folder:
        out = Path(folder) / "int8.onnx"
        try:
            quiet.setLevel(max(level, logging.ERROR))
            quantize_dynamic(proto, out, op_types_to_quantize=list(op_types), per_channel=per_channel,
                             weight_type=QuantType.QInt8,
                             # Shape inference cannot type the outputs of com.microsoft operators.
                             extra_options={"DefaultTensorType": TensorProto.FLOAT})
        finally:
            quiet.setLevel(level)
        return out.read_bytes()


def digest(data: bytes) -> str:
    """The "sha256:<hex>" digest model identities name."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_cached(path: Path, expected: str) -> bytes | None:
    """The cached graph's bytes when the file exists and its digest is `expected`, else None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if digest(data) != expected:
        log.warning("the cached graph %s has another digest than %s: rebuilding it", path, expected)
        return None
    return data


def write_cached(path: Path, data: bytes) -> None:
    """Keep `data` at `path`, written whole (a reader sees the old file or the new one); a cache
    that cannot be written is logged and skipped, as quantizing again next start is only slower."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name + ".", suffix=".tmp",
                                         delete=False) as fh:
            tmp = fh.name
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        log.warning("cannot cache the graph at %s (%s): it is rebuilt at every start", path, exc)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
