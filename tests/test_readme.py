"""Every code block of README.md runs as written after `make run`, in a directory laid out like a fresh clone.

`make run` itself runs first (on a free port: the one rewrite made to the blocks is that port),
then each block in order: `sh` blocks with bash (`set -e -o pipefail`, the venv not on PATH unless a
block activates it), `python` blocks with the venv's Python. `text` and `json` blocks are listings
(JSON ones must parse). A block preceded by `<!-- readme-test: skip (why) -->` is not run; any other
fence language fails the test, so that every new block is either run or skipped on purpose.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from engram_index.testkit.serve import free_port

pytestmark = pytest.mark.long(20)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SKIP = re.compile(r"<!-- readme-test: skip \((.+?)\) -->\s*$")
RUN = {"sh": "bash", "bash": "bash", "python": "python"}
LISTINGS = {"text", "json"}
# What `make run` reads from a clone (linked, not copied: the venv is this checkout's).
CLONE = ("Makefile", "pyproject.toml", "setup.py", "src", "examples", "README.md", ".venv")


@dataclass(frozen=True)
class Block:
    """One fenced block of the README: its language, text, first line number and skip reason."""

    language: str
    text: str
    line: int
    skip: str | None


def blocks(markdown: str) -> list[Block]:
    """Every fenced block, with the skip marker of the line before its fence."""
    out: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if fence is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        marker = SKIP.match(lines[i - 1]) if i > 0 else None
        out.append(Block(fence.group(1), "\n".join(lines[i + 1:end]) + "\n", i + 1,
                         marker.group(1) if marker else None))
        i = end + 1
    return out


def test_the_readme_parser_finds_languages_and_skip_markers() -> None:
    found = blocks("x\n<!-- readme-test: skip (never ends) -->\n```sh\nmake run\n```\n```python\nprint(1)\n```\n")
    assert found == [Block("sh", "make run\n", 3, "never ends"), Block("python", "print(1)\n", 6, None)]


def test_every_readme_block_is_run_skipped_on_purpose_or_a_listing() -> None:
    for block in blocks(README.read_text()):
        if block.skip is None:
            assert block.language in RUN or block.language in LISTINGS, (
                f"README line {block.line}: tag the block sh, python, text or json, or mark it skipped")
        if block.language == "json" and block.skip is None:
            json.loads(block.text)


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """A clone-like directory where `make run` serves the demo space on a free port."""
    clone = tmp_path_factory.mktemp("clone")
    for name in CLONE:
        (clone / name).symlink_to(REPO / name)
    port = free_port()
    log = (clone / "make-run.log").open("wb")
    proc = subprocess.Popen(["make", "run", f"PORT={port}"], cwd=clone, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # its own group: serve and make stop together
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/xrpc/_health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, (clone / "make-run.log").read_text()
            assert time.monotonic() < deadline, "make run did not serve in time"
            time.sleep(0.2)
        yield clone, port
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as a user stops it
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()


def fresh_shell_env(clone: Path) -> dict[str, str]:
    """The environment of a new terminal: this test's venv is not on PATH, nor active."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    venvs = {str(REPO / ".venv" / "bin"), str(clone / ".venv" / "bin")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and os.path.realpath(p) not in {os.path.realpath(v) for v in venvs})
    return env


RUNNABLE = [b for b in blocks(README.read_text()) if b.skip is None and b.language in RUN]


@pytest.mark.parametrize("block", RUNNABLE, ids=[f"line-{b.line}" for b in RUNNABLE])
def test_the_readme_block_runs_as_written_after_make_run(block: Block, made_run: tuple[Path, int]) -> None:
    clone, port = made_run
    text = block.text.replace("127.0.0.1:8080", f"127.0.0.1:{port}")  # the one rewrite: the free port
    if RUN[block.language] == "bash":
        assert shutil.which("bash")
        command = ["bash", "-c", "set -e -o pipefail\n" + text]
    else:
        command = [str(clone / ".venv" / "bin" / "python"), "-c", text]
    result = subprocess.run(command, cwd=clone, env=fresh_shell_env(clone), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"README line {block.line}:\n{result.stdout}\n{result.stderr}"
    assert '"error":' not in result.stdout, f"README line {block.line} got an error answer:\n{result.stdout}"
