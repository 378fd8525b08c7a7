"""What `serve` was told, typed and frozen: built once from the command line, and handed to the app and,
as JSON, to every `--workers` process the same way (no hand-kept second copy of the options)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from engram_index.eviction import MAX_LOADED
from engram_index.search_pool import SEARCH_THREADS


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """The settings of one service, as `engram-index serve` took them (its options' defaults here too)."""

    data: str
    service_did: str
    insecure_open: bool = False
    plc_url: str = "https://plc.directory"
    did_web_http_localhost: bool = False
    rate: float = 50.0  # searches a second per garden.engram space
    burst: float = 100.0
    concurrent: int = 8
    key_rate: float = 50.0  # requests a second per v5 / Kindgi key
    key_burst: float = 100.0
    key_concurrent: int = 8
    embedder: str = "auto"  # the query embedder (garden.engram)
    face_embedder: str = "auto"  # the v5 and Kindgi faces' embedder
    embed_authorities: tuple[str, ...] = ()  # () : every authority
    search_threads: int = SEARCH_THREADS
    workers: int = 1  # processes serving (`--workers`), each with these settings
    max_collections: int = MAX_LOADED  # collections a process keeps loaded; the idle LRU one beyond is closed
    llm: str | None = None
    rerank: str | None = None
    store: str | None = None  # postgresql://... (None: the data directory's own SQLite store)
    allow_private_urls: bool = False

    def to_json(self) -> str:
        """The settings as one JSON object (for a worker process's environment)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeSettings:
        """Settings from `to_json`'s form; ValueError naming what does not fit."""
        raw: Any = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("serve settings must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"unknown serve settings: {', '.join(unknown)}")
        if "embed_authorities" in raw:
            raw["embed_authorities"] = tuple(raw["embed_authorities"])
        try:
            return cls(**raw)
        except TypeError as exc:
            raise ValueError(f"serve settings: {exc}") from None
