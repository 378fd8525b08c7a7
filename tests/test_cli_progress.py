"""Long commands show a progress bar on a terminal's stderr, and only there: stdout stays their output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rich.console import Console

from engram_index import cli
import engram_index.cli.common  # noqa: F401 (cli.common, read by the fixture)
from engram_index.cli import main
from engram_index.cli.keys import PROGRESS_MIN_KEYS
from engram_index.keys import KeyStore

SPACE = "at://did:plc:progress2progress2progres/space/garden.engram.space/p"


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make rich treat the command's stderr as an interactive terminal (what a person running it has)."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("TTY_INTERACTIVE", "1")
    # The commands' console was made at import, before the variables were set: one made now reads them,
    # in every command module that holds the shared one.
    shared, fresh = cli.common.console, Console(stderr=True)
    for name, module in list(sys.modules.items()):
        if name.startswith("engram_index.cli") and getattr(module, "console", None) is shared:
            monkeypatch.setattr(module, "console", fresh)


def test_listing_many_keys_shows_a_bar_on_stderr_and_only_keys_on_stdout(tmp_path: Path, terminal: None) -> None:
    store = KeyStore(tmp_path)
    for _ in range(PROGRESS_MIN_KEYS):
        store.create("kindgi", {"tenant": "t"})
    result = CliRunner().invoke(main, ["keys", "list", "--data", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert "listing keys" in result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == PROGRESS_MIN_KEYS and all(json.loads(line)["face"] == "kindgi" for line in lines)


def test_listing_a_few_keys_shows_no_bar(tmp_path: Path, terminal: None) -> None:
    KeyStore(tmp_path).create("kindgi", {"tenant": "t"})
    result = CliRunner().invoke(main, ["keys", "list", "--data", str(tmp_path)])
    assert result.exit_code == 0 and "listing keys" not in result.stderr


def test_listing_keys_off_a_terminal_shows_no_bar(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    for _ in range(PROGRESS_MIN_KEYS):
        store.create("kindgi", {"tenant": "t"})
    result = CliRunner().invoke(main, ["keys", "list", "--data", str(tmp_path), "--json"])
    assert result.exit_code == 0 and "listing keys" not in result.stderr


def test_embed_shows_a_bar_on_stderr(tmp_path: Path, terminal: None) -> None:
    texts = tmp_path / "q.jsonl"
    texts.write_text("".join(json.dumps({"text": f"query {i}"}) + "\n" for i in range(300)))
    out = tmp_path / "q.npy"
    result = CliRunner().invoke(main, ["embed", "--input", str(texts), "--field", "text", "--kind", "query",
                                       "--out", str(out), "--embedder", "hashing:16"])
    assert result.exit_code == 0, result.output
    assert "embedding" in result.stderr and out.exists()


def test_import_shows_a_bar_on_stderr(tmp_path: Path, terminal: None) -> None:
    records = tmp_path / "r.jsonl"
    records.write_text("".join(json.dumps({"text": f"memory {i}", "createdAt": "2026-01-01T00:00:00Z"}) + "\n"
                               for i in range(50)))
    result = CliRunner().invoke(main, ["import", SPACE, str(records), "--data", str(tmp_path / "data")])
    assert result.exit_code == 0, result.output
    assert "importing" in result.stderr
