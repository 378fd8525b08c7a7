"""Wakes across threads through pipes (kindgi/wakes.py): callbacks handed to an event loop, and calls
handed to a few threads, each run once, in order, whatever thread hands them."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engram_index.kindgi.wakes import LoopWakes, PipeThreads
from tests.limits import PATIENCE_S


def test_callbacks_handed_from_threads_run_on_the_loop_in_the_order_each_thread_handed_them() -> None:
    async def main() -> list[tuple[str, int, str]]:
        loop = asyncio.get_running_loop()
        wakes = LoopWakes()
        wake = wakes.of(loop)
        assert wakes.of(loop) is wake
        ran: list[tuple[str, int, str]] = []
        done = loop.create_future()

        def note(sender: str, n: int) -> None:
            ran.append((sender, n, threading.current_thread().name))
            if len(ran) == 2000:
                done.set_result(None)

        senders = [threading.Thread(target=lambda s=s: [wake.call(note, s, n) for n in range(1000)], name=s)
                   for s in ("a", "b")]
        for sender in senders:
            sender.start()
        await asyncio.wait_for(done, PATIENCE_S)
        for sender in senders:
            sender.join()
        wakes.close()
        return ran

    loop_thread = threading.current_thread().name
    ran = asyncio.run(main())
    for sender in ("a", "b"):
        assert [n for s, n, _ in ran if s == sender] == list(range(1000))
    assert {on for _, _, on in ran} == {loop_thread}


def test_calls_handed_to_pipe_threads_settle_their_futures_and_shutdown_runs_what_was_handed() -> None:
    threads = PipeThreads(2, "worker")
    futures = [threads.submit(lambda n=n: (n, threading.current_thread().name), n) for n in range(200)]
    failed = threads.submit(lambda: 1 / 0)
    results = [f.result(PATIENCE_S) for f in futures]
    assert [n for n, _ in results] == list(range(200))
    assert {name for _, name in results} <= {"worker_0", "worker_1"}
    with pytest.raises(ZeroDivisionError):
        failed.result(PATIENCE_S)
    gate = threading.Event()
    slow = threads.submit(lambda: gate.wait(PATIENCE_S))
    queued = [threads.submit(lambda n=n: n, n) for n in range(5)]
    gate.set()
    threads.shutdown(wait=True)
    assert slow.result(0) is True and [f.result(0) for f in queued] == list(range(5))
    with pytest.raises(RuntimeError):
        threads.submit(lambda: None)
