"""`engram-index search`: a space searched in-process, by the service's own rules, beside a running
service if one owns the data directory."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from engram_index.cli.common import DATA_HELP, console, load_progress, main, make_embedder, store_option
from engram_index.collections import Collections
from engram_index.errors import BadRecord, EngramError, StorageError

def existing_data_dir(data: Path, store: str | None = None) -> Path:
    """The data directory of a read command, which must exist and hold a record store (or cache `store`)."""
    if store is not None:
        data.mkdir(parents=True, exist_ok=True)
        return data
    if not (data / "records.sqlite").is_file():
        what = "does not exist" if not data.exists() else "holds no record store (records.sqlite)"
        raise click.ClickException(f"the data directory {data} {what}: check --data")
    return data


@contextmanager
def reading(data: Path, store: str | None = None) -> Iterator[Collections]:
    """The data directory opened for a read command: as its owner when free, else read-only
    beside the process that owns it (a running service)."""
    existing_data_dir(data, store)
    try:
        spaces = Collections(data, store=store)
    except StorageError as exc:
        if "in use" not in exc.message:
            raise
        console.print(f"[dim]{data} is in use by a running service: reading beside it")
        spaces = Collections(data, read_only=True, lock=False, store=store)
    try:
        yield spaces
    finally:
        spaces.close()


def load_index(spaces: Collections, uri: str) -> None:
    """Load the space's index, with a progress bar (beside a running service whose keyword index is
    not current on disk, it is built in memory from the records)."""
    bar, update = load_progress()
    with bar:
        spaces.index(uri, update)


@main.command()
@click.argument("space_uri")
@click.argument("query", required=False)
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), required=True, help=DATA_HELP)
@click.option("--mode", type=click.Choice(["hybrid", "vector", "keyword"]),
              help="As the service decides: hybrid with a vector (or text it can embed), else keyword.")
@click.option("--vector", "vector_b64", help="Query vector: f16le, base64url without padding (engram-index embed --text).")
@click.option("--fusion", type=click.Choice(["convex", "rrf"]), default="convex", show_default=True)
@click.option("--limit", type=click.IntRange(1, 50), default=10, show_default=True)
@click.option("--author", help="Only memories by this DID.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeatable; all must match).")
@click.option("--since", help="Only memories created at or after this RFC 3339 time.")
@click.option("--embedder", "embedder_spec", default="auto", show_default=True,
              help="Embeds text alone when it runs the space's model, as serve does: auto, local, none, …")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@store_option
def search(
    space_uri: str, query: str | None, data: Path, mode: str | None, vector_b64: str | None, fusion: str,
    limit: int, author: str | None, tags: tuple[str, ...], since: str | None, embedder_spec: str, as_json: bool,
    store: str | None,
) -> None:
    """Search a space in-process and print each result with its explanation.

    The same rule as the service's searchMemories: text alone is embedded and searched hybrid when
    the embedder runs the space's model, and by keyword otherwise. Works while a service runs.
    Example: engram-index search at://did:plc:abc/space/garden.engram.space/notes "HTTPServer timeout" --data ./data
    """
    from engram_index.engram.api.embedding import QueryEmbedding
    from engram_index.engram.api.search import build_request
    from engram_index.engram.records import parse_space_uri

    try:
        parse_space_uri(space_uri)
    except BadRecord as exc:
        raise click.ClickException(exc.message) from exc
    params: dict[str, Any] = {"space": space_uri, "limit": limit, "tags": list(tags)}
    for name, value in (("q", query), ("mode", mode), ("author", author), ("since", since), ("vector", vector_b64)):
        if value is not None:
            params[name] = value
    embedder = make_embedder(embedder_spec) if query and not vector_b64 and mode != "keyword" else None
    try:
        with reading(data, store) as spaces:
            info = spaces.info(space_uri)
            if vector_b64 is not None and info.model is not None:
                # The operator vouches for the vector's model: the space's.
                params.update(model=info.model.model, modelDigest=info.model.digest)
            req = asyncio.run(build_request(params, info, QueryEmbedding(embedder)))
            load_index(spaces, space_uri)
            result = spaces.search(space_uri, dataclasses.replace(req, fusion=fusion))  # type: ignore[arg-type]
    except EngramError as exc:
        raise click.ClickException(exc.message) from exc
    finally:
        if embedder is not None:
            embedder.close()
    from engram_index.engram.views import hit_view

    views = [hit_view(h, result.mode) for h in result.hits]
    if as_json:
        click.echo(json.dumps({"mode": result.mode, "approximate": result.approximate, "memories": views},
                              ensure_ascii=False, indent=1))
        return
    # Not on a terminal, lines are not wrapped: a URI stays whole for grep and cut.
    out = Console(soft_wrap=not sys.stdout.isatty())
    out.print(f"[bold]{len(views)} results[/] (mode {result.mode}{', approximate' if result.approximate else ''})")
    for n, view in enumerate(views, 1):
        match = view.get("match", {})
        out.print(f"\n[bold]{n}.[/] {view['uri']}  [dim]{view['createdAt']}[/]")
        parts = []
        if "vector" in match or "similarity" in view:
            vec = match.get("vector", {})
            parts.append(f"similarity {view.get('similarity')}" + (f" (rank {vec['rank']})" if vec else ""))
        if "keyword" in match:
            kw = match["keyword"]
            terms = ", ".join(f"{t['term']} [{t['kind']}/{t['field']}]" for t in kw["terms"])
            parts.append(f"bm25×100 {kw['score']} (rank {kw['rank']}): {terms}")
        if "fusion" in match:
            parts.append(f"fusion {match['fusion']}")
        out.print("   " + " · ".join(parts), markup=False)
        snip = match.get("snippet")
        if snip:
            out.print("   " + _highlight(snip["text"], snip["highlights"]))
        elif view["text"]:
            out.print("   " + view["text"][:200], markup=False)


def _highlight(text: str, highlights: list[dict[str, int]]) -> str:
    """Mark the highlighted byte ranges of a snippet for the terminal."""
    from rich.markup import escape

    raw = text.encode()
    out, pos = [], 0
    for h in highlights:
        out.append(escape(raw[pos : h["byteStart"]].decode()))
        out.append("[bold reverse]" + escape(raw[h["byteStart"] : h["byteEnd"]].decode()) + "[/]")
        pos = h["byteEnd"]
    out.append(escape(raw[pos:].decode()))
    return "".join(out)
