"""Kindgi's resident memory stays bounded under writes and retrieves (the long fuzz run's RSS growth).

The long fuzz run grew the server from 79 to 232 MB in 120 s. It was no leak of Python objects
(the traced Python heap stayed at 36 MB, bench/heap.py) but glibc keeping what tantivy's indexing
and merge threads freed after each commit in their own arenas; a `malloc_trim` gave it back. The
committer now trims after commits, and this test holds the server to a bound over many commits.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from .faces_kindgi import PREFIX, serve_kindgi
from .fuzzkit import Served, rss_mb

pytestmark = pytest.mark.long(45)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

ROUNDS = 240
GROWTH_MB = 60  # with the trims: +30 MB here; without them the same rounds grew it by 109 MB
WRITERS = (("alice", {"tenantId": "acme", "projectId": "web"}), ("gina", {"tenantId": "globex", "projectId": "web"}))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_kindgi(tmp_path_factory.mktemp("kindgi-memory")) as running:
        yield running


def _round(client: httpx.Client, served: Served, n: int) -> None:
    """A fact written in each tenant (each becomes a commit), then retrieved by keyword."""
    for who, scope in WRITERS:
        auth = {"Authorization": f"Bearer {served.facts['tokens'][who]}"}
        r = client.post(f"{PREFIX}/facts", headers=auth,
                        json={"type": "note", "scope": scope, "content": f"round {n} note about tea {'x' * (n % 300)}"})
        assert r.status_code == 201, r.text
        r = client.post(f"{PREFIX}/retrieve", headers=auth, json={"mode": "keyword", "query": f"tea round {n}"})
        assert r.status_code == 200, r.text


def test_many_commits_of_writes_and_retrieves_leave_resident_memory_bounded(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        for n in range(20):  # both tenants' indexes loaded, their first segments written
            _round(client, served, n)
        time.sleep(6)
        before = rss_mb(served.pid)
        for n in range(ROUNDS):
            _round(client, served, n)
            if n % 4 == 0:
                time.sleep(0.3)  # let the committer commit: each commit is what frees memory
        # The trim after the last commit and merge comes within two trim intervals (heap.Trimmer):
        # wait for the resident set to be back within bounds, no longer than that.
        deadline = time.monotonic() + 12
        after = rss_mb(served.pid)
        while after - before >= GROWTH_MB and time.monotonic() < deadline:
            time.sleep(0.5)
            after = rss_mb(served.pid)
    print(f"\nRSS {before:.0f} -> {after:.0f} MB over {ROUNDS} rounds")
    assert after - before < GROWTH_MB, f"RSS grew from {before:.0f} to {after:.0f} MB"
