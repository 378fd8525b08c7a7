"""The suite's own rule: no test server runs on the service's default admission limits unless it tests admission."""

from __future__ import annotations

import pytest
import ast
from pathlib import Path

pytestmark = pytest.mark.long(18)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
# The tests of admission itself: they build their limits on purpose.
ADMISSION_TESTS = {
    "tests/test_admission.py",
    "tests/engram/api/test_query_embedding.py",
    "tests/engram/api/test_service_rules.py",
    "tests/engram/api/test_admission_first.py",
    "tests/supermemory/test_rate_limit.py",
    "tests/kindgi/test_rate_limit.py",
}


def _modules() -> list[tuple[str, ast.Module]]:
    """Every test module but the one that builds the roomy servers, parsed."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        if name != "tests/limits.py":
            found.append((name, ast.parse(path.read_text(encoding="utf-8"), filename=name)))
    return found


def _called(node: ast.Call) -> str:
    """The name a call calls (`f(...)` or `x.f(...)`), or ''."""
    if isinstance(node.func, ast.Name):
        return node.func.id
    return node.func.attr if isinstance(node.func, ast.Attribute) else ""


def _calls_to(tree: ast.Module, callee: str) -> list[int]:
    """Lines where the module calls `callee`."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and _called(node) == callee]


def _bare_serve_lines(tree: ast.Module) -> list[int]:
    """Lines of command lines naming `serve` without spreading ROOMY_SERVE_OPTIONS."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            spread = {e.value.id for e in node.elts if isinstance(e, ast.Starred) and isinstance(e.value, ast.Name)}
            # A command line: `serve` beside the program or an option (a tuple of words holding "serve" is not one).
            command = any(isinstance(w, str) and (w.startswith("-") or "engram" in w) for w in words)
            if "serve" in words and command and "ROOMY_SERVE_OPTIONS" not in spread:
                lines.append(node.lineno)
    return lines


def test_no_test_builds_the_app_without_going_through_the_roomy_limits() -> None:
    offenders = [f"{name}:{line}" for name, tree in _modules() for line in _calls_to(tree, "create_app")]
    assert offenders == [], f"call tests.limits.roomy_app instead of create_app: {offenders}"


def test_query_embedding_is_built_by_hand_only_in_tests_of_its_admission() -> None:
    offenders = [f"{name}:{line}" for name, tree in _modules() if name not in ADMISSION_TESTS
                 for line in _calls_to(tree, "QueryEmbedding")]
    assert offenders == [], f"call tests.limits.roomy_embedding instead: {offenders}"


def test_every_serve_command_line_in_the_suite_lifts_the_default_limits() -> None:
    offenders = [f"{name}:{line}" for name, tree in _modules() for line in _bare_serve_lines(tree)]
    assert offenders == [], f"build the command with tests.limits.serve_command or ROOMY_SERVE_OPTIONS: {offenders}"


def test_the_rules_find_servers_built_on_the_defaults_and_pass_roomy_ones() -> None:
    bare = ast.parse('app = create_app(d, "did:web:x")\ncmd = [python, "-m", "engram_index.cli", "serve", "--data", d]\n')
    roomy = ast.parse('app = roomy_app(d, "did:web:x")\ncmd = [python, "serve", *ROOMY_SERVE_OPTIONS, "--data", d]\n')
    assert _calls_to(bare, "create_app") == [1] and _bare_serve_lines(bare) == [2]
    assert _calls_to(roomy, "create_app") == [] and _bare_serve_lines(roomy) == []
    words = ast.parse('probes = ("serve", "timeou")\nlater = [sys.executable, "-m", "engram_index.cli", "serve"]\n')
    assert _bare_serve_lines(words) == [2]
