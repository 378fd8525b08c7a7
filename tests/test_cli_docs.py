"""Every command documents itself: help text with an example."""

import click
import pytest
from click.testing import CliRunner

from engram_index.cli import main


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out += commands(cmd, prefix + (name,))
        else:
            out.append(prefix + (name,))
    return out


@pytest.mark.parametrize("path", commands(main), ids=" ".join)
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output, f"{' '.join(path)} --help shows no example"


def test_every_command_is_mentioned_in_the_readme() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for path in commands(main):
        assert f"engram-index {' '.join(path)}" in readme, path
