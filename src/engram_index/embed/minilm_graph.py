"""all-MiniLM-L6-v2 as an ONNX graph, built in memory from its safetensors weights.

Nothing is exported or downloaded: the graph is written node by node with the `onnx` helper
API around the verified weights, its tensors laid out in one in-memory file that onnxruntime
reads when the session is created. It uses the fused CPU operators of onnxruntime's
`com.microsoft` domain, which BERT exports are optimised into:

    EmbedLayerNormalization   word + position (+ token type 0) embeddings, LayerNorm, and the
                              per-text token counts the attention uses as its mask
    Attention                 fused Q/K/V projection, 12-head softmax attention, padding masked
    BiasGelu                  intermediate bias + exact (erf) GELU

and the standard MatMul, Add and LayerNormalization, then mean pooling over the real tokens.
`open_session` runs it without onnxruntime's SkipLayerNormFusion, which would fuse bias +
residual + LayerNorm into SkipLayerNormalization: slower here (bench/embed_choices.py).

Texts must be padded on the right (token counts are the mask). Inputs: `input_ids` and
`attention_mask`, int32 (batch, length); output: `pooled`, float32 (batch, 384), not yet
normalised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from onnx import ModelProto, TensorProto, helper

LAYERS, HIDDEN, HEADS = 6, 384, 12
LN_EPS = 1e-12
MS = "com.microsoft"
OPSET, MS_OPSET, IR_VERSION = 17, 1, 8
WEIGHTS_NAME = "weights.bin"  # the in-memory file's name, as the model's tensors refer to it
WEIGHTS_ALIGN = 64
INLINE_BYTES = 128
DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)


class _Graph:
    """A model under construction whose tensors are laid out in one in-memory weights file.

    The tensors are external data (offsets into `weights`) rather than protobuf fields: that
    spares three copies of the 90 MB through protobuf (into fields, into the model, serialized).
    """

    def __init__(self, name: str) -> None:
        self.model = ModelProto()
        self.model.ir_version = IR_VERSION
        self.model.opset_import.extend([helper.make_opsetid("", OPSET), helper.make_opsetid(MS, MS_OPSET)])
        self.graph = self.model.graph
        self.graph.name = name
        self.chunks: list[np.ndarray] = []
        self.size = 0

    def const(self, name: str, value: np.ndarray) -> str:
        """Add an initializer and return its name."""
        data = np.ascontiguousarray(value, value.dtype.newbyteorder("<")).reshape(-1).view(np.uint8)
        tensor = self.graph.initializer.add()
        tensor.name = name
        tensor.data_type = helper.np_dtype_to_tensor_dtype(value.dtype)
        tensor.dims.extend(value.shape)
        if data.size < INLINE_BYTES:  # onnxruntime reads small constants (axes) during shape inference
            tensor.raw_data = data.tobytes()
            return name
        offset = -self.size % WEIGHTS_ALIGN + self.size
        if offset > self.size:
            self.chunks.append(np.zeros(offset - self.size, np.uint8))
        self.chunks.append(data)
        self.size = offset + data.size
        tensor.data_location = TensorProto.EXTERNAL
        for key, field in (("location", WEIGHTS_NAME), ("offset", str(offset)), ("length", str(data.size))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, field
        return name

    def op(self, op_type: str, *inputs: str, outputs: int = 1, domain: str = "", **attrs: Any) -> list[str]:
        """Add a node and return its output names."""
        name = f"{op_type}_{len(self.graph.node)}"
        outs = [f"{name}:{i}" for i in range(outputs)]
        self.graph.node.append(helper.make_node(op_type, list(inputs), outs, name=name, domain=domain, **attrs))
        return outs


class MiniLMGraph(NamedTuple):
    """A serialized ONNX model and the bytes of the in-memory file its tensors point into."""

    model: bytes
    weights: np.ndarray  # uint8, to be given to onnxruntime as the file WEIGHTS_NAME


def build_minilm_graph(weights: Mapping[str, np.ndarray]) -> MiniLMGraph:
    """The ONNX model of the encoder and mean pooling, from BERT-named weights."""
    def w(name: str) -> np.ndarray:
        return np.asarray(weights[name], np.float32)

    g = _Graph("all-MiniLM-L6-v2")
    # Every token has token type 0, so its embedding is folded into the position embeddings.
    position = w("embeddings.position_embeddings.weight") + w("embeddings.token_type_embeddings.weight")[0]
    x, token_counts = g.op(
        "EmbedLayerNormalization", "input_ids", "", g.const("word", w("embeddings.word_embeddings.weight")),
        g.const("position", position), "", g.const("embed_ln_w", w("embeddings.LayerNorm.weight")),
        g.const("embed_ln_b", w("embeddings.LayerNorm.bias")), "attention_mask",
        outputs=2, domain=MS, epsilon=LN_EPS,
    )
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."

        def c(name: str, value: np.ndarray, p: str = p) -> str:
            return g.const(p + name, value)

        def add_norm(y: str, bias: str, residual: str, norm: str, p: str = p) -> str:
            """LayerNorm(y + bias + residual) with the named LayerNorm's weights."""
            (t,) = g.op("Add", y, c(bias + ".b", w(p + bias + ".bias")))
            (t,) = g.op("Add", t, residual)
            (out,) = g.op("LayerNormalization", t, c(norm + ".w", w(p + norm + ".weight")),
                          c(norm + ".b", w(p + norm + ".bias")), axis=-1, epsilon=LN_EPS)
            return out

        qkv = ("query", "key", "value")
        qkv_w = np.concatenate([w(f"{p}attention.self.{m}.weight").T for m in qkv], axis=1)
        qkv_b = np.concatenate([w(f"{p}attention.self.{m}.bias") for m in qkv])
        (ctx,) = g.op("Attention", x, c("qkv.w", qkv_w), c("qkv.b", qkv_b), token_counts, domain=MS, num_heads=HEADS)
        (attn,) = g.op("MatMul", ctx, c("out.w", w(p + "attention.output.dense.weight").T))
        x = add_norm(attn, "attention.output.dense", x, "attention.output.LayerNorm")
        (up,) = g.op("MatMul", x, c("up.w", w(p + "intermediate.dense.weight").T))
        (act,) = g.op("BiasGelu", up, c("up.b", w(p + "intermediate.dense.bias")), domain=MS)
        (down,) = g.op("MatMul", act, c("down.w", w(p + "output.dense.weight").T))
        x = add_norm(down, "output.dense", x, "output.LayerNorm")
    # Mean pooling over the real tokens: sum(x * mask) / sum(mask).
    (mask,) = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    (mask3,) = g.op("Unsqueeze", mask, g.const("axis_2", np.array([2], np.int64)))
    (masked,) = g.op("Mul", x, mask3)
    axis_1 = g.const("axis_1", np.array([1], np.int64))
    (summed,) = g.op("ReduceSum", masked, axis_1, keepdims=0)
    (count,) = g.op("ReduceSum", mask, axis_1, keepdims=1)
    g.graph.node.append(helper.make_node("Div", [summed, count], ["pooled"], name="pool"))
    g.graph.input.extend(
        helper.make_tensor_value_info(name, TensorProto.INT32, ["batch", "length"]) for name in ("input_ids", "attention_mask")
    )
    g.graph.output.append(helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", HIDDEN]))
    return MiniLMGraph(g.model.SerializeToString(), np.concatenate(g.chunks))


def open_session(graph: MiniLMGraph, threads: int, disabled_optimizers: Sequence[str] = DISABLED_OPTIMIZERS) -> Any:
    """An onnxruntime CPU session for the graph, `threads` threads per pass."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle worker threads would spin on cores that other work needs.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only: warnings would land in the service's log
    if graph.weights.size:  # a self-contained model (the int8 one) has no weights file
        options.add_external_initializers_from_files_in_memory([WEIGHTS_NAME], [graph.weights], [graph.weights.size])
    return ort.InferenceSession(
        graph.model, options, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled_optimizers)
    )
