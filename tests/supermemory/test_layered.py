"""The documents' metadata as a base map and the changes over it: a dict of the same items in every way a
reader asks, and never changed once handed out."""

from __future__ import annotations

import random

from engram_index.supermemory.known import Layered


def test_a_layered_map_reads_as_the_dict_of_its_items_through_any_changes() -> None:
    rng = random.Random(5)
    oracle = {f"d{i}": {"i": i} for i in range(300)}
    layered = Layered(dict(oracle))
    for step in range(400):
        named = {f"d{rng.randrange(360)}" for _ in range(rng.randrange(1, 6))}
        read = {d: {"i": step} for d in named if rng.random() < 0.7}  # the rest are gone
        before, frozen = layered, dict(layered.items())
        layered = layered.changed(named, read)
        for d in named:
            oracle.pop(d, None)
        oracle.update(read)
        assert dict(before.items()) == frozen  # a map handed out never changes
        assert len(layered) == len(oracle) and dict(layered.items()) == oracle and layered == oracle
        probe = f"d{rng.randrange(360)}"
        assert (probe in layered) == (probe in oracle) and layered.get(probe) == oracle.get(probe)
        assert sorted(layered) == sorted(oracle)


def test_a_change_of_few_documents_shares_the_base_and_many_fold_into_a_new_one() -> None:
    base = {f"d{i}": {"i": i} for i in range(1000)}
    layered = Layered(base).changed({"d1"}, {"d1": {"i": -1}}).changed({"d2"}, {})
    assert layered.shares(base) and layered["d1"] == {"i": -1} and "d2" not in layered
    for i in range(200):
        layered = layered.changed({f"d{i}"}, {f"d{i}": {"i": -i}})
    assert not layered.shares(base) and layered["d150"] == {"i": -150} and len(layered) == 1000
