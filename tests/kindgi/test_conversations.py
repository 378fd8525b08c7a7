"""Which fact is the context of which: one session, else one thread (kindgi/retrieve.py), and the
same judged from the index's columns many pairs at once (kindgi/conversations.py)."""

from __future__ import annotations

import itertools

import numpy as np

from engram_index.engine.columns import Columns
from engram_index.engine.types import Document
from engram_index.kindgi.conversations import ConversationCodes
from engram_index.kindgi.conversations import Conversations, same_conversation


def fact(*tags: str) -> Document:
    """An index document with these tags."""
    return Document("f", "", "", tags=("t:note", *tags))


def test_facts_share_a_conversation_by_session_else_by_thread_and_never_without_either() -> None:
    assert same_conversation(fact("s:sessionId=a"), fact("s:sessionId=a"))
    assert not same_conversation(fact("s:sessionId=a"), fact("s:sessionId=b"))
    assert not same_conversation(fact("s:sessionId=a", "s:threadId=t"), fact("s:threadId=t"))  # one has a session
    assert same_conversation(fact("s:threadId=t"), fact("s:threadId=t"))
    assert not same_conversation(fact(), fact())


def test_conversations_worked_out_once_answer_as_same_conversation_does() -> None:
    kinds = [(), ("s:sessionId=a",), ("s:sessionId=b",), ("s:threadId=t",), ("s:sessionId=a", "s:threadId=t"),
             ("s:threadId=u", "v:org:-")]
    docs = [Document(f"f{i}", "", "", tags=tags) for i, tags in enumerate(kinds)]
    remembered = Conversations()
    for _ in range(2):  # the second round answers from what the first worked out
        for earlier, later in itertools.product(docs, docs):
            assert remembered(earlier, later) == same_conversation(earlier, later)


KINDS = [(), ("s:sessionId=a",), ("s:sessionId=b",), ("s:threadId=t",), ("s:sessionId=a", "s:threadId=t"),
         ("s:threadId=u", "v:org:-"), ("s:sessionId=a", "s:sessionId=b"), ("s:threadId=t", "s:threadId=u")]


def _columns(kinds: list[tuple[str, ...]]) -> Columns:
    """Columns holding one fact per tag set, at ordinals 0, 1, ..."""
    columns = Columns()
    for i, tags in enumerate(kinds):
        columns.put(i, Document(f"f{i}", "", "", tags=tags))
    return columns


def _all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (earlier, later) pair of ordinals below n."""
    pairs = np.array(list(itertools.product(range(n), range(n))), np.int64)
    return pairs[:, 0], pairs[:, 1]


def _expected(columns: Columns, earlier: np.ndarray, later: np.ndarray) -> list[bool]:
    """What same_conversation says of each pair's column documents."""
    docs = columns.documents(range(columns.size))
    return [same_conversation(docs[int(a)], docs[int(b)]) for a, b in zip(earlier, later)]


def test_conversation_codes_judge_every_pair_of_ordinals_as_same_conversation_does() -> None:
    columns = _columns(KINDS)
    earlier, later = _all_pairs(len(KINDS))
    codes = ConversationCodes()
    for _ in range(2):  # the second round answers from the codes the first worked out
        assert codes.same(columns, earlier, later).tolist() == _expected(columns, earlier, later)


def test_conversation_codes_follow_a_fact_written_again_at_the_same_ordinal() -> None:
    columns = _columns(KINDS)
    codes = ConversationCodes()
    earlier, later = _all_pairs(len(KINDS))
    codes.same(columns, earlier, later)
    columns.put(0, Document("f0", "", "", tags=("s:sessionId=b",)))  # moved from no conversation to b's
    columns.put(3, Document("g3", "", "", tags=()))  # another fact, of none, at t's ordinal
    assert codes.same(columns, earlier, later).tolist() == _expected(columns, earlier, later)
    assert codes.same(columns, np.array([0]), np.array([2])).tolist() == [True]


def test_conversation_codes_made_all_at_once_agree_with_those_worked_out_when_asked() -> None:
    kinds = KINDS * 700  # more ordinals than one step of the warm-up holds the lock for
    columns = _columns(kinds)
    warmed = ConversationCodes()
    warmed.warm(columns, step=1000)
    columns.put(5, Document("f5", "", "", tags=("s:threadId=t",)))  # written after the warm-up
    earlier = np.arange(columns.size - 1, dtype=np.int64)
    later = earlier + 1
    assert warmed.same(columns, earlier, later).tolist() == ConversationCodes().same(columns, earlier, later).tolist()
    assert warmed.same(columns, earlier, later).tolist() == _expected(columns, earlier, later)
