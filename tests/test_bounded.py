"""A bounded cache keeps at most its limit of entries, starting over when a new key would pass it."""

from __future__ import annotations

import pytest

from engram_index.bounded import Bounded


def test_a_bounded_cache_keeps_entries_up_to_its_limit_and_starts_over_past_it() -> None:
    cache: Bounded[str, int] = Bounded(3)
    for i, key in enumerate("abc"):
        assert cache.keep(key, i) == i
    assert dict(cache) == {"a": 0, "b": 1, "c": 2}
    assert cache.keep("d", 3) == 3
    assert dict(cache) == {"d": 3}
    assert cache.get("a") is None


def test_a_full_bounded_cache_replaces_a_key_it_holds_without_starting_over() -> None:
    cache: Bounded[str, int] = Bounded(2)
    cache.keep("a", 1)
    cache.keep("b", 2)
    cache.keep("a", 10)
    assert dict(cache) == {"a": 10, "b": 2}


def test_a_bounded_cache_refuses_a_limit_below_one() -> None:
    with pytest.raises(ValueError):
        Bounded(0)
