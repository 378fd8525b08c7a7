"""bench/peers.py --quick: every installed system loads, answers and gets its row in the table (or says
why this CPU cannot run it)."""

from __future__ import annotations

import pytest
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

pytestmark = pytest.mark.long(40)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "peers.py"


def _systems() -> dict[str, tuple[str, ...]]:
    """The systems bench/peers.py knows, with the modules each needs."""
    spec = importlib.util.spec_from_file_location("bench_peers_registry", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: entry[2] for name, entry in module.PEERS.items()}


def test_quick_mode_prints_a_row_for_engram_index_and_every_installed_peer(scifact_dir: Path) -> None:
    systems = _systems()
    installed = [name for name, mods in systems.items() if all(importlib.util.find_spec(m) for m in mods)]
    env = {**os.environ, "COLUMNS": "250", "PYTHONIOENCODING": "utf-8"}  # the table's box characters
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--scifact", str(scifact_dir)],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("│")]
    assert "engram-index" in installed
    for name in installed:
        named = [row for row in rows if row.split("│")[1].strip().startswith(name + " (")]
        assert named, (name, proc.stdout)
        # A peer may be unable to run on this CPU (a wheel built for instructions it lacks); the
        # table then says so and why, and that is the only reason a peer may give for not running.
        if any("(not run)" in row for row in named):
            assert "unsupported here" in proc.stdout and "Illegal instruction" in proc.stdout, proc.stdout
    for name in set(systems) - set(installed):
        assert f"skipping {name}" in proc.stderr
