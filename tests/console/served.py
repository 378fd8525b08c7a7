"""A served data directory for the access layer's tests: a garden.engram space and Kindgi facts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from engram_index.collections import Collections
from engram_index.embed.hashing import HashingEmbedder
from engram_index.engram.auth import Authenticator, InsecureOpen
from engram_index.engram.importer import import_jsonl
from engram_index.keys import KeyStore
from engram_index.testkit.serve import serving
from tests.limits import roomy_app, roomy_embedding

DIMS = 64
AUTHOR = "did:plc:cons2cons2cons2cons2cons2"
SPACE = f"at://{AUTHOR}/space/garden.engram.space/notes"
# Multi-byte text before the matches: highlights are UTF-8 byte offsets, not character offsets.
MEMORIES = [
    ("café crème before the green tea ceremony", ["drink", "morning"]),
    ("black coffee at night keeps me awake", ["drink"]),
    ("the river run in the morning", ["sport", "morning"]),
    ("日本の tea garden in Kyoto", ["travel"]),
]
FACTS = ["green tea in the morning", "herbal tea before sleep", "coffee beans from brazil"]
SCOPE = {"tenantId": "acme", "projectId": "web"}


@dataclass
class Served:
    """A running service: its URL, data directory, a Kindgi key of tenant acme and a v5 key."""

    url: str
    data: Path
    kindgi_key: str
    app: Any
    v5_key: str = ""


def fill(data: Path) -> None:
    """Write the garden.engram space (embedded with the hashing embedder)."""
    embedder = HashingEmbedder(DIMS)
    spaces = Collections(data)
    try:
        spaces.ensure_collection(SPACE, embedder.identity)
        lines = data / "notes.jsonl"
        with open(lines, "w", encoding="utf-8") as fh:
            for i, (text, tags) in enumerate(MEMORIES):
                fh.write(json.dumps({"rkey": f"m{i}", "text": text, "tags": tags,
                                     "createdAt": f"2026-01-0{i + 1}T00:00:00.000Z"}, ensure_ascii=False) + "\n")
        import_jsonl(spaces, SPACE, lines, embedder=embedder)
    finally:
        spaces.close()


def kindgi_key(data: Path) -> str:
    """A Kindgi key of a user of tenant acme in project web."""
    token, _ = KeyStore(data).create("kindgi", {"tenant": "acme", "user": "alice", "orgs": [], "projects": ["web"],
                                                "admin": False})
    return token


@contextmanager
def served(data: Path, authenticator: Authenticator | None = None) -> Iterator[Served]:
    """Serve a filled data directory on loopback (limits lifted: admission is not under test here)."""
    fill(data)
    key = kindgi_key(data)
    app = roomy_app(data, "did:web:localhost", authenticator=authenticator or InsecureOpen(),
                    embedding=roomy_embedding(HashingEmbedder(DIMS)))
    with serving(app) as url:
        for text in FACTS:
            answer = httpx.post(f"{url}/v1/memory/facts", json={"type": "note", "scope": SCOPE, "content": text},
                                headers={"authorization": f"Bearer {key}"})
            assert answer.status_code in (200, 201), answer.text
        v5_key, _ = KeyStore(data).create("supermemory", {})
        yield Served(url, data, key, app, v5_key)
