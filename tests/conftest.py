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
