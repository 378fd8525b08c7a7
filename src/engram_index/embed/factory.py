"""Embedders from an operator's one-line spec (the `--embedder` option)."""

from __future__ import annotations

import logging
import os

from engram_index.errors import EngramError
from engram_index.embed.base import Embedder

log = logging.getLogger(__name__)

SPECS = "auto, local, local-int8, none, hashing:DIMS, ollama:MODEL:DIMS[@URL], openai:MODEL:DIMS:DIGEST@URL"
# The v5 and Kindgi faces compare their vectors only with their own, so with the local model they
# embed with its int8 graph (2.4-3x cheaper per text, SciFact unchanged: docs/design/embed.md);
# garden.engram keeps float32, whose vectors must agree with the reference model's.
FACE_DEFAULT = "auto"


def embedder_from_spec(spec: str) -> Embedder | None:
    """auto (local if installed, else none), local, none, hashing, ollama or openai; ValueError if unknown.

    The OpenAI-compatible API key comes from $ENGRAM_OPENAI_KEY.
    """
    if spec == "none":
        return None
    if spec in ("auto", "local", "local-int8"):
        from engram_index.embed.local import MiniLMEmbedder

        try:
            return MiniLMEmbedder(int8=spec == "local-int8")
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


def face_embedder_from_spec(spec: str, garden_spec: str, garden: Embedder | None) -> Embedder | None:
    """The v5 and Kindgi faces' embedder (`--face-embedder`): "auto" is the local model's int8 graph
    when garden.engram embeds with the local model, else garden's own embedder (every other
    `--embedder` choice is kept); any other spec as for `embedder_from_spec`."""
    if spec != FACE_DEFAULT:
        return embedder_from_spec(spec)
    from engram_index.embed.local import MINILM_IDENTITY

    if garden_spec in ("auto", "local") and garden is not None and garden.identity == MINILM_IDENTITY:
        return embedder_from_spec("local-int8")
    return garden
