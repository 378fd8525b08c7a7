"""Which conversation each fact is of, as integer codes per ordinal, so that a retrieve judges its
pairs of turns (is the fact before a hit its context?) in numpy instead of one Python call each.

A fact's conversation is its session tags, else its thread tags (`same_conversation`). Each
ordinal's codes are worked out once from its tags and kept until the ordinal's tags change: the
index's columns hold one tags tuple per live ordinal and replace it when the ordinal is written, so
the tuple kept beside the codes (the same object, held here, so never reused) says whether they are
still the ordinal's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np

from engram_index.context_columns import in_context, scores_in_context
from engram_index.engine.analyzer import QueryWord
from engram_index.engine.columns import Columns
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document, Filters
from engram_index.ranking import Pairs

SESSION, THREAD = "s:sessionId=", "s:threadId="
WARM_STEP = 4096  # ordinals worked out per hold of the lock when an index's codes are made all at once


Conversation = tuple[list[str], list[str]]  # a fact's session tags and thread tags


def conversation(doc: Document) -> Conversation:
    """The fact's session tags and thread tags (in its tags' order)."""
    sessions: list[str] = []
    threads: list[str] = []
    for tag in doc.tags:
        if tag.startswith("s:"):
            if tag.startswith("s:sessionId="):
                sessions.append(tag)
            elif tag.startswith("s:threadId="):
                threads.append(tag)
    return sessions, threads


def _same(a: Conversation, b: Conversation) -> bool:
    """Whether two conversations are one: by session where either has one, else by thread."""
    for mine, theirs in zip(a, b):
        if mine or theirs:
            return bool(mine) and mine == theirs
    return False


def same_conversation(earlier: Document, later: Document) -> bool:
    """Whether `earlier` is the context of `later`: both facts of one session (else of one thread)."""
    return _same(conversation(earlier), conversation(later))


class Conversations:
    """`same_conversation` with each fact's conversation worked out once (a retrieve asks about the
    same facts many times: each is the later turn of one pair and the earlier of the next)."""

    def __init__(self) -> None:
        """No fact seen yet."""
        self._seen: dict[str, Conversation] = {}

    def _of(self, doc: Document) -> Conversation:
        """The fact's conversation, remembered by its id (one retrieve reads one index state)."""
        found = self._seen.get(doc.id)
        if found is None:
            found = self._seen[doc.id] = conversation(doc)
        return found

    def __call__(self, earlier: Document, later: Document) -> bool:
        """As `same_conversation`."""
        return _same(self._of(earlier), self._of(later))


def conversation_keys(tags: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fact's session tags and thread tags, in its tags' order (as `conversation`)."""
    sessions = tuple(t for t in tags if t.startswith(SESSION))
    threads = tuple(t for t in tags if t.startswith(THREAD))
    return sessions, threads


class ConversationCodes:
    """Per ordinal of one index: a code for its session tags and one for its thread tags (0: none)."""

    def __init__(self) -> None:
        """No ordinal seen yet."""
        self._tags: list[tuple[str, ...] | None] = []  # the tags each ordinal's codes were made from
        self._session = np.zeros(0, np.int64)
        self._thread = np.zeros(0, np.int64)
        self._codes: dict[tuple[str, ...], int] = {(): 0}
        self._lock = threading.Lock()  # concurrent retrieves grow and fill the same arrays

    def _code(self, key: tuple[str, ...]) -> int:
        """The code of a tuple of session (or thread) tags: equal tuples, equal codes; () is 0."""
        return self._codes.setdefault(key, len(self._codes))

    def codes(self, columns: Columns, ords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The session and thread codes of these (live, non-negative) ordinals. Call inside the index's
        reading lock, so that the columns do not change meanwhile."""
        with self._lock:
            self._grow(columns.size)
            self._fill(columns, set(ords.tolist()))  # each ordinal checked once (pairs share their turns)
            return self._session[ords], self._thread[ords]

    def _grow(self, size: int) -> None:
        """Make room for ordinals below `size` (under the lock)."""
        if len(self._tags) >= size:
            return
        grown = max(size, 2 * len(self._tags), 1024)
        self._tags.extend([None] * (grown - len(self._tags)))
        for name in ("_session", "_thread"):
            old = getattr(self, name)
            new = np.zeros(grown, np.int64)
            new[:old.size] = old
            setattr(self, name, new)

    def _fill(self, columns: Columns, ords: Iterable[int]) -> None:
        """Work out the codes of these ordinals where their tags changed since (under the lock)."""
        kept, tags_of = self._tags, columns.tags_of
        # First seen, or written since: its tags are another tuple (warmed codes make this list empty).
        for o in [o for o in ords if kept[o] is not tags_of(o)]:
            tags = tags_of(o)
            if kept[o] is not tags:  # (an ordinal asked twice is worked out once)
                sessions, threads = conversation_keys(tags)
                self._session[o] = self._code(sessions)
                self._thread[o] = self._code(threads)
                kept[o] = tags

    def warm(self, columns: Columns, step: int = WARM_STEP) -> None:
        """Work out every ordinal's codes now, `step` at a time (retrieves meanwhile wait for one step at
        most), so that a retrieve finds its facts' codes ready. Outside the index's lock: a tuple read
        while the ordinal was written is another than the columns hold after, so it is worked out again
        when next asked."""
        start = 0
        while start < columns.size:
            with self._lock:
                end = min(columns.size, start + step)
                self._grow(end)
                self._fill(columns, list(range(start, end)))
            start = end

    def same(self, columns: Columns, earlier: np.ndarray, later: np.ndarray) -> np.ndarray:
        """Whether each earlier ordinal is of its later one's conversation: by session where either has
        one, else by thread (`same_conversation`, judged for many pairs at once)."""
        sessions, threads = self.codes(columns, np.concatenate([earlier, later]))  # one pass for both sides
        k = earlier.size
        s_a, t_a, s_b, t_b = sessions[:k], threads[:k], sessions[k:], threads[k:]
        by_session = (s_a != 0) | (s_b != 0)
        out: np.ndarray = np.where(by_session, (s_a != 0) & (s_a == s_b), (t_a != 0) & (t_a == t_b))
        return out


def keyword_in_context(index: SpaceIndex, words: Sequence[QueryWord], found: np.ndarray, filters: Filters,
                       limit: int, pairs: Pairs) -> tuple[list[str], np.ndarray]:
    """`ranking.context_keyword`, judged from the columns: the hits and the turns after them, each word
    at its better BM25 part in the turn or in the turn before it when `pairs` says it is of its
    conversation; best first, ties by insertion order, at most `limit`, as (fact ids, scores): what a
    retrieve needs of them (its answers are the revisions' bodies). `found`: the hits' ordinals (the
    engine's answer in columns; -1: not in the index)."""
    with index.reading():
        # A hit deleted since the search is left out, with the turns it would bring (as its id finds no ordinal).
        found = np.where(index.columns.alive(found), found, -1)
        ctx = in_context(index, found, filters, pairs, follow=True)
        total = scores_in_context(index, words, ctx)  # each word once, where it scores best
        scored = np.flatnonzero(total > 0)
        order = scored[np.lexsort((ctx.ords[scored], -total[scored]))]  # ties by ordinal, as context_keyword
        ids = index.columns.ids
        # Every candidate is live (a hit, or a turn after one that `_usable` found live) under this lock.
        named = [(i, ids[o]) for i, o in zip(order.tolist(), ctx.ords[order].tolist()) if ids[o] is not None]
        top = named[:limit]
    return [str(fid) for _, fid in top], total[[i for i, _ in top]].astype(np.float64)
