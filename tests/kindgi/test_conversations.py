"""Which fact is the context of which: one session, else one thread (kindgi/retrieve.py)."""

from __future__ import annotations

import itertools

from engram_index.engine.types import Document
from engram_index.kindgi.retrieve import Conversations, same_conversation


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
