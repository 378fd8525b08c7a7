"""Related memories: parents (versions this one updates), children (versions that update it), siblings.

Parents and children walk the `updates` chain up to MAX_STEPS steps, nearest first; siblings are
the direct `extends` / `derives` links either way. Forgotten or expired memories, memories of other
namespaces (structurally: the tables are keyed by namespace) and memories whose document fails the
request's filter are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engram_index.supermemory.face import Face
from engram_index.supermemory.tables import DocRow, MemoryRow
from engram_index.supermemory.views import included_document, related_view

MAX_STEPS = 3
Allowed = Callable[[str], bool]  # does a document pass the request's filter


def _walk(face: Face, ns: str, start: str, sql: str, limit: int) -> list[str]:
    """Ids reached from `start` along one direction of the updates chain, nearest first."""
    out: list[str] = []
    seen = {start}
    frontier = [start]
    for _ in range(MAX_STEPS):
        nxt: list[str] = []
        for mid in frontier:
            for (other,) in face.store.query(sql, (ns, mid)):
                if other not in seen:
                    seen.add(other)
                    nxt.append(other)
        out += nxt
        frontier = nxt
        if not frontier or len(out) >= 4 * limit:
            break
    return out


def related(face: Face, ns: str, memory_id: str, limit: int, at_ms: int, allowed: Allowed | None = None,
            with_documents: bool = False) -> dict[str, list[dict[str, Any]]]:
    """The three related lists of a memory, each at most `limit` long."""
    parents = _walk(face, ns, memory_id,
                    "SELECT dst FROM sm_relations WHERE ns=? AND src=? AND relation='updates'", limit)
    children = _walk(face, ns, memory_id,
                     "SELECT src FROM sm_relations WHERE ns=? AND dst=? AND relation='updates'", limit)
    siblings: dict[str, str] = {}
    for other, relation in face.store.query(
            "SELECT dst, relation FROM sm_relations WHERE ns=? AND src=? AND relation IN ('extends', 'derives')"
            " UNION ALL SELECT src, relation FROM sm_relations WHERE ns=? AND dst=?"
            " AND relation IN ('extends', 'derives')", (ns, memory_id, ns, memory_id)):
        siblings.setdefault(other, relation)
    rows = face.memories(ns, [*parents, *children, *siblings])
    docs = face.documents(ns, list({m.doc_id for m in rows.values()}))

    def items(ids: list[str], relation: Callable[[str], str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for mid in ids:
            memory = rows.get(mid)
            if memory is None or memory.forgotten(at_ms) or (allowed is not None and not allowed(memory.doc_id)):
                continue
            out.append(_item(memory, relation(mid), docs.get(memory.doc_id), with_documents))
            if len(out) >= limit:
                break
        return out

    return {
        "parents": items(parents, lambda _: "updates"),
        "children": items(children, lambda _: "updates"),
        "siblings": items(list(siblings), lambda mid: siblings[mid]),
    }


def _item(memory: MemoryRow, relation: str, doc: DocRow | None, with_document: bool) -> dict[str, Any]:
    """One related item (with its document when both includes are asked)."""
    out = related_view(memory, relation, doc)
    if with_document and doc is not None:
        out["document"] = included_document(doc)
    return out
