"""The deterministic memory extractor: a document's statements become memories, revisions relate them.

Without an LLM, a memory is a statement of the document: a declarative sentence (or list item) of
3-60 words, questions and headings left out, whitespace collapsed. It is never an inference. A
statement is static (a stable fact, for the profile) unless it holds a word of time (today,
yesterday, currently, next week...), which makes it dynamic.

When a document changes, `plan` compares its latest memories with the new statements: the same
statement keeps its memory; a new statement whose words overlap a dropped one's by at least
UPDATE_JACCARD (Jaccard over all words), sharing at least one content word, *updates* it (the old one stops being latest, the version counts up the
chain); every other dropped memory stops being latest, because the document no longer supports it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from engram_index.supermemory.chunking import sentences

MIN_WORDS = 3
MAX_WORDS = 60
MAX_PER_DOCUMENT = 100
UPDATE_JACCARD = 0.5
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")
_WORD = re.compile(r"\w+", re.UNICODE)
_TIME_WORDS = frozenset(
    "today tonight yesterday tomorrow now currently recently lately soon this week month weekend"
    " next last ago upcoming meanwhile later".split()
)
# Function words: two statements must share a word outside these to be versions of one fact.
_STOP = frozenset(
    "a an the and or but of to in on at for with by from as is am are was were be been being it its"
    " this that these those i me my we our you your he him his she her they them their not no".split()
)


@dataclass(frozen=True, slots=True)
class Statement:
    """One memory-worthy statement of a document."""

    text: str
    is_static: bool

    @property
    def key(self) -> str:
        """The statement's identity: case-folded words."""
        return normalized(self.text)


def normalized(text: str) -> str:
    """Case-folded words joined by single spaces."""
    return " ".join(_WORD.findall(text.casefold()))


def _words(text: str) -> frozenset[str]:
    """The distinct case-folded words of a text."""
    return frozenset(_WORD.findall(text.casefold()))


def statements(text: str) -> list[Statement]:
    """The document's statements, in order, each once, at most MAX_PER_DOCUMENT."""
    out: list[Statement] = []
    seen: set[str] = set()
    for line in _lines(text):
        for span in sentences(line):
            sentence = " ".join(span.text.split())
            words = _WORD.findall(sentence)
            if sentence.endswith("?") or not MIN_WORDS <= len(words) <= MAX_WORDS:
                continue
            key = normalized(sentence)
            if key in seen:
                continue
            seen.add(key)
            lowered = {w.casefold() for w in words}
            out.append(Statement(sentence, not (lowered & _TIME_WORDS)))
            if len(out) >= MAX_PER_DOCUMENT:
                return out
    return out


def _lines(text: str) -> list[str]:
    """Paragraphs and list items as separate pieces, headings and bullets stripped."""
    pieces: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("```"):
            pieces.append("")
            continue
        bullet = _BULLET.match(line)
        if bullet:
            pieces.append("")
            line = line[bullet.end():]
        pieces.append(line)
    return [p for p in "\n".join(pieces).split("\n\n") if p.strip()]


@dataclass(frozen=True, slots=True)
class Known:
    """A latest memory of the document being reprocessed."""

    id: str
    memory: str
    version: int


@dataclass(slots=True)
class Plan:
    """What a revision does to a document's memories."""

    keep: list[str] = field(default_factory=list)  # ids of memories the revision still states
    create: list[tuple[Statement, Known | None]] = field(default_factory=list)  # with the memory it updates
    retire: list[str] = field(default_factory=list)  # ids that stop being latest, unsupported


def plan(known: Sequence[Known], new: Sequence[Statement]) -> Plan:
    """Relate a revision's statements to the document's latest memories (see the module doc)."""
    out = Plan()
    by_key = {normalized(k.memory): k for k in known}
    fresh: list[Statement] = []
    for statement in new:
        match = by_key.pop(statement.key, None)
        if match is not None:
            out.keep.append(match.id)
        else:
            fresh.append(statement)
    dropped = list(by_key.values())
    words = {k.id: _words(k.memory) for k in dropped}
    for statement in fresh:
        mine = _words(statement.text)
        best: Known | None = None
        best_score = 0.0
        for candidate in dropped:
            theirs = words[candidate.id]
            union = mine | theirs
            shared = mine & theirs
            score = len(shared) / len(union) if union and shared - _STOP else 0.0
            if score > best_score:
                best, best_score = candidate, score
        if best is not None and best_score >= UPDATE_JACCARD:
            dropped.remove(best)
            out.create.append((statement, best))
        else:
            out.create.append((statement, None))
    out.retire = [k.id for k in dropped]
    return out


def memory_id(ns: str, doc_id: str, revision: int, text: str) -> str:
    """A memory's id: the same statement of the same revision always gets the same one."""
    digest = hashlib.blake2b(f"{ns}\0{doc_id}\0{revision}\0{normalized(text)}".encode(), digest_size=12)
    return "m" + digest.hexdigest()
