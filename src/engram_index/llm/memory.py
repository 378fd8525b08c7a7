"""Memories from a document: the LLM extracts atomic facts and relates each to the known memories.

The answer is checked strictly, since models drift: items that are not objects or whose
`memory` is not a non-empty string are dropped; an unknown relation, or a relation to an id
that is not among the known memories, becomes "new"; `derives` is always an inference;
facts are trimmed, deduplicated and bounded in number and length. Only an answer with no
list of memories at all is an error (LLMUnavailable): an empty list is a valid answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from engram_index.llm.base import LLM, KnownMemory, LLMUnavailable, ProposedMemory, Relation

MAX_DOCUMENT_CHARS = 12_000
MAX_KNOWN = 50
MAX_KNOWN_CHARS = 500
MAX_CONTEXT_CHARS = 1_500
MAX_MEMORIES = 40
MAX_MEMORY_CHARS = 1_000
RELATIONS: frozenset[str] = frozenset({"new", "updates", "extends", "derives"})

SYSTEM_PROMPT = """\
You form memories from a document (task: form-memories).
Extract the atomic facts the document states: one self-contained sentence each, naming its
subject instead of pronouns, in the document's language. Then compare each fact with the
known memories and give its relation:
- "updates": it changes or contradicts known memory `target` (the new fact replaces it);
- "extends": it adds detail to known memory `target`, which stays true;
- "derives": it is an inference you draw from the document together with known memory `target`;
- "new": it relates to no known memory (target null).
Set "static" true for lasting facts (identity, background, stable preferences) and false for
recent or changing context. Do not repeat a known memory unchanged. At most 40 facts.
Answer only with JSON: {"memories": [{"memory": "...", "relation": "new", "target": null, "static": false}]}"""


def memories_prompt(document_text: str, known: Sequence[KnownMemory], context: str | None = None) -> str:
    """The user message: known memories as JSON, the optional supporting context, the document."""
    shown = [{"id": m.id, "memory": m.memory[:MAX_KNOWN_CHARS]} for m in known[:MAX_KNOWN]]
    parts = ["Known memories (JSON):", json.dumps(shown, ensure_ascii=False)]
    if context and context.strip():
        parts += ["", "Supporting context:", context.strip()[:MAX_CONTEXT_CHARS]]
    parts += ["", "Document:", "<<<", document_text[:MAX_DOCUMENT_CHARS], ">>>"]
    return "\n".join(parts)


def form_memories(
    llm: LLM,
    document_text: str,
    known: Sequence[KnownMemory],
    *,
    context: str | None = None,
    timeout_s: float = 60.0,
) -> list[ProposedMemory]:
    """The facts the LLM draws from the document, each judged against `known` (validated, bounded)."""
    if not document_text.strip():
        return []
    answer = llm.chat_json(SYSTEM_PROMPT, memories_prompt(document_text, known, context), timeout_s=timeout_s)
    return parse_memories(answer, known)


def parse_memories(answer: Any, known: Sequence[KnownMemory]) -> list[ProposedMemory]:
    """Check the LLM's answer and turn it into proposed memories (see the module docstring)."""
    items = answer.get("memories", answer.get("facts")) if isinstance(answer, dict) else answer
    if not isinstance(items, list):
        raise LLMUnavailable("the LLM answered without a list of memories")
    known_ids = {m.id for m in known[:MAX_KNOWN]}
    known_texts = {_key(m.memory) for m in known}
    seen: set[str] = set()
    out: list[ProposedMemory] = []
    for item in items:
        if len(out) == MAX_MEMORIES:
            break
        proposed = _one(item, known_ids)
        if proposed is None:
            continue
        key = _key(proposed.memory)
        if key in seen or (proposed.relation == "new" and key in known_texts):
            continue  # a repeat, or a known memory restated unchanged
        seen.add(key)
        out.append(proposed)
    return out


def _one(item: Any, known_ids: set[str]) -> ProposedMemory | None:
    """One proposed memory from one answer item, or None when it has no usable fact."""
    if isinstance(item, str):
        item = {"memory": item}
    if not isinstance(item, dict):
        return None
    text = item.get("memory", item.get("fact"))
    if not isinstance(text, str):
        return None
    text = " ".join(text.split())
    if not text:
        return None
    if len(text) > MAX_MEMORY_CHARS:
        text = text[:MAX_MEMORY_CHARS].rsplit(" ", 1)[0] or text[:MAX_MEMORY_CHARS]
    relation = item.get("relation")
    relation = relation.strip().lower() if isinstance(relation, str) else "new"
    target = item.get("target")
    if relation not in RELATIONS or relation == "new" or not isinstance(target, str) or target not in known_ids:
        relation, target = "new", None
    return ProposedMemory(
        memory=text,
        relation=cast(Relation, relation),
        target=target,
        is_static=item.get("static", item.get("is_static")) is True,
        is_inference=relation == "derives",
    )


def _key(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")
