"""Which chunks hold a memory's statement: the rule, and the link a chunk's record keeps of it.

A hybrid search ranks a memory and the chunk that holds its statement as one result (search.rank:
a memory is a statement of its document). Whether a chunk holds a statement is a question of
their texts (`holds`), which a search would have to read from the face's tables for every memory
and chunk of one document among its candidates (~30 rows a search). A chunk's texts and the
statements of its document's memories change only together: chunks are written whole when a
document is processed, with the memories that revision forms, and a memory's id is made of its
text. So the answer is worked out then and kept in the chunk's engine record, as its author
(`chunk_author`): a column the keyword index does not tokenise and the index keeps in memory.
A chunk written before chunks kept it names no author (`held_by` says None), and a search reads
the texts of its document's candidates as before.
"""

from __future__ import annotations

from collections.abc import Iterable

PREFIX = "statements:"  # a chunk record's author: this, then the ids of the memories it holds, space-separated


def spaced(text: str) -> str:
    """The text with each run of whitespace made one space, and none at either end."""
    return " ".join(text.split())


def holds(text: str, statement: str) -> bool:
    """Whether a chunk's text holds a memory's statement: as it is, or with the whitespace of both made
    single spaces. An empty statement is held by none (a memory without a text is its own source)."""
    return bool(statement) and (statement in text or spaced(statement) in spaced(text))


def held_in(text: str, memories: Iterable[tuple[str, str]]) -> list[str]:
    """The ids of the memories (id, statement) whose statement `text` holds (`holds`, the text made single-spaced
    once, when a statement is not held as it is)."""
    out: list[str] = []
    flat: str | None = None
    for memory, statement in memories:
        if not statement:
            continue
        if statement not in text:
            if flat is None:
                flat = spaced(text)
            if spaced(statement) not in flat:
                continue
        out.append(memory)
    return out


def chunk_author(held: Iterable[str]) -> str:
    """A chunk record's author naming the memories (by id) whose statement it holds."""
    return PREFIX + " ".join(held)


def held_by(author: str) -> frozenset[str] | None:
    """The ids of the memories a chunk's record says it holds; None when it says nothing (written before)."""
    if not author.startswith(PREFIX):
        return None
    return frozenset(author[len(PREFIX):].split())
