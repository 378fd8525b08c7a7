"""A short run of bench/load.py's open loop per face: admission is exact (no timing is asserted).

Twice the admitted rate for a few seconds against each served face: every answer is a 2xx or a
429 in the face's envelope (RateLimitExceeded, rate-limit-exceeded, v5's ErrorResponse), every
request is answered, no more are admitted than the token bucket allows over the run, and every
acknowledged write is found after a restart. The 60-second runs at twice capacity are by hand.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from engram_index.testkit.serve import free_port

pytestmark = pytest.mark.long(50)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "load.py"
ADMITTED = {"engram": {200}, "v5": {200}, "kindgi": {200, 201}}


def load_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_load", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("face", ["engram", "v5", "kindgi"])
def test_twice_the_admitted_rate_is_refused_exactly_with_429s_and_nothing_goes_unanswered_or_lost(
        tmp_path: Path, face: str) -> None:
    load = load_module()
    writes = 0.0 if face == "engram" else 0.2
    work = load.build(face, tmp_path, 500 if face == "engram" else 20, writes)
    port, rate, seconds = free_port(), 10.0, 4.0
    url = f"http://127.0.0.1:{port}"
    proc = load.serve(face, tmp_path, port, 1e6, 1e6)
    try:
        load.fill(work, url, 0 if face == "engram" else 20)
    finally:
        load.stop(proc)
    proc = load.serve(face, tmp_path, port, rate, rate)
    try:
        result = asyncio.run(load.open_loop(port, seconds, 2 * rate, proc.pid, work))
    finally:
        load.stop(proc)
    assert result.unanswered == 0
    assert set(result.statuses) <= ADMITTED[face] | {429} and result.statuses[429] > 0
    assert set(result.names) == load.REFUSAL[face] and set(result.reasons) <= {"rate", "at once"}
    assert 0 < result.admitted <= load.admitted_bound(rate, rate, result.window)
    assert result.sent == int(2 * rate * seconds)
    if writes:
        assert result.acknowledged
        proc = load.serve(face, tmp_path, port, 1e6, 1e6)
        try:
            assert load.missing(work, url, result.acknowledged) == []
        finally:
            load.stop(proc)
