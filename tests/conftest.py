"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_path() -> Path:
    """Locate the shared specification and data folder (beside the checkout, or $ENGRAM_SHARED)."""
    env = os.environ.get("ENGRAM_SHARED")
    return Path(env) if env else (REPO.parent / "shared")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared folder; the suite needs it (SciFact vectors, interop vectors)."""
    path = shared_path()
    if not (path / "data" / "scifact" / "corpus.jsonl").exists():
        pytest.fail(f"shared data not found at {path}: set ENGRAM_SHARED")
    return path


@pytest.fixture(scope="session")
def scifact_dir(shared_dir: Path) -> Path:
    """The SciFact benchmark folder."""
    return shared_dir / "data" / "scifact"


@pytest.fixture
def old_data_dir(tmp_path: Path) -> Path:
    """A data directory whose (empty) record store has the 4 KB pages that older releases made."""
    import sqlite3

    data = tmp_path / "old"
    data.mkdir()
    conn = sqlite3.connect(data / "records.sqlite")
    conn.execute("PRAGMA page_size=4096")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    return data
