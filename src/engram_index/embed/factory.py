"""Embedders from an operator's one-line spec (the `--embedder` option)."""

from __future__ import annotations

import logging
import os

from engram_index.errors import EngramError
from engram_index.embed.base import Embedder

log = logging.getLogger(__name__)

SPECS = "auto, local, none, hashing:DIMS, ollama:MODEL:DIMS[@URL], openai:MODEL:DIMS:DIGEST@URL"


def embedder_from_spec(spec: str) -> Embedder | None:
    """auto (local if installed, else none), local, none, hashing, ollama or openai; ValueError if unknown.

    The OpenAI-compatible API key comes from $ENGRAM_OPENAI_KEY.
    """
    if spec == "none":
        return None
    if spec in ("auto", "local"):
        from engram_index.embed.local import MiniLMEmbedder

        try:
            return MiniLMEmbedder()
        except EngramError as exc:
            if spec == "local":
                raise
            log.warning("no local embedder (%s): q alone searches by keyword", exc.message)
            return None
    kind, _, rest = spec.partition(":")
    target, _, url = rest.partition("@")
    fields = target.split(":")
    if kind == "hashing" and len(fields) == 1:
        from engram_index.embed.hashing import HashingEmbedder

        return HashingEmbedder(int(fields[0]))
    if kind == "ollama" and len(fields) == 2:
        from engram_index.embed.ollama import OllamaEmbedder

        if url:
            return OllamaEmbedder(fields[0], int(fields[1]), url)
        return OllamaEmbedder(fields[0], int(fields[1]))
    if kind == "openai" and len(fields) >= 3 and url:
        from engram_index.embed.openai import OpenAIEmbedder

        return OpenAIEmbedder(
            fields[0], int(fields[1]), ":".join(fields[2:]), url, api_key=os.environ.get("ENGRAM_OPENAI_KEY")
        )
    raise ValueError(f"unknown embedder {spec!r}: use one of {SPECS}")
