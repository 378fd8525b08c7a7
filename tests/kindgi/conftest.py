"""Fixtures of the Kindgi face's tests: a served data directory and SDK clients for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kindgi.server import Server, kindgi_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A fresh server with the hashing embedder."""
    with kindgi_server(tmp_path / "data") as running:
        yield running
