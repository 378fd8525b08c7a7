"""garden.engram.memory lines for imports: each with a unique word and a distinct vector."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np

MODEL = ("m", "sha256:00", 8)
AUTHOR = "did:plc:rel2rel2rel2rel2rel2rel2"


def word(i: int) -> str:
    """The word only record `i` holds."""
    return f"uniq{i:06d}x"


def vector(i: int) -> np.ndarray:
    """Record `i`'s vector: distinct directions, so that its own vector finds it first."""
    rng = np.random.default_rng(i)
    v = rng.standard_normal(MODEL[2]).astype(np.float32)
    return v / np.linalg.norm(v)


def line(i: int) -> dict[str, object]:
    """Record `i` as an import line (rkey r{i})."""
    raw = vector(i).astype("<f2").tobytes()
    return {
        "rkey": f"r{i}", "text": f"note {word(i)} about things", "tags": ["t"],
        "createdAt": f"2026-01-01T00:00:{i % 60:02d}.{i % 1000:03d}Z",
        "embedding": {"model": MODEL[0], "modelDigest": MODEL[1], "dims": MODEL[2], "encoding": "f16le",
                      "vector": {"$bytes": base64.b64encode(raw).rstrip(b"=").decode()}},
    }


def write_file(path: Path, count: int, bad_every: int = 0) -> Path:
    """A JSONL file of `count` lines, every `bad_every`-th one malformed (0: none)."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(count):
            fh.write("{not json\n" if bad_every and i % bad_every == bad_every - 1 else json.dumps(line(i)) + "\n")
    return path
