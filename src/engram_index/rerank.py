"""Rerankers: a `/rerank` endpoint (Cohere, Jina or Hugging Face TEI) or the LLM, chosen by `--rerank`.

No PyPI package ships cross-encoder weights inside its wheel (flashrank downloads its models
at run time, which this project never does), so there is no local reranker; see
docs/design/supermemory-llm.md. Every score is in [0, 1], one per text, in the texts' order.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

import httpx

from engram_index.errors import Unavailable
from engram_index.llm.base import LLM, LLMUnavailable, Reranker
from engram_index.llm.http import Rejected, RetryPolicy, check_base_url, post_json

API_KEY_ENV = "ENGRAM_RERANK_API_KEY"
MAX_BATCH = 100  # texts per /rerank call (Cohere takes 1000; search returns at most 100)
MAX_TEXT_CHARS = 4_000
LLM_BATCH = 20
LLM_TEXT_CHARS = 1_000

RERANK_PROMPT = """\
You judge search results (task: rerank).
For each numbered passage, score how well it answers or is relevant to the query, from 0
(unrelated) to 1 (answers it exactly). Judge every passage.
Answer only with JSON: {"scores": [{"n": 1, "score": 0.0}]}"""


class RerankerUnavailable(Unavailable):
    """The configured reranker failed, timed out or answered something unusable."""

    code = "reranker_unavailable"


def _unit(value: Any) -> float | None:
    """A finite number clamped to [0, 1], or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return min(1.0, max(0.0, float(value)))


class RemoteReranker:
    """A `/rerank` endpoint: Cohere/Jina's shape when a model is named, TEI's shape otherwise.

    Cohere and Jina take `{model, query, documents, top_n}` and answer
    `{results: [{index, relevance_score}]}`; TEI takes `{query, texts}` and answers
    `[{index, score}]` (sigmoid scores by default). Either answer is accepted from either.
    """

    def __init__(self, url: str, model: str | None = None, api_key: str | None = None, *,
                 policy: RetryPolicy = RetryPolicy(), timeout_s: float = 10.0) -> None:
        full = check_base_url(url, "rerank")
        parsed = httpx.URL(full)
        self.path = parsed.raw_path.decode() or "/"
        self.model = model or None
        self.name = f"rerank endpoint ({model})" if model else "rerank endpoint (TEI)"
        self.policy, self.timeout_s = policy, timeout_s
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=str(parsed.copy_with(raw_path=b"/")).rstrip("/"), headers=headers)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score in [0, 1] per text, higher is more relevant."""
        out: list[float] = []
        for start in range(0, len(texts), MAX_BATCH):
            out += self._batch(query, [t[:MAX_TEXT_CHARS] for t in texts[start:start + MAX_BATCH]])
        return out

    def _batch(self, query: str, texts: list[str]) -> list[float]:
        if self.model:
            body: dict[str, Any] = {"model": self.model, "query": query, "documents": texts, "top_n": len(texts)}
        else:
            body = {"query": query, "texts": texts, "truncate": True}
        try:
            answer = post_json(self._client, self.path, body, service=f"the {self.name}",
                               error=RerankerUnavailable, timeout_s=self.timeout_s, policy=self.policy)
        except Rejected as exc:
            raise RerankerUnavailable(f"the {self.name} refused {self.path} ({exc.status}): {exc.detail}") from None
        rows = answer.get("results", answer.get("data")) if isinstance(answer, dict) else answer
        if not isinstance(rows, list):
            raise RerankerUnavailable(f"the {self.name} answered without a list of results")
        found: dict[int, float] = {}
        for row in rows:
            if not isinstance(row, dict):
                continue
            index = row.get("index")
            score = _unit(row.get("relevance_score", row.get("score")))
            if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(texts) and score is not None:
                found[index] = score
        if len(found) != len(texts):
            raise RerankerUnavailable(f"the {self.name} scored {len(found)} of {len(texts)} texts")
        return [found[i] for i in range(len(texts))]


class LLMReranker:
    """Asks the LLM to score passages in batches of 20 (a passage it leaves out scores 0)."""

    def __init__(self, llm: LLM, *, timeout_s: float = 30.0) -> None:
        self.llm = llm
        self.name = f"LLM ({llm.model})"
        self.timeout_s = timeout_s

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score in [0, 1] per text, higher is more relevant."""
        out: list[float] = []
        for start in range(0, len(texts), LLM_BATCH):
            out += self._batch(query, texts[start:start + LLM_BATCH])
        return out

    def _batch(self, query: str, texts: Sequence[str]) -> list[float]:
        passages = [{"n": i + 1, "text": t[:LLM_TEXT_CHARS]} for i, t in enumerate(texts)]
        user = f"Query: {' '.join(query.split())}\n\nPassages (JSON):\n{json.dumps(passages, ensure_ascii=False)}"
        answer = self.llm.chat_json(RERANK_PROMPT, user, timeout_s=self.timeout_s)
        rows = answer.get("scores") if isinstance(answer, dict) else answer
        if not isinstance(rows, list):
            raise LLMUnavailable("the LLM answered without a list of scores")
        got = [0.0] * len(texts)
        for position, row in enumerate(rows):
            if isinstance(row, dict):
                n, score = row.get("n", row.get("index")), _unit(row.get("score"))
            else:  # a bare list of numbers, in order
                n, score = position + 1, _unit(row)
            if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= len(texts) and score is not None:
                got[n - 1] = score
        return got


def reranker_from_spec(spec: str, llm: LLM | None = None, *, api_key: str | None = None) -> Reranker:
    """The reranker a `--rerank` flag names; ValueError when malformed or not available here.

    `url:http://host/rerank#MODEL` (Cohere/Jina shape; key from $ENGRAM_RERANK_API_KEY),
    `url:http://host/rerank` (TEI shape), or `llm` (the `--llm` model).
    """
    if spec.startswith("url:"):
        url, _, model = spec[4:].partition("#")
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        return RemoteReranker(url, model.strip() or None, key)
    if spec == "llm":
        if llm is None:
            raise ValueError("--rerank llm needs an LLM: add --llm MODEL@URL")
        return LLMReranker(llm)
    if spec == "local":
        raise ValueError("--rerank local is not available: no PyPI package ships cross-encoder weights in its wheel; "
                         "use url:http://HOST/rerank[#MODEL] or llm")
    raise ValueError(f"--rerank wants url:http://HOST/rerank[#MODEL] or llm, got {spec!r}")
