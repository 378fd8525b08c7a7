"""Memories formed by the configured LLM: atomic facts, each judged against the namespace's memories.

The LLM sees the document and the namespace's latest memories most like it (the document's own
among them) and proposes facts that are new, update a known memory (which then stops being
latest, the version counting up its chain), extend one, or derive from some (an inference). A
proposal that restates one of the document's memories word for word keeps that memory; the
document's memories it neither restates nor updates stop being latest (no longer supported).
"""

from __future__ import annotations

from engram_index.llm.base import KnownMemory
from engram_index.supermemory import extract
from engram_index.supermemory.face import Face, stamp
from engram_index.supermemory.forming import Formed, NewMemory
from engram_index.supermemory.tables import DocRow, MemoryRow

KNOWN_LIMIT = 30


def known_memories(face: Face, ns: str, text: str, own: list[MemoryRow]) -> dict[str, MemoryRow]:
    """The document's latest memories and the namespace's latest ones most like its text."""
    from engram_index.supermemory.search import candidates, doc_filter

    out = {m.id: m for m in own}
    if text.strip():
        found = candidates(face, ns, text[:2000], "memories", KNOWN_LIMIT, doc_filter(face, ns, None)[0], False, stamp())
        found.sort(key=lambda c: -c.similarity)
        out.update(face.memories(ns, [c.id for c in found[:KNOWN_LIMIT] if c.id not in out]))
    return out


def form_with_llm(face: Face, ns: str, doc: DocRow, text: str, own: list[MemoryRow]) -> Formed:
    """Ask the LLM for the revision's memories and relate them (see the module doc)."""
    from engram_index.llm.memory import form_memories

    assert face.llm is not None
    known = known_memories(face, ns, text, own)
    context = "\n".join(c for c in (face.namespace_context(ns), doc.supporting_context) if c) or None
    proposals = form_memories(face.llm, text, [KnownMemory(m.id, m.memory) for m in known.values()],
                              context=context)
    own_by_key = {extract.normalized(m.memory): m for m in own}
    kept: set[str] = set()
    out = Formed()
    for proposal in proposals:
        text_ = " ".join(proposal.memory.split())
        if not text_:
            continue
        same = own_by_key.get(extract.normalized(text_))
        if same is not None:
            kept.add(same.id)
            continue
        target = known.get(proposal.target or "") if proposal.relation != "new" else None
        relation = proposal.relation if target is not None else None
        if relation == "updates" and target is not None:
            kept.add(target.id)  # superseded by the update, not retired twice
        out.new.append(NewMemory(text_, proposal.is_static, proposal.is_inference or relation == "derives",
                                 relation, target))
    out.retire = [m.id for m in own if m.id not in kept]
    return out
