"""A face's synchronous work runs on the handler threads: its answer, or its error, reaches the route."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engram_index.endpoints import in_thread


def test_work_runs_on_a_handler_thread_and_its_answer_or_error_comes_back() -> None:
    def work(a: int, *, b: int) -> tuple[int, str]:
        return a + b, threading.current_thread().name

    def broken() -> None:
        raise ValueError("no")

    async def run() -> tuple[int, str]:
        with pytest.raises(ValueError, match="no"):
            await in_thread(broken)
        return await in_thread(work, 1, b=2)

    total, thread = asyncio.run(run())
    assert total == 3 and thread.startswith("handler") and thread != threading.current_thread().name
