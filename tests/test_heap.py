"""The trims that give freed heap memory back to the system."""

from __future__ import annotations

from engram_index.heap import Trimmer, release_free_memory


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_releasing_free_memory_runs_on_this_c_library() -> None:
    assert release_free_memory() in (True, False)


def test_no_trim_without_work() -> None:
    clock = Clock()
    trimmer = Trimmer(5.0, clock)
    clock.now = 100.0
    assert not trimmer.tick()


def test_a_trim_follows_work_at_most_once_per_interval_and_once_more_after_the_last_work() -> None:
    clock = Clock()
    trimmer = Trimmer(5.0, clock)
    trimmer.worked()
    clock.now = 1.0
    assert not trimmer.tick()  # within the interval of the start
    clock.now = 4.0
    trimmer.worked()
    clock.now = 5.0
    assert trimmer.tick()
    clock.now = 6.0
    assert not trimmer.tick()  # within the interval of the last trim
    clock.now = 10.0
    assert trimmer.tick()  # the one after the last work (merges end after commits)
    clock.now = 100.0
    assert not trimmer.tick()  # no work since: nothing to give back
