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


def test_a_request_arriving_while_the_keys_queue_has_been_long_for_a_while_is_refused_at_once() -> None:
    # Waiting the full queue_wait_s is for bursts; a queue that stays non-empty means overload, and
    # then waiting only holds connections (the caller's pool fills and everything behind it waits).
    limits = Admission(rate=1e6, burst=1e6, concurrent=1, queue_wait_s=5.0)
    order: list[str] = []

    async def run() -> None:
        release = asyncio.Event()

        async def holder() -> None:
            async with limits.slot("k"):
                await release.wait()

        async def waiter() -> None:
            async with limits.slot("k"):
                order.append("waiter ran")

        hold = asyncio.create_task(holder())
        await asyncio.sleep(0)
        wait = asyncio.create_task(waiter())
        await asyncio.sleep(admission.CONGESTED_AFTER_S * 2)  # the queue has held a waiter all along
        with pytest.raises(RateLimited) as caught:
            async with asyncio.timeout(4.0):  # far below queue_wait_s: only congestion refuses this soon
                async with limits.slot("k"):
                    order.append("late ran")
        assert "at once" in caught.value.message
        release.set()
        await asyncio.gather(hold, wait)

    asyncio.run(run())
    assert order == ["waiter ran"]


def test_a_burst_after_an_empty_queue_still_waits_for_its_slot() -> None:
    limits = Admission(rate=1e6, burst=1e6, concurrent=1, queue_wait_s=5.0)
    ran: list[int] = []

    async def run() -> None:
        async def one(i: int) -> None:
            async with limits.slot("k"):
                await asyncio.sleep(0.001)
                ran.append(i)

        await asyncio.gather(*(one(i) for i in range(5)))

    asyncio.run(run())
    assert sorted(ran) == [0, 1, 2, 3, 4]
