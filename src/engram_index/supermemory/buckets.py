"""Profile buckets: the namespace's own taxonomy, and which memories fall in each bucket.

Without an LLM, a memory falls in a bucket when it shares a content word with the bucket's name or
description: the same word, or stems of at least PREFIX letters one of which begins the other (a
bucket `diet` described as "food, meals, allergies" collects "I am allergic to peanuts": the
stems allerg- and allergi- meet).
"""

from __future__ import annotations

from collections.abc import Sequence

from engram_index.engine.analyzer import query_words
from engram_index.engine.keyword import searchable_words
from engram_index.supermemory.face import Face
from engram_index.supermemory.tables import MemoryRow


def effective_buckets(face: Face, ns: str) -> dict[str, str]:
    """The namespace's buckets and their descriptions (this server has no organization buckets)."""
    return dict(face.store.query("SELECT name, description FROM sm_buckets WHERE ns=? ORDER BY name", (ns,)))


PREFIX = 5


def _terms(text: str) -> set[str]:
    """A text's content words, as stems (or exact forms where there is no stem)."""
    return {(word.stem or word.exact).lstrip("~")
            for word in searchable_words(query_words(text.replace("-", " ").replace("_", " ")))}


def _meet(mine: set[str], wanted: set[str]) -> bool:
    """Whether two sets of stems share a word (see the module doc)."""
    if mine & wanted:
        return True
    return any(len(a) >= PREFIX and len(b) >= PREFIX and (a.startswith(b) or b.startswith(a))
               for a in mine for b in wanted)


def bucket_members(memories: Sequence[MemoryRow], name: str, description: str) -> list[MemoryRow]:
    """The memories that fall in a bucket."""
    wanted = _terms(f"{name} {description}")
    return [m for m in memories if _meet(_terms(m.memory), wanted)]


def put_buckets(face: Face, ns: str, buckets: dict[str, str]) -> dict[str, str]:
    """Upsert namespace-owned buckets; returns the effective map."""
    face.writable()
    face.store.execute([("INSERT OR REPLACE INTO sm_buckets(ns, name, description) VALUES (?, ?, ?)", (ns, k, v))
                        for k, v in buckets.items()])
    return effective_buckets(face, ns)


def delete_buckets(face: Face, ns: str, names: Sequence[str]) -> dict[str, str]:
    """Delete namespace-owned buckets (unknown names ignored); returns the effective map."""
    face.writable()
    face.store.execute([("DELETE FROM sm_buckets WHERE ns=? AND name=?", (ns, n)) for n in names])
    return effective_buckets(face, ns)
