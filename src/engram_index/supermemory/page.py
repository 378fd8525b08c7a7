"""The face's own rows a v5 search reads, each once: the texts its ranking needs and its page's rows.

The engine answers a v5 search from its columns (ids, tags, ordinals: no store read), so a
candidate's text and a memory's document come from the face's tables, and only where they are
needed: the memories and chunks of one document among the candidates (which chunk a memory is a
statement of, search._sources) before ranking, then the returned page (its rows, texts for a
reranker and the explanations, its documents' metadata). A query per table reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engram_index.supermemory.candidates import Candidate
from engram_index.supermemory.found import KINDS, Found
from engram_index.supermemory.face import Face
from engram_index.supermemory.tables import ChunkRow, MemoryRow


class Rows:
    """One search's memory and chunk rows by id, read from the face's tables at most once each."""

    def __init__(self, face: Face, ns: str) -> None:
        """Read from `face`'s tables of namespace `ns`."""
        self.face = face
        self.ns = ns
        self.memories: dict[str, MemoryRow] = {}
        self.chunks: dict[str, ChunkRow] = {}
        self._asked: set[tuple[str, str]] = set()  # read already, found or not

    def read(self, cands: Iterable[Candidate]) -> None:
        """Read the rows of these candidates not read yet (one query per kind), and give each its text and
        its document id (a candidate whose row is gone keeps an empty text: it is left out of the page)."""
        wanted = [c for c in cands if (c.kind, c.id) not in self._asked]
        memory_ids = list(dict.fromkeys(c.id for c in wanted if c.kind == "memory"))
        chunk_ids = list(dict.fromkeys(c.id for c in wanted if c.kind == "chunk"))
        if memory_ids:
            self.memories.update(self.face.memories(self.ns, memory_ids))
        if chunk_ids:
            self.chunks.update(self.face.chunks(self.ns, chunk_ids))
        self._asked.update((c.kind, c.id) for c in wanted)
        for cand in wanted:
            if cand.kind == "memory":
                memory = self.memories.get(cand.id)
                if memory is not None:
                    cand.text, cand.doc_id = memory.memory, memory.doc_id
            else:
                chunk = self.chunks.get(cand.id)
                if chunk is not None:
                    cand.text, cand.doc_id = chunk.content, chunk.doc_id


    def read_found(self, found: Found, places: Sequence[int]) -> None:
        """`read` for candidates in columns (found.Found), at these places."""
        wanted = [i for i in places if (KINDS[found.kinds[i]], found.ids[i]) not in self._asked]
        memory_ids = list(dict.fromkeys(found.ids[i] for i in wanted if found.kinds[i]))
        chunk_ids = list(dict.fromkeys(found.ids[i] for i in wanted if not found.kinds[i]))
        if memory_ids:
            self.memories.update(self.face.memories(self.ns, memory_ids))
        if chunk_ids:
            self.chunks.update(self.face.chunks(self.ns, chunk_ids))
        self._asked.update((KINDS[found.kinds[i]], found.ids[i]) for i in wanted)
        for i in wanted:
            row = self.memories.get(found.ids[i]) if found.kinds[i] else self.chunks.get(found.ids[i])
            if row is not None:
                found.texts[i] = row.memory if isinstance(row, MemoryRow) else row.content
                found.doc_ids[i] = row.doc_id


def sharing_a_document(found: Sequence[Candidate]) -> list[Candidate]:
    """The memories and chunks among the candidates whose document has candidates of both kinds (those
    whose texts say which chunk a memory is a statement of)."""
    memories = {c.group for c in found if c.kind == "memory"}
    both = {c.group for c in found if c.kind == "chunk" and c.group in memories}
    both.discard("")  # (a candidate without a document tag shares nothing)
    return [c for c in found if c.group in both]
