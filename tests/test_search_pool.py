"""The one search pool: slots, a bounded queue, and a deadline that frees a search's slot."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from engram_index.errors import Unavailable
from engram_index import search_pool
from engram_index.search_pool import SearchBusy, SearchPool, SearchTimedOut
from tests.limits import PATIENCE_S


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Held shut, a search blocks on it until the test opens it (always opened at the end)."""
    event = threading.Event()
    yield event
    event.set()


def test_a_search_runs_on_a_pool_thread_and_gives_its_answer() -> None:
    pool = SearchPool(threads=1)
    assert pool.run_sync(lambda a, b: (a + b, threading.current_thread().name), 2, 3)[0] == 5
    assert pool.run_sync(lambda: threading.current_thread().name).startswith("search")
    assert asyncio.run(pool.run(lambda x: x * 2, 21)) == 42
    pool.close()


def test_a_search_whose_deadline_passes_frees_its_slot(gate: threading.Event) -> None:
    pool = SearchPool(threads=1)
    with pytest.raises(SearchTimedOut, match="did not finish within 0.05 s") as err:
        pool.run_sync(gate.wait, deadline_s=0.05)
    assert isinstance(err.value, Unavailable) and err.value.status == 503
    # The first search still runs (the gate is shut), yet the one slot serves the next search.
    assert pool.run_sync(lambda: "next") == "next"
    assert asyncio.run(pool.run(lambda: "async next")) == "async next"
    gate.set()
    pool.close()


def test_an_async_search_whose_deadline_passes_frees_its_slot(gate: threading.Event) -> None:
    pool = SearchPool(threads=1)

    async def scenario() -> str:
        with pytest.raises(SearchTimedOut):
            await pool.run(gate.wait, deadline_s=0.05)
        return await pool.run(lambda: "next")

    assert asyncio.run(scenario()) == "next"
    gate.set()
    pool.close()


def test_while_every_spare_thread_holds_an_overrun_a_new_search_waits_for_one(gate: threading.Event) -> None:
    pool = SearchPool(threads=1, queue=4)
    for _ in range(2):  # the slot's thread and the one spare both run blocked searches
        with pytest.raises(SearchTimedOut):
            pool.run_sync(gate.wait, deadline_s=0.02)
    with pytest.raises(SearchTimedOut, match="waited for a slot"):
        pool.run_sync(lambda: "no thread is free", deadline_s=0.02)
    gate.set()  # the overruns end: their threads serve searches again
    assert pool.run_sync(lambda: "served") == "served"
    pool.close()


def test_an_async_search_queued_past_its_deadline_leaves_the_queue_and_one_granted_meanwhile_runs(
        gate: threading.Event) -> None:
    pool = SearchPool(threads=1, queue=4)

    async def scenario() -> list[str]:
        blocked = asyncio.ensure_future(pool.run(gate.wait, deadline_s=5))
        await asyncio.sleep(0.05)  # the one slot is held
        with pytest.raises(SearchTimedOut, match="waited for a slot"):
            await pool.run(lambda: "never", deadline_s=0.05)
        waiting = asyncio.ensure_future(pool.run(lambda: "granted after the wait", deadline_s=5))
        await asyncio.sleep(0.05)
        gate.set()
        await blocked
        return [await waiting, await pool.run(lambda: "next")]

    assert asyncio.run(scenario()) == ["granted after the wait", "next"]
    pool.close()


def test_beyond_the_queue_a_search_is_refused_at_once(gate: threading.Event) -> None:
    pool = SearchPool(threads=1, queue=1)
    running = threading.Thread(target=pool.run_sync, args=(gate.wait,))
    running.start()
    started = threading.Event()

    def queued() -> None:
        started.set()
        pool.run_sync(lambda: None)

    waiting = threading.Thread(target=queued)
    while pool._running == 0:  # the first search holds the slot
        threading.Event().wait(0.001)
    waiting.start()
    while not pool._waiters:  # the second waits in the queue
        threading.Event().wait(0.001)
    with pytest.raises(SearchBusy) as err:
        pool.run_sync(lambda: None)
    assert err.value.status == 503
    gate.set()
    running.join()
    waiting.join()
    pool.close()


def test_a_failing_search_gives_its_error_and_its_slot_back() -> None:
    pool = SearchPool(threads=1)

    def broken() -> None:
        raise ValueError("bad search")

    with pytest.raises(ValueError, match="bad search"):
        pool.run_sync(broken)
    assert pool.run_sync(lambda: "still serving") == "still serving"
    pool.close()


def test_fewer_than_one_thread_is_refused() -> None:
    with pytest.raises(ValueError, match="threads must be at least 1"):
        SearchPool(threads=0)


def holding_a_slot(pool: SearchPool, gate: threading.Event) -> threading.Thread:
    """A thread whose search holds one of the pool's slots until the gate opens (started, and inside)."""
    inside = threading.Event()
    running = threading.Thread(target=pool.run_sync, args=(lambda: (inside.set(), gate.wait(PATIENCE_S)),))
    running.start()
    assert inside.wait(PATIENCE_S)
    return running


def test_a_pool_is_idle_only_while_no_search_holds_a_slot(gate: threading.Event) -> None:
    pool = SearchPool(threads=1)
    assert pool.idle()
    running = holding_a_slot(pool, gate)
    assert not pool.idle()
    gate.set()
    running.join(PATIENCE_S)
    assert pool.idle()
    pool.close()


class Collection:
    """A searched collection's stand-in: what the pool keeps its last search's duration by."""


def _thread_name() -> str:
    return threading.current_thread().name


def test_a_search_from_the_loop_runs_on_its_thread_once_its_collection_was_searched_quickly() -> None:
    pool = SearchPool(threads=1, inline_max_s=PATIENCE_S)
    key = Collection()

    async def scenario() -> tuple[str, str, str]:
        first = await pool.run(_thread_name, inline_key=key)  # nothing known of the collection yet
        second = await pool.run(_thread_name, inline_key=key)
        return _thread_name(), first, second

    loop_thread, first, second = asyncio.run(scenario())
    assert first.startswith("search") and second == loop_thread
    assert pool.idle()  # the slot it took is back
    pool.close()


def test_without_a_collection_to_know_it_by_a_search_from_the_loop_runs_on_the_pool() -> None:
    pool = SearchPool(threads=1, inline_max_s=PATIENCE_S)

    async def scenario() -> list[str]:
        return [await pool.run(_thread_name) for _ in range(3)]

    assert all(name.startswith("search") for name in asyncio.run(scenario()))
    pool.close()


def test_a_collection_whose_last_search_took_longer_than_the_budget_is_searched_on_the_pool() -> None:
    pool = SearchPool(threads=1, inline_max_s=0.05)
    key = Collection()

    async def scenario() -> list[str]:
        await pool.run(_thread_name, inline_key=key)
        quick = await pool.run(_thread_name, inline_key=key)
        await pool.run(lambda: threading.Event().wait(0.2), inline_key=key)  # on the loop's thread, and slow
        return [quick, await pool.run(_thread_name, inline_key=key)]

    quick, after_slow = asyncio.run(scenario())
    assert not quick.startswith("search") and after_slow.startswith("search")
    pool.close()


def test_while_another_search_holds_a_slot_a_search_from_the_loop_runs_on_the_pool(gate: threading.Event) -> None:
    pool = SearchPool(threads=2, inline_max_s=PATIENCE_S)
    key = Collection()
    asyncio.run(pool.run(_thread_name, inline_key=key))  # known, and quick
    running = holding_a_slot(pool, gate)
    assert asyncio.run(pool.run(_thread_name, inline_key=key)).startswith("search")
    gate.set()
    running.join(PATIENCE_S)
    pool.close()


def test_a_search_failing_on_the_loops_thread_gives_its_error_and_its_slot_back() -> None:
    pool = SearchPool(threads=1, inline_max_s=PATIENCE_S)
    key = Collection()

    def broken() -> None:
        raise ValueError("bad search")

    async def scenario() -> str:
        await pool.run(_thread_name, inline_key=key)
        with pytest.raises(ValueError, match="bad search"):
            await pool.run(broken, inline_key=key)
        assert pool.idle()
        return await pool.run(_thread_name, inline_key=key)

    assert not asyncio.run(scenario()).startswith("search")
    pool.close()


def test_a_search_that_waited_for_a_slot_is_not_counted_slow_for_its_wait(gate: threading.Event) -> None:
    # A collection's time is its search's own: under load, time in the queue would keep it off the loop.
    pool = SearchPool(threads=1, inline_max_s=0.05)
    key = Collection()
    asyncio.run(pool.run(_thread_name, inline_key=key))  # known, and quick
    running = holding_a_slot(pool, gate)

    async def scenario() -> tuple[str, str]:
        queued = asyncio.ensure_future(pool.run(_thread_name, inline_key=key))  # waits for the one slot
        await asyncio.sleep(0.2)  # longer than the budget
        gate.set()
        return await queued, await pool.run(_thread_name, inline_key=key)

    waited, after = asyncio.run(scenario())
    running.join(PATIENCE_S)
    assert waited.startswith("search") and not after.startswith("search")
    pool.close()


def test_a_process_searches_on_its_loop_under_load_only_when_the_servers_processes_fill_its_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(search_pool, "usable_cores", lambda: 4)
    assert [search_pool.loop_depth_for(n) for n in (1, 3, 4, 8)] == [1, 1, 8, 8]
    assert SearchPool().loop_depth == 1  # alone, unless the app says otherwise
