"""searchMemories' answers, byte for byte: a check that a speed change left every answer as it was.

Builds (or reuses, --data) a synthetic space whose memories come in conversations (runs of
consecutive memories sharing a `source`, some without one), serves the app in this process (ASGI,
no sockets, no credential check) and sends each query in every mode, with and without a tag
filter, at several limits: questions (whose question words the keyword side drops) and claims.
Writes every answer's JSON body, one a line, to --out and prints their SHA-256: run it before and
after a change on the same --data and compare (`cmp`).

    python bench/garden_answers.py --data DIR --out answers.jsonl [--n 20000] [--queries 60]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

from synth import SynthSpace, make_queries, make_space  # noqa: E402

from engram_index.app import create_app  # noqa: E402
from engram_index.collections import Collections  # noqa: E402
from engram_index.engine.types import Document, ModelIdentity  # noqa: E402
from engram_index.engram.api.limits import SpaceLimits  # noqa: E402
from engram_index.engram.auth import InsecureOpen  # noqa: E402
from engram_index.engram.records import encode_query_vector  # noqa: E402
from engram_index.errors import UnknownSpace  # noqa: E402
from engram_index.store.sqlite import StoredDocument  # noqa: E402

AUTHORITY = "did:plc:answers2answers2answers2"
SPACE = f"at://{AUTHORITY}/space/garden.engram.space/talks"
MODEL = ModelIdentity("bench-model", "sha256:bench", 384)
PATH = "/xrpc/garden.engram.searchMemories"
TURNS = 12  # memories per conversation
QUESTIONS = ("What did they say about {}?", "When was {} discussed?", "Did anyone mention {}")


def source_of(i: int) -> str | None:
    """Memory i's conversation: runs of TURNS share one; every fourth run has none (mixed spaces)."""
    run = i // TURNS
    return None if run % 4 == 3 else f"at://{AUTHORITY}/conversation/c{run:06d}"


def batches(synth: SynthSpace, size: int = 2000) -> Iterator[list[StoredDocument]]:
    """The memories as records, in import-sized batches."""
    n = len(synth.texts)
    for start in range(0, n, size):
        yield [StoredDocument(Document(id=f"{SPACE}/{synth.authors[i]}/garden.engram.memory/m{i:07d}",
                                       author=synth.authors[i], text=synth.texts[i], tags=synth.tags[i],
                                       source=source_of(i), created_ms=int(synth.created_ms[i]),
                                       vector=synth.vectors[i].tobytes()))
               for i in range(start, min(n, start + size))]


def build(data: Path, n: int, scifact: Path) -> SynthSpace:
    """Write the space into `data` unless it holds it already; return its synthetic memories."""
    synth = make_space(n, scifact_dir=scifact, seed=3)
    spaces = Collections(data)
    try:
        try:
            if spaces.store.count(spaces.info(SPACE).id) == n:
                return synth
        except UnknownSpace:
            pass
        spaces.ensure_collection(SPACE, MODEL)
        for batch in batches(synth):
            spaces.write(SPACE, batch)
        spaces.index(SPACE)
        spaces.maintain()
    finally:
        spaces.close()
    return synth


def query_strings(synth: SynthSpace, m: int) -> list[bytes]:
    """Every query × mode × filter × limit as a searchMemories query string."""
    texts, vectors = make_queries(synth, m, seed=4)
    tag = next(t for tags in synth.tags for t in tags)
    out: list[bytes] = []
    for k, (text, vec) in enumerate(zip(texts, vectors)):
        words = text.split()
        q = QUESTIONS[k % len(QUESTIONS)].format(" ".join(words[:3])) if k % 2 else text
        vector = encode_query_vector(vec.astype(np.float32))
        common = {"space": SPACE, "model": MODEL.model, "modelDigest": MODEL.digest}
        for limit in (5, 10, 30):
            variants: list[dict[str, Any]] = [
                {"q": q, "vector": vector}, {"q": q, "vector": vector, "mode": "keyword"},
                {"q": q, "mode": "keyword"}, {"vector": vector}, {"q": q, "vector": vector, "tags": tag}]
            for params in variants:
                out.append(urlencode({**common, **params, "limit": limit}).encode())
    return out


async def answers(app: Any, strings: list[bytes]) -> list[bytes]:
    """Each query string's status and JSON body."""
    out: list[bytes] = []
    async with app.router.lifespan_context(app):
        for qs in strings:
            while True:
                status, body = await call(app, qs)
                if status != 503:  # the index loads in the background
                    break
                await asyncio.sleep(0.2)
            out.append(str(status).encode() + b" " + body)
    return out


async def call(app: Any, query_string: bytes) -> tuple[int, bytes]:
    """Send one GET to the ASGI app; return its status and body."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": PATH, "raw_path": PATH.encode(), "query_string": query_string, "root_path": "",
             "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    status, body = [0], bytearray()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    await app(scope, receive, send)
    return status[0], bytes(body)


def main() -> None:
    """Build, ask, write, print the digest."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--scifact", type=Path, default=_HERE.parents[1] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    synth = build(args.data, args.n, args.scifact)
    app = create_app(args.data, "did:web:answers.invalid", authenticator=InsecureOpen(),
                     limits=SpaceLimits(1e9, 1e9, 64), read_only=True)
    got = asyncio.run(answers(app, query_strings(synth, args.queries)))
    args.out.write_bytes(b"\n".join(got) + b"\n")
    statuses = sorted({line.split(b" ", 1)[0].decode() for line in got})
    print(f"{len(got)} answers (statuses {', '.join(statuses)}), sha256 {hashlib.sha256(b''.join(got)).hexdigest()}")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
