"""Quick contract fuzzing of every face (the long run: `python bench/fuzz.py --face engram --seconds 600`).

Bounded: a fixed number of generated calls per face, from a fixed seed ($FUZZ_SEED changes it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .faces import FACES
from .fuzzkit import Served, Tally, alive, fuzz, fuzz_raw, settled_rss_mb

pytestmark = pytest.mark.long(50)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "400"))
RAW_EXAMPLES = int(os.environ.get("FUZZ_RAW_EXAMPLES", "150"))
SEED = int(os.environ.get("FUZZ_SEED", "18"))
RSS_GROWTH_MB = 64  # what "flat" allows over a quick run (floor to floor): caches fill, nothing grows per request


@pytest.fixture(scope="module", params=sorted(FACES))
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Served]]:
    face = FACES[request.param]
    with face.serve(tmp_path_factory.mktemp(face.name)) as running:
        yield face.name, running


def test_generated_calls_get_no_5xx_only_enveloped_errors_and_schema_valid_answers(served: tuple[str, Served]) -> None:
    name, running = served
    face = FACES[name]
    warm = Tally()
    fuzz(face, running, warm, examples=50, seed=SEED)  # warm caches before measuring memory
    before = settled_rss_mb(running.pid)
    tally = Tally()
    fuzz(face, running, tally, examples=EXAMPLES, seed=SEED + 1)
    after = settled_rss_mb(running.pid)
    print(f"\n{name}: {tally.requests} calls, statuses {dict(sorted(tally.statuses.items()))}, "
          f"RSS {before:.0f} -> {after:.0f} MB")  # shown with pytest -s
    assert tally.violations == []
    assert tally.requests >= EXAMPLES
    assert len(tally.statuses) > 2 and tally.statuses[200] > 0  # the calls reach the handlers, not only 400s
    assert alive(running, face.paths[-1])
    assert after - before < RSS_GROWTH_MB, f"RSS grew from {before:.0f} to {after:.0f} MB"


def test_malformed_http_heads_get_an_enveloped_answer_never_a_reset(served: tuple[str, Served]) -> None:
    name, running = served
    face = FACES[name]
    tally = Tally()
    fuzz_raw(face, running, tally, examples=RAW_EXAMPLES, seed=SEED)
    print(f"\n{name}: {tally.requests} raw heads, statuses {dict(sorted(tally.statuses.items()))}")
    assert tally.violations == []
    assert alive(running, face.paths[-1])


def test_the_faces_table_is_complete() -> None:
    for face in FACES.values():
        assert face.paths and callable(face.calls) and callable(face.envelope_errors)
    assert Path(__file__).with_name("faces.py").exists()
