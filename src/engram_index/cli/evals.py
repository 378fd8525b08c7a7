"""`eval scifact`: retrieval quality on SciFact through the engine and the faces' ranking."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
)

from engram_index.cli.common import (
    console, eval_group, store_option,
)


@eval_group.command("scifact")
@click.option("--data-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="The SciFact folder (corpus.jsonl, queries.jsonl, qrels.tsv, *.npy).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--half", type=click.Choice(["all", "even", "odd"]), default="all", show_default=True,
              help="Score only the queries at even or odd positions (tuning / held-out halves).")
@click.option("--all-words", is_flag=True, help="Search every query word, not only its content words (as before).")
@store_option
def eval_scifact(data_dir: Path, as_json: bool, half: str, all_words: bool, store: str | None) -> None:
    """nDCG@10 and Recall@100 for keyword, vector, hybrid-convex and hybrid-rrf.

    Example: engram-index eval scifact --data-dir ../shared/data/scifact --json
    """
    from engram_index.evaluation import evaluate, load_scifact

    ids = None
    if half != "all":
        _, queries, _ = load_scifact(data_dir)
        ids = {q["_id"] for i, q in enumerate(queries) if i % 2 == (0 if half == "even" else 1)}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("eval", total=None)
        result = evaluate(data_dir, lambda name, done, total: bar.update(task, description=name, completed=done, total=total), ids,
                          content_only=not all_words, store=store)
    if as_json:
        click.echo(json.dumps(result))
        return
    out = Console()
    out.print(f"{'method':<16}{'nDCG@10':>10}{'Recall@100':>12}")
    for name, scores in result.items():
        out.print(f"{name:<16}{scores['ndcg@10']:>10.4f}{scores['recall@100']:>12.4f}")
