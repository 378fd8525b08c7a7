"""The measurements behind the local embedder's design choices (docs/design/embed.md).

  1. The floor of one pass: reading the encoder's float32 weights once from memory, against a
     whole pass over a 3-token text and over a 21-token one.
  2. numpy, the first implementation: the 24 matrix products of a 21-token pass alone.
  3. The graph: onnxruntime's fused SkipLayerNormalization against Add + LayerNormalization.
  4. 8-bit weights (MatMulNBits, blocks of 32) for the attention output and feed-forward
     products, computed in float32 (accuracy level 1) or in int8 (level 4): agreement and speed.
  5. Threads per pass: 1 against 2.
  6. Passes of at most 256 padded tokens against batches of 32 texts, for short queries (the
     claims' first four words), the claims, 300-character documents and 256-token passages.

Times are given as CPU time of this process (what a pass costs, whoever else runs on the
shared cores) and as wall time (what a caller waits). Variants take turns in each of --repeat rounds;
the median round is reported. One query at a time: the first 60 SciFact queries (p50 of the
calls); batched: all 300 in batches of 32. Agreement: the minimum cosine with the reference
vectors over the 300 queries. numpy and OpenBLAS run on one thread (OPENBLAS_NUM_THREADS=1).

    python bench/embed_choices.py
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before numpy loads OpenBLAS

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from engram_index.embed.local import (  # noqa: E402
    MAX_TOKENS,
    PASS_TOKENS,
    WEIGHTS_FILE,
    MiniLMEmbedder,
    packaged_model_dir,
)
from engram_index.embed.minilm_graph import (  # noqa: E402
    LAYERS,
    LN_EPS,
    MS,
    MiniLMGraph,
    build_minilm_graph,
    open_session,
)

DEFAULT_SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
BLOCK = 32


def weights_of(graph: MiniLMGraph, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The float32 initializers of a model whose tensors are in the graph's in-memory file."""
    out = {}
    for t in model.graph.initializer:
        if t.data_type != onnx.TensorProto.FLOAT or not t.external_data:
            continue
        where = {e.key: int(e.value) for e in t.external_data if e.key in ("offset", "length")}
        raw = graph.weights[where["offset"]:where["offset"] + where["length"]]
        out[t.name] = raw.view(np.float32).reshape(tuple(t.dims))
    return out


def with_skip_layer_norm(graph: MiniLMGraph) -> MiniLMGraph:
    """The graph with each Add(bias) → Add(residual) → LayerNormalization as one SkipLayerNormalization."""
    model = onnx.load_from_string(graph.model)
    nodes = list(model.graph.node)
    by_output = {n.output[0]: n for n in nodes}
    drop, new = set(), {}
    for n in nodes:
        if n.op_type != "LayerNormalization":
            continue
        residual_add = by_output[n.input[0]]
        bias_add = by_output[residual_add.input[0]]
        fused = helper.make_node(
            "SkipLayerNormalization", [bias_add.input[0], residual_add.input[1], n.input[1], n.input[2], bias_add.input[1]],
            [n.output[0]], name=n.name + "_skip", domain=MS, epsilon=LN_EPS,
        )
        drop.update({id(residual_add), id(n)})
        new[id(bias_add)] = fused
    del model.graph.node[:]
    model.graph.node.extend(new.get(id(n), n) for n in nodes if id(n) not in drop)
    return MiniLMGraph(model.SerializeToString(), graph.weights)


def with_8bit_products(graph: MiniLMGraph, accuracy_level: int) -> MiniLMGraph:
    """The graph with every MatMul on a weight matrix run as MatMulNBits on 8-bit weights."""
    model = onnx.load_from_string(graph.model)
    weights = weights_of(graph, model)
    for i, n in enumerate(model.graph.node):
        if n.op_type != "MatMul" or n.input[1] not in weights:
            continue
        w = weights[n.input[1]]
        k, cols = w.shape
        blocks = w.T.reshape(cols, k // BLOCK, BLOCK)
        scale = np.abs(blocks).max(axis=-1) / 127.0
        q = (np.clip(np.round(blocks / scale[..., None]), -127, 127) + 128).astype(np.uint8)  # zero point 128
        name = n.input[1]
        model.graph.initializer.extend([
            onnx.numpy_helper.from_array(q, name + ".q8"),
            onnx.numpy_helper.from_array(scale.astype(np.float32).reshape(-1), name + ".scale"),
        ])
        model.graph.node[i].CopyFrom(helper.make_node(
            "MatMulNBits", [n.input[0], name + ".q8", name + ".scale"], list(n.output), name=n.name, domain=MS,
            K=k, N=cols, bits=8, block_size=BLOCK, accuracy_level=accuracy_level,
        ))
    return MiniLMGraph(model.SerializeToString(), graph.weights)


def cpu_ms(fn: Callable[[], object]) -> float:
    """CPU milliseconds of one call."""
    start = time.process_time()
    fn()
    return (time.process_time() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT, help="the SciFact folder")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (median)")
    args = parser.parse_args()
    console = Console(width=120)

    with open(args.scifact / "queries.jsonl", encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for line in fh]
    reference = np.load(args.scifact / "queries.minilm.f32.npy").astype(np.float64)
    emb = MiniLMEmbedder()
    graph = build_minilm_graph(load_file(str(packaged_model_dir() / WEIGHTS_FILE)))
    model = onnx.load_from_string(graph.model)
    products = {k: v for k, v in weights_of(graph, model).items() if v.ndim == 2 and "word" not in k and "position" not in k}

    # 1. The floor: stream the encoder's matrices once.
    flat = np.concatenate([m.reshape(-1) for m in products.values()]).reshape(-1, 384)
    ones = np.ones(384, np.float32)
    floor = statistics.median(cpu_ms(lambda: flat @ ones) for _ in range(20))  # reads each weight once
    run = emb._session.run
    short_ids = {"input_ids": np.array([[101, 7592, 102]], np.int32), "attention_mask": np.ones((1, 3), np.int32)}
    ids21 = np.array([[101] + [7592] * 19 + [102]], np.int32)
    ids21_feed = {"input_ids": ids21, "attention_mask": np.ones_like(ids21)}
    for _ in range(5):
        run(None, short_ids)

    # 2. numpy's products for a 21-token text (the first implementation's matmuls).
    x = np.random.default_rng(0).standard_normal((21, 384)).astype(np.float32)
    h = np.random.default_rng(1).standard_normal((21, 1536)).astype(np.float32)
    layer_products = [(x if m.shape[0] == 384 else h, m) for m in products.values()]

    def numpy_products() -> None:
        for a, m in layer_products:
            a @ m

    floor_rows: dict[str, list[float]] = {"pass, 3 tokens": [], "pass, 21 tokens": [], "numpy products, 21 tokens": []}
    for _ in range(args.repeat):
        floor_rows["pass, 3 tokens"].append(statistics.median(cpu_ms(lambda: run(None, short_ids)) for _ in range(20)))
        floor_rows["pass, 21 tokens"].append(statistics.median(cpu_ms(lambda: run(None, ids21_feed)) for _ in range(20)))
        floor_rows["numpy products, 21 tokens"].append(statistics.median(cpu_ms(numpy_products) for _ in range(20)))
    table = Table(title="One pass against its floor (CPU ms, median)")
    table.add_column("what")
    table.add_column("ms", justify="right")
    table.add_row(f"read the encoder's {flat.nbytes / 1e6:.1f} MB of float32 matrices once", f"{floor:.2f}")
    for name, values in floor_rows.items():
        table.add_row(name + (f" ({len(layer_products) // LAYERS} per layer)" if "numpy" in name else ""),
                      f"{statistics.median(values):.2f}")
    console.print(table)

    # 3-5. Graph variants, taking turns.
    variants: dict[str, Any] = {
        "Add + LayerNormalization (built)": emb._session,
        "SkipLayerNormalization (fused)": open_session(with_skip_layer_norm(graph), 1, ()),
        "8-bit weights, float32 compute": open_session(with_8bit_products(graph, 1), 1),
        "8-bit weights, int8 compute": open_session(with_8bit_products(graph, 4), 1),
        "2 threads per pass": open_session(graph, 2),
    }
    agreement = {}
    for name, session in variants.items():
        emb._session = session
        got = emb.embed_queries(queries).astype(np.float64)
        cosines = (got * reference).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(reference, axis=1)
        agreement[name] = float(cosines.min())
    columns = ("one CPU", "one wall", "batched CPU", "batched wall")
    results = {name: {c: [] for c in columns} for name in variants}
    for _ in range(args.repeat):
        for name, session in variants.items():
            emb._session = session
            cpu, wall = [], []
            for q in queries[:60]:
                c, w = time.process_time(), time.perf_counter()
                emb.embed_queries([q])
                cpu.append(time.process_time() - c)
                wall.append(time.perf_counter() - w)
            c, w = time.process_time(), time.perf_counter()
            emb.embed_queries(queries)
            r = results[name]
            r["batched CPU"].append(len(queries) / (time.process_time() - c))
            r["batched wall"].append(len(queries) / (time.perf_counter() - w))
            r["one CPU"].append(statistics.median(cpu) * 1e3)
            r["one wall"].append(statistics.median(wall) * 1e3)
    table = Table(title=f"Graph variants (median of {args.repeat} rounds)")
    for column in ("variant", "min cosine", "one query p50 CPU ms", "wall ms", "batched queries/CPU-s", "per wall s"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for name, r in results.items():
        m = {c: statistics.median(v) for c, v in r.items()}
        table.add_row(name, f"{agreement[name]:.8f}", f"{m['one CPU']:.2f}", f"{m['one wall']:.2f}",
                      f"{m['batched CPU']:.0f}", f"{m['batched wall']:.0f}")
    console.print(table)

    # 6. Tokens per pass.
    emb._session = variants["Add + LayerNormalization (built)"]
    documents, passages = [], []
    with open(args.scifact / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = doc["title"] + " " + doc["text"]
            if len(text) >= 300 and len(documents) < 128:
                documents.append(text[:300])
            if len(passages) < 32 and len(emb._tokenizer.encode(text).ids) == MAX_TOKENS:
                passages.append(text)
    workloads = {"short queries": [" ".join(q.split()[:4]) for q in queries], "SciFact queries": queries,
                 "300-char documents": documents, "256-token passages": passages}
    budgets = {"256 tokens": PASS_TOKENS, "32 texts": 32 * MAX_TOKENS}
    per_pass: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeat):
        for budget, tokens in budgets.items():
            emb.pass_tokens = tokens
            for name, texts in workloads.items():
                start = time.process_time()
                emb.embed_documents(texts)
                per_pass.setdefault((name, budget), []).append(len(texts) / (time.process_time() - start))
    emb.pass_tokens = PASS_TOKENS
    table = Table(title=f"Texts per CPU-second by what a pass holds (at most 32 texts; median of {args.repeat})")
    table.add_column("workload")
    for budget in budgets:
        table.add_column("at most " + budget, justify="right")
    for name in workloads:
        table.add_row(name, *(f"{statistics.median(per_pass[name, b]):.0f}" for b in budgets))
    console.print(table)


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
