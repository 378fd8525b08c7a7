"""Fixtures of the Kindgi face's tests: a served data directory and SDK clients for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import chosen_store
from tests.kindgi.server import Server, kindgi_server


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Server]:
    """A fresh server with the hashing embedder (on PostgreSQL when ENGRAM_TEST_STORE=postgresql)."""
    with kindgi_server(tmp_path / "data", store=chosen_store(request)) as running:
        yield running
