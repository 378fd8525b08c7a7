"""Run an ASGI app on a real uvicorn server on a free loopback port, for end-to-end tests."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from engram_index.testkit.serve import free_port, serving
from tests.limits import PATIENCE_S

__all__ = ["free_port", "serving", "wait_until_loaded"]


def wait_until_loaded(url: str, *spaces: str, timeout: float = PATIENCE_S,
                      headers: Callable[[str], dict[str, str]] | None = None) -> None:
    """Wait until each space's index, loaded in the background at start, answers searches.

    `headers(space)`, when given, makes the credential headers of each probe.
    """
    for space in spaces:
        deadline = time.monotonic() + timeout
        while httpx.get(f"{url}/xrpc/garden.engram.searchMemories",
                        params={"space": space, "q": "x", "mode": "keyword"},
                        headers=headers(space) if headers else None).status_code == 503:
            assert time.monotonic() < deadline, f"{space} did not load"
            time.sleep(0.05)
