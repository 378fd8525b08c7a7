"""The legs of a retrieve on their own threads: the last to finish forms the answer (kindgi/join.py)."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from engram_index.kindgi.join import Join
from tests.limits import PATIENCE_S


def test_the_last_leg_to_arrive_forms_the_answer_on_its_own_thread() -> None:
    ran_on: list[str] = []

    def form() -> str:
        ran_on.append(threading.current_thread().name)
        return "answer"

    join = Join(2, form)
    join.arrive(1)
    assert not join.done.done() and not ran_on
    last = threading.Thread(target=join.arrive, args=(0,), name="the keyword leg")
    last.start()
    last.join(PATIENCE_S)
    assert join.done.result(PATIENCE_S) == "answer" and ran_on == ["the keyword leg"]


def test_a_leg_this_retrieve_does_not_run_is_not_waited_for() -> None:
    join = Join(2, lambda: "answer", absent=[1])
    join.arrive(0)
    assert join.done.result(0) == "answer"


def test_a_failed_leg_is_the_answer_the_first_legs_error_before_the_seconds() -> None:
    formed: list[bool] = []
    join = Join(2, lambda: formed.append(True))
    join.arrive(1, ValueError("the semantic leg"))
    assert not join.done.done()  # the first leg's error, if any, comes first: it is awaited
    join.arrive(0, KeyError("the keyword leg"))
    with pytest.raises(KeyError):
        join.done.result(0)
    only_second = Join(2, lambda: formed.append(True))
    only_second.arrive(0)
    only_second.arrive(1, ValueError("the semantic leg"))
    with pytest.raises(ValueError):
        only_second.done.result(0)
    assert not formed  # no answer is formed from a failed leg


def test_an_error_while_forming_the_answer_is_the_answer() -> None:
    def fails() -> str:
        raise RuntimeError("forming failed")

    join = Join(1, fails)
    join.arrive(0)
    with pytest.raises(RuntimeError, match="forming failed"):
        join.done.result(0)


class _Retrieve:
    """What a retrieve holds: its join, whose follow-up closes over the retrieve itself."""

    join: Join[str]


def _retrieve() -> _Retrieve:
    """A retrieve whose join's follow-up forms its answer (as `Retriever.start` makes one)."""
    made = _Retrieve()
    made.join = Join(2, lambda: f"the answer of {made!r}")
    return made


@pytest.mark.parametrize("failed", [False, True])
def test_a_settled_join_lets_go_of_its_follow_up_so_a_retrieve_leaves_no_cycle_for_the_collector(
        failed: bool) -> None:
    # Each retrieve's state (bodies, vectors, futures) was cyclic garbage, kept until the collector ran:
    # ~75 objects a request, a young collection every fifth retrieve.
    gc.disable()
    try:
        retrieve = _retrieve()
        gone = weakref.ref(retrieve)
        retrieve.join.arrive(0, ValueError("a leg failed") if failed else None)
        retrieve.join.arrive(1)
        done = retrieve.join.done
        del retrieve
        assert gone() is None  # freed by its count alone: nothing refers back to it
        assert done.done()
    finally:
        gc.enable()
