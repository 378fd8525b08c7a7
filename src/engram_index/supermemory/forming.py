"""What a document becomes on its way to done: the job in flight and the memories a revision forms."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engram_index.supermemory.chunking import Span
from engram_index.supermemory.tables import DocRow, MemoryRow


@dataclass(slots=True)
class NewMemory:
    """A memory a revision creates, and the memory it relates to."""

    text: str
    is_static: bool = False
    is_inference: bool = False
    relation: str | None = None  # updates / extends / derives
    target: MemoryRow | None = None


@dataclass(slots=True)
class Formed:
    """What a revision does to its document's memories."""

    new: list[NewMemory] = field(default_factory=list)
    retire: list[str] = field(default_factory=list)
    vectors: list[np.ndarray | None] = field(default_factory=list)


@dataclass
class Job:
    """One document in flight: what it became at each step."""

    doc: DocRow
    text: str = ""
    chunks: list[Span] = field(default_factory=list)
    formed: Formed | None = None
    chunk_vectors: list[np.ndarray | None] = field(default_factory=list)
    error: str | None = None
