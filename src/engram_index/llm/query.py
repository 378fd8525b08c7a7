"""Search helpers that ask the LLM: retrieval-oriented query rewrites, and one answer aggregated from results."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engram_index.llm.base import LLM, LLMUnavailable

MAX_QUERY_CHARS = 2_000
MAX_REWRITES = 3
MAX_REWRITE_CHARS = 500
MAX_AGGREGATE_TEXTS = 20
MAX_AGGREGATE_TEXT_CHARS = 2_000
MAX_ANSWER_CHARS = 4_000

REWRITE_PROMPT = """\
You rewrite search queries for retrieval (task: rewrite-query).
Give up to 3 alternative phrasings of the user's query that would find the same information
in a memory store: expand abbreviations, add synonyms, make implicit subjects explicit, and
turn relative time words ("last week") into explicit ones when the query states a date.
Do not answer the query. Answer only with JSON: {"rewrites": ["...", "..."]}"""

AGGREGATE_PROMPT = """\
You merge search results into one answer (task: aggregate).
Using only the numbered passages, write a short, self-contained answer to the query that
merges overlapping passages and drops repetition. If the passages do not answer it, say what
they do contain. Answer only with JSON: {"answer": "..."}"""


def _normal(text: str) -> str:
    return " ".join(text.split())


def rewrite_query(llm: LLM, query: str, *, timeout_s: float = 10.0) -> list[str]:
    """Up to 3 rewrites of the query, deduplicated (case and spacing), the original excluded."""
    query = _normal(query)[:MAX_QUERY_CHARS]
    if not query:
        return []
    answer = llm.chat_json(REWRITE_PROMPT, f"Query: {query}", timeout_s=timeout_s)
    items = answer.get("rewrites", answer.get("queries")) if isinstance(answer, dict) else answer
    if not isinstance(items, list):
        raise LLMUnavailable("the LLM answered without a list of rewrites")
    seen = {query.casefold()}
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            continue
        text = _normal(item)[:MAX_REWRITE_CHARS]
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            out.append(text)
            if len(out) == MAX_REWRITES:
                break
    return out


def aggregate_prompt(query: str, texts: Sequence[str]) -> str:
    """The user message: the query and the numbered passages (bounded in number and length)."""
    passages = [{"n": i + 1, "text": t[:MAX_AGGREGATE_TEXT_CHARS]} for i, t in enumerate(texts[:MAX_AGGREGATE_TEXTS])]
    return f"Query: {_normal(query)[:MAX_QUERY_CHARS]}\n\nPassages (JSON):\n{json.dumps(passages, ensure_ascii=False)}"


def aggregate(llm: LLM, query: str, texts: Sequence[str], *, timeout_s: float = 30.0) -> str:
    """One answer to `query` merged from the result texts (the first 20); LLMUnavailable if the LLM gives none."""
    if not texts:
        return ""
    answer: Any = llm.chat_json(AGGREGATE_PROMPT, aggregate_prompt(query, texts), timeout_s=timeout_s)
    text = answer.get("answer") if isinstance(answer, dict) else answer
    if not isinstance(text, str) or not text.strip():
        raise LLMUnavailable("the LLM answered without an aggregated answer")
    return text.strip()[:MAX_ANSWER_CHARS]
