"""Under ENGRAM_TEST_STORE=postgresql the garden.engram suite runs on PostgreSQL: every data directory's
records in a database of its own, whether a test opens it in process or serves it with serve_command
(a test that runs other CLI commands as processes keeps their SQLite records)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram_index.collections import Collections
from engram_index.store.opening import RECORDS_FILE
from tests.conftest import _LANE_SERVER, lane_store


# Package scope: the patch holds while this package's tests run and is undone before any other
# package's (in one PostgreSQL lane session the Kindgi and v5 suites keep their own stores).
@pytest.fixture(scope="package", autouse=True)
def garden_records_on_the_chosen_store(request: pytest.FixtureRequest) -> Iterator[None]:
    """Collections opened without a store (by a test, an app, the CLI in process) use the lane's database."""
    if os.environ.get("ENGRAM_TEST_STORE") != "postgresql":
        yield
        return
    _LANE_SERVER.append(request.getfixturevalue("postgres_server"))
    original = Collections.__init__

    def on_the_lane(self: Collections, data_dir: Path, *args: Any, store: str | None = None, **options: Any) -> None:
        # A directory a test's own CLI process (not serve_command's) filled with SQLite records stays on SQLite.
        embedded = (data_dir / RECORDS_FILE).exists()
        original(self, data_dir, *args, store=store or (None if embedded else lane_store(data_dir)), **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Collections, "__init__", on_the_lane)
        yield
    _LANE_SERVER.clear()
