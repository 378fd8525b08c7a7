"""kill -9 at random points of `engram-index import`, v5 changes and Kindgi writes: nothing acknowledged is lost.

Bounded: CRASH_ROUNDS import kills (default 6) and CRASH_FACE_ROUNDS kills of a served v5 and
Kindgi face (default 3) from a fixed seed ($CRASH_SEED); by hand, more with
`python bench/crash.py --path import|v5|kindgi --kills 50`. Sync under kill -9 is
tests/engram/sync/test_sync_crash.py.
"""

from __future__ import annotations

import pytest
import os
import random
import subprocess
from pathlib import Path

from .crashkit import SRC, check_acknowledged, import_command, kill_at_random
from .crashkit_kindgi import KindgiCrash
from .crashkit_v5 import V5Crash
from .records import write_file

pytestmark = pytest.mark.long(60)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

SPACE = "at://did:plc:rel2rel2rel2rel2rel2rel2/space/garden.engram.space/crash"
ROUNDS = int(os.environ.get("CRASH_ROUNDS", "6"))
FACE_ROUNDS = int(os.environ.get("CRASH_FACE_ROUNDS", "3"))
SEED = int(os.environ.get("CRASH_SEED", "18"))
RECORDS, BATCH = 3000, 250


def test_every_import_batch_acknowledged_before_a_kill_9_is_there_once_and_searchable(tmp_path: Path) -> None:
    file = write_file(tmp_path / "in.jsonl", RECORDS)
    data = tmp_path / "data"
    rng = random.Random(SEED)
    acknowledged = 0
    kills = []
    for _ in range(ROUNDS):
        # Each run starts over on the same data directory, as an operator would rerun the import.
        kill = kill_at_random(import_command(data, SPACE, file, BATCH), rng, max_acks=RECORDS // BATCH)
        kills.append(kill)
        acknowledged = max(acknowledged, kill.through)
        stored = check_acknowledged(data, SPACE, acknowledged, seed=rng.randint(0, 10**6))
        assert stored >= kill.durable
    assert any(0 < k.through < RECORDS for k in kills), "no kill landed midway through an import"
    subprocess.run(import_command(data, SPACE, file, BATCH), check=True, capture_output=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": SRC})
    assert check_acknowledged(data, SPACE, RECORDS) == RECORDS


def test_every_v5_change_acknowledged_before_a_kill_9_holds_once_and_none_lands_half(tmp_path: Path) -> None:
    run = V5Crash(tmp_path / "data", seed=SEED)
    for _ in range(FACE_ROUNDS):
        run.round(max_delay=1.0, max_batch=12)
    assert any(r.unfinished_at_kill for r in run.rounds), "no kill landed while documents were processing"
    assert set(run.kinds) - {"add", "batch"}, "the writers sent nothing but adds"
    counts = run.finish()
    assert run.problems == []
    assert counts["acknowledged"] > 0 and counts["lost"] == 0


def test_every_kindgi_change_acknowledged_before_a_kill_9_is_there_once_and_its_key_replays(tmp_path: Path) -> None:
    run = KindgiCrash(tmp_path / "data", seed=SEED)
    for _ in range(FACE_ROUNDS):
        run.round(max_delay=1.0, replay_sample=20)
    assert any(r.cut_off for r in run.rounds), "no kill landed while a change was in flight"
    counts = run.finish()
    assert run.problems == []
    assert counts["acknowledged"] > 0 and counts["replayable"] > 0  # each replayed at the end, none a problem
