"""kill -9 at random points of a writing process, then check every acknowledged write.

A path is a command whose stdout acknowledges writes as they become durable; `kill_at_random`
runs it, kills it at a random moment (after a random number of acknowledgements, then a random
few milliseconds more, so that kills land mid-batch as well as between batches) and returns what
was acknowledged. `check_acknowledged` then reopens the data directory and wants each
acknowledged record present exactly once and found by its own word and by its own vector.
A served face acknowledges in its answers instead: crashkit_v5 and crashkit_kindgi kill
`engram-index serve` under their clients and check what those were answered.
"""

from __future__ import annotations

import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engram_index.collections import Collections
from engram_index.engine.types import SearchRequest

from .records import AUTHOR, MODEL, vector, word

SRC = str(Path(__file__).resolve().parents[2] / "src")
ACK = re.compile(r"^committed lines 1-(\d+): (\d+) records durable")


@dataclass
class Kill:
    """One kill: how many acknowledgements came first and through which line they vouch."""

    acks: int
    through: int
    durable: int
    finished: bool  # the process ended on its own before the kill


def import_command(data: Path, space: str, file: Path, batch: int) -> list[str]:
    """`engram-index import` of a file of tests/reliability/records lines."""
    return [sys.executable, "-m", "engram_index.cli", "import", space, str(file), "--data", str(data),
            "--model", MODEL[0], "--model-digest", MODEL[1], "--dims", str(MODEL[2]), "--batch", str(batch)]


def kill_at_random(command: list[str], rng: random.Random, max_acks: int, timeout: float = 120) -> Kill:
    """Run `command`, SIGKILL it after a random number (0..max_acks) of acknowledgements plus 0-80 ms."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": SRC})
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True)
    reader.start()
    wanted = rng.randint(0, max_acks)
    kill = Kill(0, 0, 0, False)
    deadline = time.monotonic() + timeout
    while kill.acks < wanted and time.monotonic() < deadline:
        try:
            text = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if text is None:
            kill.finished = True
            break
        _count(kill, text)
    time.sleep(rng.uniform(0, 0.08))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    reader.join(30)
    # What it said before the kill landed also counts: it was acknowledged.
    while not lines.empty():
        text = lines.get_nowait()
        if text is not None:
            _count(kill, text)
    return kill


def _lines(stream: Any, out: queue.Queue[str | None]) -> None:
    """Copy a process's output lines into a queue, then None at its end."""
    for text in stream:
        out.put(text)
    out.put(None)


def _count(kill: Kill, text: str) -> None:
    """Count one acknowledgement line."""
    match = ACK.match(text)
    if match:
        kill.acks += 1
        kill.through, kill.durable = int(match.group(1)), int(match.group(2))


def check_acknowledged(data: Path, space: str, through: int, sample: int = 60, seed: int = 0) -> int:
    """Every record of lines 1..through is stored once and found by word and vector; the count stored."""
    spaces = Collections(data)
    try:
        info = spaces.info(space)
        ids = [row[0] for row in spaces.store.query("SELECT doc_id FROM documents WHERE space_id=?", (info.id,))]
        assert len(ids) == len(set(ids)), "a record is stored twice"
        stored = set(ids)
        prefix = f"{space}/{AUTHOR}/garden.engram.memory/r"
        missing = [i for i in range(through) if f"{prefix}{i}" not in stored]
        assert not missing, f"acknowledged records lost: {missing[:10]}"
        rng = random.Random(seed)
        for i in rng.sample(range(through), min(sample, through)):
            uri = f"{prefix}{i}"
            hits = spaces.search(space, SearchRequest(mode="keyword", q=word(i), limit=3, explain=False)).hits
            assert [h.document.id for h in hits] == [uri], f"{uri} is not found by its word"
            hits = spaces.search(space, SearchRequest(mode="vector", vector=vector(i), limit=1, explain=False)).hits
            assert hits and hits[0].document.id == uri, f"{uri} is not found by its vector"
        return len(stored)
    finally:
        spaces.close()
