"""A short run of bench/load.py's open loop: admission is exact (no timing is asserted).

Twice the admitted rate for a few seconds against a served space: every answer is a 200 or a
RateLimitExceeded 429 in the envelope, every request is answered, and no more are admitted than
the token bucket allows over the run. The 60-second run at twice capacity is by hand.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from engram_index.testkit.serve import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "load.py"


def load_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_load", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_twice_the_admitted_rate_is_refused_exactly_with_429s_and_nothing_goes_unanswered(tmp_path: Path) -> None:
    load = load_module()
    load.build(tmp_path, 500)
    port, rate = free_port(), 10.0
    proc = load.serve(tmp_path, port, rate, rate)
    try:
        result = asyncio.run(load.open_loop(port, 4.0, 2 * rate, proc.pid))
    finally:
        proc.terminate()
        proc.wait(30)
    assert result.unanswered == 0
    assert set(result.statuses) <= {200, 429} and result.statuses[429] > 0
    assert set(result.names) == {"RateLimitExceeded"}
    assert 0 < result.statuses[200] <= load.admitted_bound(rate, rate, result.window)
    assert result.sent == int(2 * rate * 4.0)
