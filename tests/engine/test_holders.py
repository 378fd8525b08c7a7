"""Which documents hold a term (from the postings, the documents written since them, and an allowed
mask, always the same as a look at every document's terms), and which terms a prefix begins."""

from __future__ import annotations

import random

import numpy as np
import pytest

from engram_index.engine.holders import holders, terms_beginning
from engram_index.engine.termcounts import TermCounts

WORDS = ["diet", "dietary", "dietician", "~diet", "~dietari", "meal", "meals", "~meal", "allergi", "allergic",
         "~allerg", "peanut", "cello", "cell", "celloist", "a", "the", "x"]


def _expected(docs: dict[int, list[str]], wanted: set[str], allowed: np.ndarray | None) -> list[int]:
    """The slow way: every document's terms, one by one."""
    return sorted(o for o, terms in docs.items()
                  if (allowed is None or (o < allowed.size and allowed[o])) and any(t in wanted for t in terms))


def _found(counts: TermCounts, exact: set[str], begins: set[str], allowed: np.ndarray | None = None) -> list[int]:
    """The holders of `exact` and of the terms `begins` begins."""
    found: list[int] = holders(counts, [*exact, *terms_beginning(counts, begins)], allowed).tolist()
    return found


def test_a_term_and_the_terms_a_prefix_begins_find_their_holders_and_no_others() -> None:
    counts = TermCounts()
    counts.put_many([(0, ["dietary", "habits"]), (1, ["~diet", "plan"]), (2, ["dies"]), (5, ["cello", "diet"])])
    assert terms_beginning(counts, {"diet", "~d"}) == ["diet", "dietary", "~diet"]
    assert terms_beginning(counts, {"dies", "zzz"}) == ["dies"] and terms_beginning(counts, ()) == []
    assert _found(counts, {"diet"}, set()) == [5]
    assert _found(counts, set(), {"diet"}) == [0, 5]
    assert _found(counts, {"plan"}, {"~die"}) == [1]
    assert _found(counts, {"nothing"}, {"zzz"}) == []
    assert _found(counts, set(), set()) == []


def test_a_document_written_or_removed_after_the_postings_is_found_or_not_from_its_row() -> None:
    counts = TermCounts()
    counts.put_many([(0, ["meal"]), (1, ["meals"]), (2, ["cello"])])
    assert _found(counts, set(), {"meal"}) == [0, 1]  # (the postings are inverted now)
    counts.put_many([(3, ["mealtime"]), (1, None), (2, ["meal"])])
    assert _found(counts, set(), {"meal"}) == [0, 2, 3]
    assert _found(counts, {"cello"}, set()) == []
    counts.put_many([(7, ["zzz-new-term"])])  # a term the postings never had
    assert _found(counts, {"zzz-new-term"}, set()) == [7] == _found(counts, set(), {"zzz-new"})


@pytest.mark.parametrize("seed", range(6))
def test_holders_are_every_document_a_look_at_each_ones_terms_finds(seed: int) -> None:
    rng = random.Random(seed)
    counts = TermCounts()
    docs: dict[int, list[str]] = {}
    for round_ in range(4):
        changes: list[tuple[int, list[str] | None]] = []
        for _ in range(rng.randrange(1, 60)):
            o = rng.randrange(120)
            if rng.random() < 0.15:
                changes.append((o, None))
                docs.pop(o, None)
            else:
                terms = rng.sample(WORDS, rng.randrange(1, 5)) + [f"r{rng.randrange(30)}"]
                changes.append((o, terms))
                docs[o] = terms
        counts.put_many(changes)
        for _ in range(10):
            exact = set(rng.sample(WORDS, rng.randrange(0, 3)))
            begins = set(rng.sample(["die", "~die", "meal", "cell", "allerg", "r1", "q"], rng.randrange(0, 3)))
            allowed = None if rng.random() < 0.5 else np.array([rng.random() < 0.6 for _ in range(rng.randrange(1, 130))])
            wanted = exact | {t for terms in docs.values() for t in terms if any(t.startswith(b) for b in begins)}
            assert _found(counts, exact, begins, allowed) == _expected(docs, wanted, allowed), (round_, exact, begins)


def test_the_terms_a_prefix_begins_follow_the_vocabulary_as_it_grows_or_is_replaced() -> None:
    counts = TermCounts()
    counts.put_many([(0, ["alpha", "alpine"])])
    assert terms_beginning(counts, {"alp"}) == ["alpha", "alpine"]
    counts.put_many([(1, ["alps", "beta"])])  # a few new terms: inserted into the sorted copy
    assert terms_beginning(counts, {"alp", "b"}) == ["alpha", "alpine", "alps", "beta"]
    counts.put_many([(2 + i, [f"alp{i:04d}"]) for i in range(300)])  # many: the copy is sorted again
    assert terms_beginning(counts, {"alp0"}) == [f"alp{i:04d}" for i in range(300)]
    counts.clear()  # a new vocabulary, as a rebuild makes
    counts.put_many([(0, ["alto"])])
    assert terms_beginning(counts, {"al"}) == ["alto"]
