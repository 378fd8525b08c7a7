"""Idempotency-Key lookups that skip the store for keys it cannot hold (kindgi/seen_keys.py), and never
for one it may: kept by this process, by an earlier one, or by another node of a shared store."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from engram_index.kindgi.idempotency import Claim, Idempotency, Replay
from engram_index.kindgi.schema import migrate
from engram_index.kindgi.seen_keys import SeenKeys
from engram_index.store.sqlite import Store
from tests.limits import PATIENCE_S


def test_a_key_told_of_is_never_missed_and_few_others_are_taken_for_one() -> None:
    seen = SeenKeys(bits=1 << 16)
    told = [uuid.uuid4().hex for _ in range(2000)]
    for key in told:
        seen.add(key)
    assert all(seen.may_hold(key) for key in told)
    others = [uuid.uuid4().hex for _ in range(20000)]
    assert sum(seen.may_hold(key) for key in others) < len(others) // 20  # ~1 % at this load


class CountingStore(Store):
    """The store, counting its reads of kept answers."""

    reads = 0

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if "FROM kindgi_idempotency WHERE key=" in sql:
            CountingStore.reads += 1
        return super().query(sql, params)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = CountingStore(tmp_path / "records.sqlite")
    migrate(opened)
    CountingStore.reads = 0
    yield opened
    opened.close()


def _ready(kept: Idempotency) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not kept.knows_every_key():
        assert time.monotonic() < deadline, "the kept keys were never loaded"
        time.sleep(0.01)


def test_a_key_never_seen_is_claimed_without_reading_the_store_once_the_kept_keys_are_known(store: Any) -> None:
    kept = Idempotency(store)
    try:
        _ready(kept)
        before = CountingStore.reads
        claim = kept.begin(Idempotency.scoped("t", "user:a", "POST", "/v1/memory/retrieve", "k-1"), b"{}")
        assert isinstance(claim, Claim) and CountingStore.reads == before
        kept.keep_behind(claim, 200, b'{"results": []}')
        kept.release(claim)
        assert isinstance(kept.begin(claim.key, b"{}"), Replay)  # from memory, then from the store
    finally:
        kept.close()


def test_a_key_kept_by_an_earlier_process_replays_however_far_its_loading_got(store: Any) -> None:
    first = Idempotency(store)
    keys = [Idempotency.scoped("t", "user:a", "POST", "/v1/memory/facts", f"k-{i}") for i in range(50)]
    for key in keys:
        claim = first.begin(key, b"{}")
        assert isinstance(claim, Claim)
        first.keep(claim, 201, b'{"id": "f"}')
        first.release(claim)
    first.close()
    again = Idempotency(store)
    try:
        assert all(isinstance(again.begin(key, b"{}"), Replay) for key in keys[:5])  # loading or not
        _ready(again)
        assert all(isinstance(again.begin(key, b"{}"), Replay) for key in keys)
    finally:
        again.close()


def test_over_a_shared_store_every_key_is_looked_up_in_it(store: Any) -> None:
    # Another node may keep an answer for any key: only the store knows.
    kept = Idempotency(store, shared=True)
    try:
        time.sleep(0.05)
        assert not kept.knows_every_key()
        before = CountingStore.reads
        claim = kept.begin(Idempotency.scoped("t", "user:a", "POST", "/v1/memory/retrieve", "k-2"), b"{}")
        assert isinstance(claim, Claim) and CountingStore.reads == before + 1
        kept.release(claim)
    finally:
        kept.close()

