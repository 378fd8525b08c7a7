"""Test servers with admission limits no fixture can reach, so that no result depends on the machine's speed.

The service's defaults (50 requests a second per key, 8 at once, 2 query embeddings a second per
authority) are right for production and wrong for a test: a fast machine's fixtures outrun them and a
slow machine's requests queue past their wait. Every test server that is not testing admission is
built here; the tests of admission pass their own limits (which these helpers keep as given).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from engram_index.admission import Admission
from engram_index.app import create_app
from engram_index.embed.base import Embedder
from engram_index.engram.api.embedding import QueryEmbedding
from engram_index.engram.api.limits import SpaceLimits
from engram_index.testkit.serve import free_port, wait_answering

# Where each served process of the running test writes its stderr: a failing test's report shows their
# ends (tests/conftest.py), since a 500's traceback is only in the server's log.
SERVED_LOGS: list[Path] = []

# Far above what any fixture sends, and slots enough for every request a test makes at once.
UNREACHABLE_RATE = 1e9
ROOMY_SLOTS = 256
ROOMY_WAIT_S = 60.0

# The same, as options of `engram-index serve` (for tests that run it as its own process).
ROOMY_SERVE_OPTIONS = (
    "--rate", str(int(UNREACHABLE_RATE)), "--burst", str(int(UNREACHABLE_RATE)), "--concurrent", str(ROOMY_SLOTS),
    "--key-rate", str(int(UNREACHABLE_RATE)), "--key-burst", str(int(UNREACHABLE_RATE)),
    "--key-concurrent", str(ROOMY_SLOTS),
)


def roomy_space_limits() -> SpaceLimits:
    """Per-space search admission that no test reaches."""
    return SpaceLimits(rate=UNREACHABLE_RATE, burst=UNREACHABLE_RATE, concurrent=ROOMY_SLOTS, queue_wait_s=ROOMY_WAIT_S)


def roomy_key_limits() -> Admission:
    """Per-key admission of the v5 and Kindgi faces that no test reaches."""
    return Admission(rate=UNREACHABLE_RATE, burst=UNREACHABLE_RATE, concurrent=ROOMY_SLOTS, queue_wait_s=ROOMY_WAIT_S)


def roomy_embedding(embedder: Embedder | None, **options: Any) -> QueryEmbedding:
    """Server-side query embedding whose rate and queue no test reaches (options as for QueryEmbedding)."""
    settings: dict[str, Any] = {"rate": UNREACHABLE_RATE, "burst": UNREACHABLE_RATE, "queue": ROOMY_SLOTS,
                                "queue_wait_s": ROOMY_WAIT_S, **options}
    return QueryEmbedding(embedder, **settings)


def roomy_app(data_dir: Path, service_did: str, **options: Any) -> Starlette:
    """`create_app` with roomy limits wherever the caller gives none (a test of admission gives its own)."""
    if options.get("limits") is None:
        options["limits"] = roomy_space_limits()
    if options.get("key_limits") is None:
        options["key_limits"] = roomy_key_limits()
    if options.get("embedding") is None:
        options["embedding"] = roomy_embedding(None)
    return create_app(data_dir, service_did, **options)


def serve_command(python: str, data: Path, port: int, *options: str) -> list[str]:
    """The command line of `engram-index serve` on a loopback port, roomy limits first (later options win)."""
    from tests.conftest import lane_store

    store = lane_store(data)  # the garden suite's lane on PostgreSQL (tests/engram/conftest.py)
    return [python, "-m", "engram_index.cli", "serve", "--data", str(data), "--port", str(port),
            *(("--store", store) if store else ()), *ROOMY_SERVE_OPTIONS, *options]


# How long a test waits for what must happen (a server's start, a sync, a document's processing, an
# index load) before it fails: generous, so that a loaded or slow machine passes, while a passing test
# never waits it out. Not for tests that check that something does NOT happen within a time.
PATIENCE_S = 120.0
REPO = Path(__file__).resolve().parents[1]


class ServeProcess:
    """`engram-index serve` as its own process (to kill with SIGKILL), restartable on the same port: the
    suite's one starter of a served process (with roomy limits, through serve_command)."""

    def __init__(self, data: Path, *extra: str) -> None:
        """Serve `data` on a free loopback port with these extra options, once `start` is called."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = serve_command(sys.executable, data, self.port, "--insecure-open", "--no-access-log", *extra)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data.with_name(f"{data.name}.serve-{self.port}.log")
        SERVED_LOGS.append(self.log)

    def start(self) -> None:
        """Start the server and wait until it answers."""
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the server without waiting (several can then start side by side, see `wait_ready`)."""
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        with self.log.open("ab") as err:  # appended to across restarts: the log of every run of this server
            self.proc = subprocess.Popen(self.command, env=env, stdout=subprocess.DEVNULL, stderr=err)

    def wait_ready(self) -> None:
        """Wait until the launched server answers."""
        assert self.proc is not None, "launch it first"
        wait_answering(self.url, PATIENCE_S, self.proc)

    def stop(self) -> None:
        """Stop the server as an operator would (SIGTERM: workers shut down) and reap it."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(PATIENCE_S)
            self.proc = None

    def kill(self) -> None:
        """SIGKILL the server (no shutdown of any kind) and reap it."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def __enter__(self) -> ServeProcess:
        """Start it, for a `with` block."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop it at the block's end."""
        self.stop()


@dataclass
class KeyedServer:
    """A served app (every face, open garden.engram spaces) and a bearer key for each of v5 and Kindgi."""

    url: str
    v5_key: str
    kindgi_key: str


@contextmanager
def keyed_server(data: Path, **serving_options: Any) -> Iterator[KeyedServer]:
    """Serve `data` with roomy limits, a v5 key reaching every namespace and a Kindgi key of acme/alice."""
    from engram_index.engram.auth import InsecureOpen
    from engram_index.keys import KeyStore
    from engram_index.testkit.serve import serving

    app = roomy_app(data, "did:web:index.example", authenticator=InsecureOpen())
    v5_key, _ = KeyStore(data).create("supermemory", {"namespaces": None})
    grants = {"tenant": "acme", "user": "alice", "orgs": [], "projects": [], "admin": False}
    kindgi_key, _ = KeyStore(data).create("kindgi", grants)
    with serving(app, **serving_options) as url:
        yield KeyedServer(url, v5_key, kindgi_key)
