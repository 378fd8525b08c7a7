"""`engram-index import` acknowledges each committed batch, so that "acknowledged" is observable."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

from engram_index.collections import Collections

from ..reliability.records import MODEL, write_file

SRC = str(Path(__file__).resolve().parents[2] / "src")
SPACE = "at://did:plc:rel2rel2rel2rel2rel2rel2/space/garden.engram.space/acks"
ACK = re.compile(r"^committed lines 1-(\d+): (\d+) records durable \((\d+) written, (\d+) unchanged\), (\d+) skipped$")


def command(data: Path, file: Path, batch: int) -> list[str]:
    return [sys.executable, "-m", "engram_index.cli", "import", SPACE, str(file), "--data", str(data),
            "--model", MODEL[0], "--model-digest", MODEL[1], "--dims", str(MODEL[2]), "--batch", str(batch)]


def test_an_import_not_on_a_terminal_prints_a_line_per_committed_batch(tmp_path: Path) -> None:
    file = write_file(tmp_path / "in.jsonl", 35, bad_every=10)  # lines 10, 20, 30 are bad
    out = subprocess.run(command(tmp_path / "data", file, 10), capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": SRC}, check=True).stdout
    acks = [tuple(int(g) for g in ACK.match(line).groups()) for line in out.splitlines()]  # type: ignore[union-attr]
    assert acks == [(10, 9, 9, 0, 1), (20, 18, 18, 0, 2), (30, 27, 27, 0, 3), (35, 32, 32, 0, 3)]
    again = subprocess.run(command(tmp_path / "data", file, 100), capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": SRC}, check=True).stdout
    assert again.splitlines() == ["committed lines 1-35: 32 records durable (0 written, 32 unchanged), 3 skipped"]
    spaces = Collections(tmp_path / "data")
    try:
        assert spaces.store.count(spaces.info(SPACE).id) == 32
    finally:
        spaces.close()


def test_an_import_on_a_terminal_shows_progress_instead_of_lines(tmp_path: Path) -> None:
    file = write_file(tmp_path / "in.jsonl", 30)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command(tmp_path / "data", file, 10), stdout=subprocess.PIPE, stderr=follower,
                            env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"})
    os.close(follower)
    screen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the process ended and closed its side
            break
        if not chunk:
            break
        screen += chunk
    assert proc.stdout is not None
    out = proc.stdout.read()
    assert proc.wait(30) == 0
    os.close(leader)
    assert out == b""  # no acknowledgement lines on stdout
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.decode("utf-8", "replace"))
    assert "importing" in text and "30 lines: 30 written" in text
