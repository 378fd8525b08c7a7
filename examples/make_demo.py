"""Write examples/demo-space.jsonl: 200 SciFact abstracts as garden.engram.memory records.

The vectors are the reference all-MiniLM-L6-v2 embeddings shipped with the SciFact data, so the
demo space is searchable by vector as well as by keyword. Run from the repository root:

    python examples/make_demo.py ../shared/data/scifact
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import numpy as np

MODEL = {
    "model": "all-MiniLM-L6-v2",
    "modelDigest": "sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "dims": 384,
    "encoding": "f16le",
}
TOPICS = ("biology", "medicine", "genetics", "neuroscience", "immunology")


def main(scifact: Path, out: Path, n: int = 200) -> None:
    """Write the first `n` documents of the corpus as memory records."""
    vectors = np.load(scifact / "corpus.minilm.f16.npy")
    with open(scifact / "corpus.jsonl", encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i == n:
                break
            doc = json.loads(line)
            raw = vectors[i].astype("<f2").tobytes()
            record = {
                "rkey": f"scifact{doc['_id']}",
                "text": (doc["title"] + " " + doc["text"]).strip()[:30000],
                "tags": ["scifact", TOPICS[i % len(TOPICS)]],
                "source": f"scifact:{doc['_id']}",
                "createdAt": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T12:00:00.000Z",
                "embedding": {**MODEL, "vector": {"$bytes": base64.b64encode(raw).rstrip(b"=").decode()}},
            }
            dst.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(__file__).with_name("demo-space.jsonl"))
