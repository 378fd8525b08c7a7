"""Which chunks hold a memory's statement: worked out when a document is processed, kept in each chunk's record,
and a search answering from it exactly as it answers from the texts."""

from __future__ import annotations

import random

import numpy as np
import pytest
from supermemory import Supermemory

from engram_index.supermemory import search, statements
from engram_index.supermemory.tables import chunks_collection
from tests.supermemory.conftest import Server, add_done, wait_done

# A chunk's text, a statement, and whether the text holds it.
CASES = [
    ("Ana adopted a puppy. It is brown.", "Ana adopted a puppy.", True),
    ("Ana  adopted\na puppy. It is brown.", "Ana adopted a puppy.", True),
    ("Ana adopted a puppy.", "Ana  adopted a\tpuppy.", True),
    ("Ana adopted a kitten.", "Ana adopted a puppy.", False),
    ("Ana adopted a puppy.", "", False),
    ("Ana adopted a puppy.", "  ", True),
]
WORDS = ("river garden lantern harbour violin orchard meadow signal copper willow falcon ember quartz "
         "canyon pepper marble tundra beacon saddle crimson").split()


def sentences(rng: random.Random, n: int) -> list[str]:
    """n sentences of a few words each, some of them the same."""
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))).capitalize() + "." for _ in range(n)]


def long_text(rng: random.Random, n: int = 60) -> str:
    """A text of n sentences, long enough for several chunks, with runs of whitespace here and there."""
    return " ".join(s if rng.random() < 0.8 else s.replace(" ", "  ", 1) for s in sentences(rng, n))


def held_now(server: Server, ns: str) -> dict[str, tuple[frozenset[str] | None, frozenset[str]]]:
    """Per chunk: the memories its record names, and those whose statement its text holds by the texts."""
    face = server.app.state.supermemory
    index = face.collections.index(chunks_collection(ns))
    with index.reading():
        columns = index.columns
        live = np.flatnonzero(columns.live[:columns.size])
        named = dict(zip([columns.ids[o] for o in live.tolist()], columns.authors(live)))
    memories = face.store.query("SELECT id, memory FROM sm_memories WHERE ns=? AND is_latest=1", (ns,))
    texts = dict(face.store.query("SELECT id, content FROM sm_chunks WHERE ns=?", (ns,)))
    assert set(texts) == set(named)
    return {c: (statements.held_by(named[c]), frozenset(m for m, s in memories if statements.holds(text, s)))
            for c, text in texts.items()}


@pytest.mark.parametrize("text, statement, held", CASES)
def test_a_chunk_holds_a_statement_as_it_is_or_with_its_whitespace_made_single_spaces(
        text: str, statement: str, held: bool) -> None:
    assert statements.holds(text, statement) is held


@pytest.mark.parametrize("text, statement, held", CASES)
def test_the_memories_a_chunk_holds_are_those_holds_says_it_holds(text: str, statement: str, held: bool) -> None:
    memories = [("m0", "It is brown."), ("m1", statement), ("m2", "Ana")]
    assert statements.held_in(text, memories) == [m for m, s in memories if statements.holds(text, s)]
    assert ("m1" in statements.held_in(text, memories)) is held


def test_a_chunks_author_names_the_memories_it_holds_and_an_older_one_names_nothing() -> None:
    assert statements.held_by(statements.chunk_author(["m1", "m2"])) == {"m1", "m2"}
    assert statements.held_by(statements.chunk_author([])) == frozenset()
    assert statements.held_by("") is None


def test_each_chunk_names_the_memories_whose_statement_it_holds_after_every_revision(
        server: Server, client: Supermemory, ns: str) -> None:
    rng = random.Random(3)
    first = long_text(rng)
    doc_id = add_done(client, ns, first)
    add_done(client, ns, long_text(rng, 12))
    now = held_now(server, ns)
    assert len(now) >= 3 and any(len(texts) > 0 for _, texts in now.values())
    assert all(named == texts for named, texts in now.values()), now
    # A revision that keeps most statements: the kept memories are held by the new chunks.
    kept = first.split(". ")
    revised = ". ".join(kept[:10] + sentences(rng, 5) + kept[10:])
    client.documents.update(ns, doc_id, content=revised)
    assert wait_done(client, ns, doc_id).system.status == "done"
    now = held_now(server, ns)
    assert all(named == texts for named, texts in now.values()), now


def _answers(server: Server, ns: str, queries: list[str]) -> list[object]:
    """Each query's hybrid results (ids, similarities), in order."""
    face = server.app.state.supermemory
    return [[(r["id"], r["similarity"]) for r in search.search(face, ns, {"query": q, "limit": 20, "threshold": 0.0},
                                                                False)["results"]] for q in queries]


def test_a_search_answers_from_the_chunks_records_as_it_answers_from_the_texts(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    for n in (60, 30, 8, 45):
        add_done(client, ns, long_text(rng, n))
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(25)]
    read: list[int] = []
    read_found = search.Rows.read_found
    monkeypatch.setattr(search.Rows, "read_found", lambda self, found, places: (read.append(len(places)),
                                                                                read_found(self, found, places))[1])
    linked = _answers(server, ns, queries)
    assert not any(read), read  # (every chunk names its memories: no text read before ranking)
    monkeypatch.setattr(search, "LINKED", False)
    assert _answers(server, ns, queries) == linked
    assert any(read)  # (the texts were read, and said the same)


def test_chunks_written_before_they_named_their_memories_are_judged_by_their_texts(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8)
    monkeypatch.setattr(statements, "chunk_author", lambda held: "")  # as a chunk written before
    for n in (60, 30):
        add_done(client, ns, long_text(rng, n))
    monkeypatch.undo()
    add_done(client, ns, long_text(rng, 45))  # (one document whose chunks name their memories, beside them)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(25)]
    mixed = _answers(server, ns, queries)
    monkeypatch.setattr(search, "LINKED", False)
    assert _answers(server, ns, queries) == mixed


def test_a_records_group_is_its_first_tag_that_is_not_a_state() -> None:
    states = (search.SUPERSEDED, search.FORGOTTEN)
    assert search._group((*states, "doc:a", "doc:b")) == "doc:a"
    assert search._group(("doc:a", states[0])) == "doc:a"
    assert search._group(states[:1]) == "" and search._group(()) == ""
