"""The interface every LLM client offers, and the values the faces exchange with LLM features.

The faces depend on these types only; `llm/openai_compat.py` implements `LLM` over HTTP, and
`testkit/fake_llm.py` serves a fake OpenAI-compatible endpoint (real HTTP) for tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from engram_index.errors import Unavailable

Relation = Literal["new", "updates", "extends", "derives"]


class LLMUnavailable(Unavailable):
    """The configured LLM endpoint failed, timed out or answered something unusable."""

    code = "llm_unavailable"


class LLM(Protocol):
    """A chat model that answers with JSON."""

    model: str

    def chat_json(self, system: str, user: str, *, timeout_s: float = 30.0) -> Any:
        """One chat completion whose answer is parsed as a JSON value (LLMUnavailable when it cannot be)."""
        ...


@dataclass(frozen=True, slots=True)
class KnownMemory:
    """A latest memory of the namespace, shown to the LLM so that it can relate new facts to it."""

    id: str
    memory: str


@dataclass(frozen=True, slots=True)
class ProposedMemory:
    """One atomic fact the LLM drew from a document, and how it relates to a known memory.

    `relation` is "new" (no relation), "updates" (supersedes `target`), "extends" (adds to
    `target`) or "derives" (inferred from `target` and others: `is_inference` is then true).
    """

    memory: str
    relation: Relation = "new"
    target: str | None = None
    is_static: bool = False
    is_inference: bool = False


class Reranker(Protocol):
    """Scores texts by relevance to a query (a cross-encoder, a /rerank endpoint, or an LLM)."""

    name: str

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score in [0, 1] per text, higher is more relevant."""
        ...
