"""Run an ASGI app on a real uvicorn server on a free loopback port, in a background thread."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from starlette.types import ASGIApp

from engram_index.envelopes import envelope_for
from engram_index.protocol import ServeConfig
from engram_index.server import uvicorn_options  # as `engram-index serve` runs it


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_answering(url: str, timeout_s: float, proc: subprocess.Popen[bytes] | None = None, poll_s: float = 0.05,
                   what: str = "the server") -> None:
    """Wait until the server at `url` answers its health route; RuntimeError when `timeout_s` pass first or
    `proc` (the server's process, when given) exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(f"{url}/xrpc/_health")
            return
        except httpx.TransportError:
            if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(poll_s)


@contextmanager
def serving(app: ASGIApp, *, port: int | None = None, probe: str = "/xrpc/_health", **options: Any) -> Iterator[str]:
    """Serve the app until the block ends; yields its base URL once `probe` answers.

    `options` override the served settings (uvicorn's, and `head_timeout`).
    """
    port = port or free_port()
    config = ServeConfig(app, host="127.0.0.1", port=port,
                         **{**uvicorn_options(), "log_level": "warning", "envelopes": envelope_for, **options})
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # generous: a loaded machine starts slowly; a started one answers at once
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}{probe}")
            break
        except httpx.TransportError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
