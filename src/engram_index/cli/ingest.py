"""The commands that put records in: `import` (JSONL into a space) and `embed` (texts to vectors)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from engram_index.engine.types import ModelIdentity
from engram_index.errors import EngramError
from engram_index.engram.records import parse_space_uri
from engram_index.cli.common import (
    DATA_HELP, console, main,
    make_embedder, model_of, open_data, store_option,
)


@main.command("import")
@click.argument("space_uri")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), required=True, help=DATA_HELP)
@click.option("--model", help="The space's embedding model name (e.g. all-MiniLM-L6-v2).")
@click.option("--model-digest", help="The exact model build, e.g. sha256:<hex>.")
@click.option("--dims", type=click.IntRange(1, 16000), help="The model's dimensions.")
@click.option("--document-prefix", help="Prefix the space's authors embed documents with.")
@click.option("--query-prefix", help="Prefix queries are embedded with.")
@click.option("--embed", is_flag=True, help="Embed records that have no embedding (with --embedder).")
@click.option("--embedder", "embedder_spec", default="local", show_default=True,
              help="Embedder for --embed: local, hashing:DIMS, ollama:MODEL:DIMS[@URL], openai:MODEL:DIMS:DIGEST@URL.")
@click.option("--batch", "batch_lines", type=click.IntRange(1, 100_000), default=1000, show_default=True,
              help="Lines written (and acknowledged) together.")
@store_option
def import_cmd(
    space_uri: str,
    file: Path,
    data: Path,
    model: str | None,
    model_digest: str | None,
    dims: int | None,
    document_prefix: str | None,
    query_prefix: str | None,
    embed: bool,
    embedder_spec: str,
    batch_lines: int,
    store: str | None,
) -> None:
    """Import garden.engram.memory records, one JSON object per line.

    Each committed batch is acknowledged: on a terminal in the progress bar, otherwise as a line
    on stdout ("committed lines 1-N: M records durable ..."); what was acknowledged survives a crash.

    Example: engram-index import at://did:plc:abc/space/garden.engram.space/notes notes.jsonl
    --data ./data --model all-MiniLM-L6-v2 --model-digest sha256:53aa… --dims 384
    """
    from engram_index.engram.importer import Committed, import_jsonl

    given = [model is not None, model_digest is not None, dims is not None]
    if any(given) and not all(given):
        raise click.UsageError("--model, --model-digest and --dims go together")
    identity = ModelIdentity(model, model_digest, dims) if all(given) else None  # type: ignore[arg-type]
    try:
        parse_space_uri(space_uri)
        embedder = make_embedder(embedder_spec) if embed else None
        if embed and embedder is None:
            raise click.UsageError("--embed needs an embedder (--embedder)")
        with open_data(data, store) as spaces:
            if embedder is not None and identity is None and model_of(spaces, space_uri) is None:
                # A space made by --embed takes the embedder's model (one declared already stays).
                identity = embedder.identity
                console.print(f"the space's model is the embedder's: {identity.model} ({identity.digest},"
                              f" {identity.dims} dims)")
            spaces.ensure_collection(space_uri, identity, document_prefix, query_prefix)
            with Progress(
                TextColumn("[bold]importing"), BarColumn(), TaskProgressColumn(),
                TransferSpeedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[durable]}"),
                console=console, transient=True, disable=not console.is_terminal,
            ) as bar:
                task = bar.add_task("import", total=file.stat().st_size, durable="")

                def acknowledge(done: Committed) -> None:
                    if console.is_terminal:
                        bar.update(task, durable=f"{done.durable} durable")
                    else:
                        click.echo(done.line())  # flushed: a reader sees each one as it happens
                        sys.stdout.flush()

                try:
                    report = import_jsonl(spaces, space_uri, file, lambda n: bar.advance(task, n), embedder,
                                          on_commit=acknowledge, batch_lines=batch_lines)
                finally:
                    if embedder is not None:
                        embedder.close()
    except EngramError as exc:
        raise click.ClickException(exc.message) from exc
    for line, reason in report.errors:
        console.print(f"[yellow]line {line}: skipped: {reason}")
    for reason, count in report.vectors_skipped.items():
        console.print(f"[yellow]{count} vectors not indexed: {reason}")
    if report.embedded:
        console.print(f"{report.embedded} records embedded")
    console.print(
        f"{report.lines} lines: {report.written} written, {report.unchanged} unchanged,"
        f" {len(report.errors)} skipped"
    )


@main.command()
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A JSONL file, one object per line (with --out).")
@click.option("--field", default="text", show_default=True, help="The field holding the text.")
@click.option("--text", "texts_given", multiple=True,
              help="Embed this text and print its vector as searchMemories' vector parameter (repeatable).")
@click.option("--kind", type=click.Choice(["query", "document"]), default=None,
              help="How to embed: query (the default with --text) or document (the default with --input).")
@click.option("--prefix", default="", help="Prefix prepended to every text (the space's query or document prefix).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="The .npy file to write (with --input).")
@click.option("--embedder", "embedder_spec", default="local", show_default=True, help="As for import --embedder.")
def embed(input_path: Path | None, field: str, texts_given: tuple[str, ...], kind: str | None, prefix: str,
          out: Path | None, embedder_spec: str) -> None:
    """Embed texts: --text prints each one's vector (f16le, base64url: searchMemories' vector),
    --input writes one field of every line as float32 L2-normalised rows of an .npy file.

    Example: engram-index embed --text "retry policy"
    Example: engram-index embed --input queries.jsonl --field text --kind query --out queries.npy
    """
    import numpy as np

    if bool(texts_given) == bool(input_path):
        raise click.UsageError("give --text, or --input with --out")
    if input_path is not None and out is None:
        raise click.UsageError("--input needs --out")
    kind = kind or ("query" if texts_given else "document")
    texts: list[str] = [prefix + t for t in texts_given]
    if input_path is not None:
        with open(input_path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                try:
                    value = json.loads(line)[field]
                except (ValueError, KeyError, TypeError) as exc:
                    raise click.ClickException(f"line {number}: no string field {field!r} ({exc})") from exc
                if not isinstance(value, str):
                    raise click.ClickException(f"line {number}: {field!r} is not a string")
                texts.append(prefix + value)
    embedder = make_embedder(embedder_spec)
    if embedder is None:
        raise click.UsageError("embed needs an embedder")
    try:
        with Progress(TextColumn("[bold]embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task("embed", total=len(texts))
            rows = []
            for start in range(0, len(texts), 256):
                chunk = texts[start : start + 256]
                fn = embedder.embed_queries if kind == "query" else embedder.embed_documents
                rows.append(np.asarray(fn(chunk), np.float32))
                bar.advance(task, len(chunk))
    except EngramError as exc:
        raise click.ClickException(exc.message) from exc
    finally:
        embedder.close()
    matrix = np.concatenate(rows) if rows else np.zeros((0, embedder.identity.dims), np.float32)
    ident = embedder.identity
    if texts_given:
        from engram_index.engram.records import encode_query_vector

        for row in matrix:
            click.echo(encode_query_vector(row))
        console.print(f"# {kind} vectors of {ident.model}: send with model={ident.model} modelDigest={ident.digest}")
        return
    assert out is not None
    np.save(out, matrix)
    console.print(f"{len(texts)} vectors of {ident.dims} dims ({ident.model}) written to {out}")
