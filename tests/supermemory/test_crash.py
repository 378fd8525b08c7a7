"""Nothing acknowledged is lost: kill -9 the server while it processes documents, restart, find them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from supermemory import Supermemory

from engram_index.keys import KeyStore
from engram_index.testkit.serve import free_port

SRC = str(Path(__file__).resolve().parents[2] / "src")


@contextmanager
def served(data: Path, port: int, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """`engram-index serve` in its own process, until the block ends (or the test kills it)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "from engram_index.cli import main; main()", "serve", "--data", str(data),
         "--port", str(port), "--embedder", "hashing:64", "--no-access-log", *extra],
        env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/xrpc/_health")
            break
        except httpx.TransportError:
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(20)


def test_documents_acknowledged_before_a_kill_9_are_processed_after_the_restart(tmp_path: Path) -> None:
    token, _ = KeyStore(tmp_path).create("supermemory", {"namespaces": None})
    port = free_port()
    ns = "crash"
    texts = [f"Document {i} records the unique marker zeta{i} for recall." for i in range(300)]
    with served(tmp_path, port) as proc:
        client = Supermemory(api_key=token, base_url=f"http://127.0.0.1:{port}", max_retries=0)
        accepted = [r.id for r in client.documents.batch_add(ns, documents=[{"content": t} for t in texts]).results]
        statuses = {d.system.status for d in client.list(ns, "documents", limit=100).documents}
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert statuses != {"done"}, "processing finished before the kill: the test proves nothing"
    with served(tmp_path, port):
        client = Supermemory(api_key=token, base_url=f"http://127.0.0.1:{port}", max_retries=0)
        deadline = time.monotonic() + 120
        while True:
            docs = [client.list(ns, "documents", limit=100, page=p).documents for p in (1, 2, 3)]
            status = [d.system.status for page in docs for d in page]
            if status.count("done") == len(texts):
                break
            assert "failed" not in status and time.monotonic() < deadline
            time.sleep(0.2)
        assert sorted(d.id for page in docs for d in page) == sorted(accepted)
        assert client.list(ns, "memories").pagination.total_items == len(texts)
        assert client.list(ns, "chunks").pagination.total_items == len(texts)
        time.sleep(1)  # keyword commits land within a second
        hit = client.search(ns, query="zeta137", search_mode="memories").results
        assert [r.memory for r in hit] == [texts[137]]
