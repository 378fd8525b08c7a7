"""`engram-index eval locomo`: LoCoMo evidence recall through every face, over HTTP (locomo_faces.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from engram_index.cli.common import console, eval_group
from engram_index.locomo import KS

FACE_NAMES = ("garden.engram", "supermemory", "kindgi")


def _table(result: dict[str, dict[str, Any]]) -> Table:
    """Per face and mode: R@5 / R@10 / R@20 overall, then R@10 per question category."""
    categories = sorted({c for modes in result.values() for t in modes.values() for c in t["categories"]})
    table = Table(title="LoCoMo evidence recall (R@k over distinct turns)")
    table.add_column("face")
    table.add_column("mode")
    for k in KS:
        table.add_column(f"R@{k}", justify="right")
    for c in categories:
        table.add_column(f"R@10 {c}", justify="right")
    for face, modes in result.items():
        for mode, scores in modes.items():
            cats = scores["categories"]
            table.add_row(face, mode, *(f"{scores[f'R@{k}']:.3f}" for k in KS),
                          *(f"{cats[c]['R@10']:.3f}" if c in cats else "-" for c in categories))
    return table


@eval_group.command("locomo")
@click.option("--data-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="The LoCoMo folder (locomo-dev.json, or one .json file in LoCoMo's layout).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--faces", default=",".join(FACE_NAMES), show_default=True,
              help="Comma-separated faces to run: garden.engram, supermemory, kindgi.")
@click.option("--limit-conversations", type=click.IntRange(1), default=None,
              help="Only the first N conversations (quick runs).")
@click.option("--embedder", "embedder_spec", default="local", show_default=True,
              help="The embedder of the server and of the garden.engram authority: local, hashing:DIMS, none, ...")
def eval_locomo(data_dir: Path, as_json: bool, faces: str, limit_conversations: int | None,
                embedder_spec: str) -> None:
    """Evidence R@5/R@10/R@20 of every face and mode, each driven as its clients drive it.

    Example: engram-index eval locomo --data-dir ../shared/data/locomo-dev
    """
    from engram_index.embed.factory import embedder_from_spec
    from engram_index.locomo import load
    from engram_index.locomo_faces import run

    chosen = tuple(f.strip() for f in faces.split(",") if f.strip())
    unknown = [f for f in chosen if f not in FACE_NAMES]
    if unknown or not chosen:
        raise click.BadParameter(f"unknown face {unknown[0] if unknown else '(none)'}: use "
                                 + ", ".join(FACE_NAMES), param_hint="--faces")
    try:
        embedder = embedder_from_spec(embedder_spec)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--embedder") from exc
    try:
        conversations = load(data_dir, limit_conversations)
    except (OSError, ValueError, KeyError) as exc:
        raise click.ClickException(f"cannot read the LoCoMo data in {data_dir}: {exc}") from exc
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("starting", total=None)
        result = run(conversations, embedder, chosen,
                     lambda what, done, total: bar.update(task, description=what, completed=done, total=total))
    if as_json:
        click.echo(json.dumps(result))
        return
    wide = Console()
    wide.width = max(wide.width, 150)  # the table, unwrapped, even when piped
    wide.print(_table(result))
