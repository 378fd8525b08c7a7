"""Work run where a query's vector is made, as soon as it is, unless the caller runs it first."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from engram_index.embed.after_vector import AfterVector


class Held(Future):
    """A Future whose done-callbacks run when the test says (as when their thread is not running yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[Any] = []

    def add_done_callback(self, fn: Any) -> None:
        self.held.append(fn)

    def fire(self) -> None:
        for fn in self.held:
            fn(self)


def recorder(ran_on: list[str], answer: object = "answer") -> Any:
    """Work that records the thread it ran on and answers `answer`."""
    def work() -> object:
        ran_on.append(threading.current_thread().name)
        return answer
    return work


def test_the_work_runs_on_the_thread_that_makes_the_vector_and_its_answer_is_the_callers() -> None:
    ran_on: list[str] = []
    vector: Future = Future()
    after = AfterVector(vector, recorder(ran_on))
    maker = threading.Thread(target=vector.set_result, args=([1.0],), name="embedder")
    maker.start()
    maker.join()
    assert after.result() == "answer"
    assert ran_on == ["embedder"]


def test_the_work_runs_at_once_here_when_the_vector_is_made_already() -> None:
    ran_on: list[str] = []
    vector: Future = Future()
    vector.set_result([1.0])
    after = AfterVector(vector, recorder(ran_on))
    assert ran_on == [threading.current_thread().name]
    assert after.result() == "answer"
    assert ran_on == [threading.current_thread().name]  # (once)


def test_a_caller_that_comes_before_the_vectors_thread_runs_the_work_itself_and_only_once() -> None:
    ran_on: list[str] = []
    vector = Held()
    after = AfterVector(vector, recorder(ran_on))
    vector.set_result([1.0])  # made, but its thread has not run what waits on it
    assert after.result() == "answer"
    vector.fire()  # its thread comes round at last: the caller took the work on already
    assert ran_on == [threading.current_thread().name]


def test_the_works_error_is_the_callers_wherever_it_ran() -> None:
    def failing() -> None:
        raise LookupError("no such collection")

    vector: Future = Future()
    after = AfterVector(vector, failing)
    threading.Thread(target=vector.set_result, args=([1.0],)).start()
    with pytest.raises(LookupError, match="no such collection"):
        after.result()
    taken = Held()
    first = AfterVector(taken, failing)
    with pytest.raises(LookupError, match="no such collection"):
        first.result()


def test_the_work_runs_when_the_vector_fails_and_meets_that_error_itself() -> None:
    vector: Future = Future()

    def work() -> object:
        return vector.result()  # (a search waits for its vector and raises its error)

    after = AfterVector(vector, work)
    vector.set_exception(RuntimeError("the embedder is down"))
    with pytest.raises(RuntimeError, match="the embedder is down"):
        after.result()
