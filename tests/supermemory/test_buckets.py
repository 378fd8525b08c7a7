"""Profile buckets: which memories fall in a bucket, found through the memories' keyword index, are every
recallable latest memory whose words meet the bucket's, newest first, and no others."""

from __future__ import annotations

from typing import Any

import pytest
from supermemory import Supermemory

from engram_index.supermemory import buckets, memories
from engram_index.supermemory.face import Face, stamp
from engram_index.supermemory.tables import MEMORY_COLUMNS, MemoryRow
from tests.supermemory.conftest import Server, add_done, wait_done
from tests.supermemory.test_query_plans import plans, walks_the_namespace

BUCKETS = {
    "diet": "food, nutrition, allergies, vegetables, eating",
    "music": "instruments and songs, cello",
    "lab-work": "assays: pre-mRNA, NF-kB, snake_case_ids",
    "the": "",  # nothing but a stopword: it is its own word
    "health": "wellbeing, sleeping",
    "theses": "",  # its stem is a stopword: a memory holds it as a word only when it holds nothing else
    "codes": "zqlofab",  # a word of a hidden tag's form: who holds it is judged by the text
}
TEXTS = [
    "I am allergic to peanuts and I avoid them at every meal.",
    "Dietary habits changed after the diagnosis last spring.",
    "Nutritional advice came from the dietician last week.",
    "I play the cello in a small quartet on Sundays.",
    "The cellist and I rehearse instrumental pieces.",
    "The pre-mRNA assay ran overnight in the second lab.",
    "NF-kB signalling was measured with snake_case_ids in the notebook.",
    "The quarterly report is due on Monday morning.",
    "Sleep quality improved with the new wellbeing routine.",
    "Café visits with colleagues are a weekly ritual for me.",
    "The sleepwalking episodes stopped in the summer.",
    "There these their.",
    "These theses are long.",
    "These results hold firm.",
    "The zqlofab team met.",
    "The zqlofabcd build ran twice.",
]


def _face(server: Server) -> Face:
    """The server's v5 face."""
    face: Face = server.app.state.supermemory
    return face


def _expected(face: Face, ns: str, passing: set[str] | None = None) -> dict[str, list[str]]:
    """Each bucket's members the slow way: every memory of the namespace read and judged by its text."""
    now = stamp()
    rows = [MemoryRow.from_row(r) for r in face.store.query(f"SELECT {MEMORY_COLUMNS} FROM sm_memories WHERE ns=?",
                                                            (ns,))]
    kept = sorted((m for m in rows if m.is_latest and not m.forgotten(now)
                   and (passing is None or m.doc_id in passing)), key=lambda m: (-m.updated_ms, m.id))
    out = {}
    for name, description in sorted(face.store.query("SELECT name, description FROM sm_buckets WHERE ns=?", (ns,))):
        wanted = buckets.bucket_words(name, description)
        out[name] = [m.memory for m in kept if buckets.meets(buckets.memory_words(m.memory), wanted)]
    return out


def _got(client: Supermemory, ns: str, **options: Any) -> dict[str, list[str]]:
    """Each bucket's members as the SDK reads a profile."""
    profile = client.profile(ns, **options).profile
    return {name: [f.memory for f in facts] for name, facts in sorted(profile.buckets.items())}


def test_a_memory_falls_in_a_bucket_whose_words_its_own_meet_whole_or_by_a_long_enough_stem() -> None:
    diet = buckets.bucket_words("diet", BUCKETS["diet"])
    assert buckets.meets(buckets.memory_words("I am allergic to peanuts."), diet)  # allerg- and allergi- meet
    assert buckets.meets(buckets.memory_words("Vegetarian meals are planned."), diet)  # vegetarian begins with veget-
    assert buckets.meets(buckets.memory_words("A diet soda."), diet)  # the same word, however short
    assert not buckets.meets(buckets.memory_words("Dietary habits changed."), diet)  # diet is under PREFIX letters
    assert not buckets.meets(buckets.memory_words("The quarterly report is due."), diet)
    assert not buckets.meets(buckets.memory_words("We ate at a diner."), buckets.bucket_words("x", "dinosaurs"))
    lab = buckets.bucket_words("lab-work", BUCKETS["lab-work"])
    assert buckets.meets(buckets.memory_words("The pre-mRNA assay ran."), lab)
    assert buckets.meets(buckets.memory_words("Our snake_case_ids are long."), lab)
    # A stopword is not a word of a memory that holds others ("there" would begin "therefore").
    assert not buckets.meets(buckets.memory_words("There is the garden."), buckets.bucket_words("x", "therefore"))
    assert buckets.meets(buckets.memory_words("There is the garden."), buckets.bucket_words("x", "gardens"))


def test_a_bucket_holds_every_recallable_latest_memory_whose_words_meet_its_own_newest_first(
        server: Server, client: Supermemory, ns: str) -> None:
    face = _face(server)
    for i, text in enumerate(TEXTS):
        add_done(client, ns, text, id=f"d{i}", metadata={"team": "a" if i % 2 else "b"})
    client.profiles.set_buckets(ns, buckets=BUCKETS)
    assert _got(client, ns) == _expected(face, ns)
    assert _got(client, ns)["theses"] == ["These theses are long.", "There these their."]  # (judged by their text)
    assert _got(client, ns)["codes"] == ["The zqlofabcd build ran twice.", "The zqlofab team met."]
    assert _got(client, ns)["diet"] == ["Nutritional advice came from the dietician last week.",  # the newest first
                                        "I am allergic to peanuts and I avoid them at every meal."]
    # Forgotten, superseded, expired: none is a member any more; a memory written since the postings is.
    cello = next(m.id for m in client.list(ns, "memories", limit=100).memories if "cello" in m.memory)
    client.memories.forget(ns, ids=[cello])
    client.documents.update(ns, "d1", content="Diet sodas are off the menu this year.")
    wait_done(client, ns, "d1")
    client.documents.update(ns, "d2", metadata={"team": "b", "forgetAfter": "2000-01-01T00:00:00Z"})
    wait_done(client, ns, "d2")
    add_done(client, ns, "Vegetarian meals are planned for the week.", id="late", metadata={"team": "a"})
    got = _got(client, ns)
    assert got == _expected(face, ns)
    assert got["diet"] == ["Vegetarian meals are planned for the week.", "Diet sodas are off the menu this year.",
                           "I am allergic to peanuts and I avoid them at every meal."]
    assert not any("cello in a small" in m or "dietician" in m for facts in got.values() for m in facts)
    team_a = {"field": "team", "operator": "eq", "value": "a"}
    passing = {d for d, md in face.metadata(ns).items() if md.get("team") == "a"}
    assert _got(client, ns, filter=team_a) == _expected(face, ns, passing)
    assert _got(client, ns, buckets=["music"]) == {"music": _expected(face, ns)["music"]}


def test_a_bucket_of_a_namespace_without_memories_is_empty(server: Server, client: Supermemory, ns: str) -> None:
    client.profiles.set_buckets(ns, buckets={"diet": "food"})
    assert _got(client, ns) == {"diet": []}


@pytest.mark.parametrize("bucketed", [False, True])
def test_a_profile_reads_no_memory_row_of_the_namespace_beyond_its_sections_and_its_buckets_members(
        server: Server, client: Supermemory, ns: str, bucketed: bool) -> None:
    face = _face(server)
    add_done(client, ns, "I am allergic to peanuts. I play the cello. The report is due on Monday.")
    if bucketed:
        client.profiles.set_buckets(ns, buckets={"diet": "food, allergies"})
    if not hasattr(face.store, "_reader"):
        pytest.skip("query plans are SQLite's")
    for plan in plans(face, lambda: memories.profile(face, ns, {})):
        if any("sm_memories" in step for step in plan):
            assert not walks_the_namespace(plan), plan
