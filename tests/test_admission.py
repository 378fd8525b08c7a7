"""The shared admission: token buckets per key, slots per key, and a bounded memory of keys."""

from __future__ import annotations

import asyncio

import pytest

from engram_index import admission
from engram_index.admission import Admission, retry_after_s
from engram_index.errors import RateLimited


def test_a_key_past_its_burst_is_refused_with_the_whole_seconds_to_wait() -> None:
    limits = Admission(rate=0.5, burst=2)
    limits.take("k")
    limits.take("k")
    with pytest.raises(RateLimited) as caught:
        limits.take("k")
    assert caught.value.retry_after_s == 2 and "for this key" in caught.value.message
    limits.take("other")  # another key has a budget of its own


def test_retry_after_is_at_least_one_second_and_rounds_up() -> None:
    assert [retry_after_s(w) for w in (0.0, 0.01, 1.0, 1.2)] == [1, 1, 1, 2]


def test_a_request_past_the_keys_slots_is_refused_after_the_wait_and_idle_slots_are_forgotten() -> None:
    limits = Admission(rate=1e6, burst=1e6, concurrent=1, queue_wait_s=0.01)

    async def run() -> None:
        async with limits.slot("k"):
            with pytest.raises(RateLimited) as caught:
                async with limits.slot("k"):
                    pass
            assert caught.value.retry_after_s == 1 and "at once" in caught.value.message
        assert limits._slots == {}

    asyncio.run(run())


def test_the_keys_remembered_are_bounded_and_a_drained_key_stays_drained_within_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "MAX_KEYS", 3)
    limits = Admission(rate=0.001, burst=2)
    limits.take("drained")
    limits.take("drained")
    limits.take("a")
    with pytest.raises(RateLimited):
        limits.take("drained")
    for key in ("b", "c", "d", "e"):
        limits.take(key)
    assert len(limits._buckets) <= 3
