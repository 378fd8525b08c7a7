"""The moment a query's forward pass begins, told to the work beside it (embed/pass_start.py)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from engram_index.embed.hashing import HashingEmbedder
from engram_index.embed.local import MiniLMEmbedder
from engram_index.embed.pass_start import Embedding, PassStart, embed_on, pass_begins, tells_pass, wait_for_pass
from engram_index.metrics import TimedEmbedder


def test_an_embedding_tells_when_its_pass_begins_before_it_ends() -> None:
    release = threading.Event()
    seen: list[bool] = []

    def make() -> np.ndarray:
        pass_begins()
        release.wait(5)
        return np.ones(3, np.float32)

    with ThreadPoolExecutor(1) as pool:
        vector = embed_on(pool, make)
        assert vector.began.event.wait(5)
        seen.append(vector.done())
        release.set()
        assert vector.result(5).tolist() == [1.0, 1.0, 1.0]
    assert seen == [False]


def test_an_embedding_that_fails_passes_its_error_and_still_sets_the_moment() -> None:
    def make() -> np.ndarray:
        raise RuntimeError("the model is gone")

    with ThreadPoolExecutor(1) as pool:
        vector = embed_on(pool, make)
        with pytest.raises(RuntimeError, match="the model is gone"):
            vector.result(5)
    assert vector.began.event.is_set()


def test_an_embedder_that_never_says_sets_the_moment_when_it_ends() -> None:
    with ThreadPoolExecutor(1) as pool:
        vector = embed_on(pool, lambda: np.zeros(2, np.float32))
        vector.result(5)
    assert vector.began.event.is_set()


def test_pass_begins_outside_an_embedding_does_nothing() -> None:
    pass_begins()  # no PassStart handed to this thread: no error, nothing set


def test_a_pass_start_signals_only_its_own_threads_first_pass() -> None:
    start = PassStart()
    with start.signalled():
        pass_begins()
        assert start.event.is_set()
        start.event.clear()
        pass_begins()  # a second pass of the same embedding: the moment was told already
        assert not start.event.is_set()
    assert start.event.is_set()  # the end sets it in any case


def test_waiting_for_a_moment_that_never_comes_is_bounded() -> None:
    vector: Embedding[np.ndarray] = Embedding()
    began = time.monotonic()
    wait_for_pass(vector, timeout=0.05)
    assert time.monotonic() - began < 5


def test_waiting_is_skipped_for_a_vector_at_hand_or_a_finished_embedding() -> None:
    wait_for_pass(np.zeros(3, np.float32), timeout=60)
    wait_for_pass(None, timeout=60)
    done: Embedding[np.ndarray] = Embedding()
    done.set_result(np.zeros(3, np.float32))
    wait_for_pass(done, timeout=60)  # returns at once: a finished embedding's pass needs no waiting for


def alone() -> bool:
    """Whether an embedding submitted now would be the only one under way (it is ended again at once)."""
    start = PassStart()
    try:
        return start.submitting()
    finally:
        start.end()


def test_the_submitter_of_a_lone_embedding_goes_on_only_once_its_pass_has_begun() -> None:
    release = threading.Event()

    def make() -> np.ndarray:
        time.sleep(0.02)  # the embedding's own Python before its pass (tokenising), here slow on purpose
        pass_begins()
        release.wait(5)
        return np.ones(2, np.float32)

    with ThreadPoolExecutor(1) as pool:
        vector = embed_on(pool, make, timeout=30)
        assert vector.began.event.is_set() and not vector.done()  # the submitter waited for the pass
        release.set()
        vector.result(5)


def test_the_submitter_does_not_wait_while_another_embedding_is_under_way() -> None:
    first_in_pass, release_first, release_second = threading.Event(), threading.Event(), threading.Event()

    def first() -> np.ndarray:
        pass_begins()
        first_in_pass.set()
        release_first.wait(5)
        return np.zeros(2, np.float32)

    def second() -> np.ndarray:
        release_second.wait(5)  # begins its pass only once the test lets it: after embed_on returned
        pass_begins()
        return np.ones(2, np.float32)

    with ThreadPoolExecutor(2) as pool:
        one = embed_on(pool, first, timeout=30)
        assert first_in_pass.is_set()
        two = embed_on(pool, second, timeout=30)  # would wait 30 s, then find the pass not begun
        assert not two.began.event.is_set()
        release_second.set()
        release_first.set()
        assert two.result(5).tolist() == [1.0, 1.0] and one.result(5).tolist() == [0.0, 0.0]
    assert alone()  # both over: the next one is alone again


def test_an_embedding_counts_as_under_way_from_its_submission_to_its_end() -> None:
    start = PassStart()
    assert start.submitting()  # alone
    other = PassStart()
    assert not other.submitting()  # the first is under way
    assert not start.submitting()  # (asking again counts it once)
    other.end()
    other.end()  # ending twice counts once
    assert not alone()
    with start.signalled():
        pass
    assert alone() and start.event.is_set()


def test_a_cancelled_embedding_is_no_longer_under_way() -> None:
    gate = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        blocker = pool.submit(gate.wait, 5)  # the pool's one thread busy: the embedding below waits in line
        vector = embed_on(pool, lambda: np.zeros(2, np.float32), timeout=0)
        assert vector.cancel()
        gate.set()
        blocker.result(5)
    assert alone()


def test_only_an_embedder_that_tells_its_pass_is_waited_for_even_behind_the_metrics_wrapper() -> None:
    class Told(HashingEmbedder):
        TELLS_PASS = True

    assert MiniLMEmbedder.TELLS_PASS and tells_pass(Told(8)) and tells_pass(TimedEmbedder(Told(8)))
    assert not tells_pass(HashingEmbedder(8)) and not tells_pass(TimedEmbedder(HashingEmbedder(8)))
