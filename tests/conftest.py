"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
import simsimd

REPO = Path(__file__).resolve().parents[1]


def shared_path() -> Path:
    """Locate the shared specification and data folder (beside the checkout, or $ENGRAM_SHARED)."""
    env = os.environ.get("ENGRAM_SHARED")
    return Path(env) if env else (REPO.parent / "shared")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared folder; the suite needs it (SciFact vectors, interop vectors)."""
    path = shared_path()
    if not (path / "data" / "scifact" / "corpus.jsonl").exists():
        pytest.fail(f"shared data not found at {path}: set ENGRAM_SHARED")
    return path


@pytest.fixture(scope="session")
def scifact_dir(shared_dir: Path) -> Path:
    """The SciFact benchmark folder."""
    return shared_dir / "data" / "scifact"


@pytest.fixture
def old_data_dir(tmp_path: Path) -> Path:
    """A data directory whose (empty) record store has the 4 KB pages that older releases made."""
    import sqlite3

    data = tmp_path / "old"
    data.mkdir()
    conn = sqlite3.connect(data / "records.sqlite")
    conn.execute("PRAGMA page_size=4096")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    return data


@pytest.fixture(params=["vectorised", "avx2", "popcnt", "portable"])
def c_loops(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test on the C kernels' vectorised loops (skipped where the CPU has none), on them with the
    AVX2 scan in place of AVX-512's and with the popcnt scan in place of both (each skipped where the
    first run is that one), and on the portable ones."""
    from tests.kernel_paths import c_loops as run

    yield from run(request.node, request.param)


@pytest.fixture(params=["compiled", "python"])
def explain_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test with ASCII texts explained by the compiled explainer, then by the Python reference alone."""
    from tests.kernel_paths import explain_path as run

    yield from run(request.node, request.param)


@pytest.fixture(params=sorted(simsimd.get_capabilities()))
def simsimd_level(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test once per simsimd capability level, with only that one enabled (skipped where the CPU lacks it)."""
    from tests.kernel_paths import simsimd_level as run

    yield from run(request.node, request.param)


# A module's cost when it has no `long` mark: about what one of the suite's short tests takes, in seconds.
SHORT_TEST_S = 0.3
LOG_TAIL_BYTES = 8000  # of each served process's stderr, in a failing test's report


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules longest first (a `long(seconds)` mark, or their number of tests), each module's tests in order.

    The lanes (pytest-xdist, `--dist loadscope --no-loadscope-reorder`) take modules in this order:
    longest first, the short ones fill in at the end, so that both lanes finish together instead of
    one running a long module alone at the end.
    """
    cost: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        mark = item.get_closest_marker("long")
        cost[module] = float(mark.args[0]) if mark else cost.get(module, 0.0) + SHORT_TEST_S
    items.sort(key=lambda item: -cost[item.nodeid.split("::", 1)[0]])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                             ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the end of each served process's stderr to a failing test's report, then forget them."""
    from tests.limits import SERVED_LOGS

    report: pytest.TestReport = yield
    if report.failed:
        for log in SERVED_LOGS:
            if log.exists():
                tail = log.read_bytes()[-LOG_TAIL_BYTES:].decode("utf-8", "replace")
                report.sections.append((f"served process stderr ({log.name})", tail))
    if call.when == "teardown":
        SERVED_LOGS.clear()
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count kernel paths from every test's report (in the controller too, under pytest-xdist)."""
    from tests.kernel_paths import note

    note(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """List every kernel path the run exercised or skipped (with why), so that a run shows what it covered."""
    from tests.kernel_paths import summary_lines

    lines = summary_lines()
    if lines:
        terminalreporter.section("kernel paths")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A throwaway PostgreSQL cluster for the session; under CI=true a server that cannot start fails the run."""
    from engram_index.errors import StorageError
    from engram_index.testkit.postgres import PostgresServer

    try:
        server = PostgresServer()
    except StorageError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL could not start (CI runs every store): {exc.message}")
        pytest.skip(f"no PostgreSQL here ({exc.message}); `make test` installs it")
    yield server
    server.close()


def chosen_store(request: pytest.FixtureRequest) -> str | None:
    """The store a face suite's server runs on: a fresh PostgreSQL database when ENGRAM_TEST_STORE=postgresql
    (the whole face suite on PostgreSQL), else None (the embedded SQLite store)."""
    if os.environ.get("ENGRAM_TEST_STORE") != "postgresql":
        return None
    server = request.getfixturevalue("postgres_server")
    return str(server.database())  # type: ignore[attr-defined]


# The garden.engram suite's lane on PostgreSQL: each data directory its tests open gets a database of
# its own (tests/engram/conftest.py sends every Collections opened without a store there).
_LANE_DATABASES: dict[Path, str] = {}
_LANE_SERVER: list[object] = []


def lane_store(data_dir: Path) -> str | None:
    """The PostgreSQL database a data directory's records live in under ENGRAM_TEST_STORE=postgresql (None:
    its own SQLite file), made on first use."""
    if os.environ.get("ENGRAM_TEST_STORE") != "postgresql" or not _LANE_SERVER:
        return None
    key = data_dir.resolve()
    if key not in _LANE_DATABASES:
        _LANE_DATABASES[key] = str(_LANE_SERVER[0].database())  # type: ignore[attr-defined]
    return _LANE_DATABASES[key]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """Run the test on each store: None (the embedded SQLite) and a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return None
    server = request.getfixturevalue("postgres_server")
    return str(server.database())  # type: ignore[attr-defined]
