"""What every command of the command line shares: the main group, its options, opening data, progress."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from engram_index.embed.base import Embedder
from engram_index.engine.types import ModelIdentity
from engram_index.errors import BadRecord, EngramError
from engram_index.engram.records import parse_space_uri
from engram_index.collections import Collections
from engram_index.llm.base import LLM, Reranker

console = Console(stderr=True)
DATA_HELP = "The data directory (SQLite records and index files; with --store, the index cache only)."
STORE_HELP = ("The shared record store, postgresql://user:password@host:port/database (default: the embedded"
              " SQLite store in --data).")
store_option = click.option("--store", envvar="ENGRAM_STORE", default=None, callback=lambda _c, _p, v: v and _url(v),
                            help=STORE_HELP)


def _url(value: str) -> str:
    """A --store value this build can open, else a usage error."""
    from engram_index.store.opening import check_store_url

    try:
        return check_store_url(value)
    except EngramError as exc:
        raise click.BadParameter(str(exc)) from None


@contextmanager
def open_data(data: Path, store: str | None = None) -> Iterator[Collections]:
    """Open a data directory (caching `store`, when given) for one command and close it afterwards."""
    spaces = Collections(data, store=store)
    try:
        yield spaces
    finally:
        spaces.close()


def load_progress() -> tuple[Progress, Callable[[str, int, int], None]]:
    """A progress bar for loading an index, and the callback that drives it."""
    bar = Progress(
        TextColumn("[bold]loading index"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=console, transient=True,
    )
    task = bar.add_task("load", total=None)

    def update(_uri: str, done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, update


@click.group()
@click.version_option(package_name="engram-index")
def main() -> None:
    """engram-index: hybrid memory search for garden.engram spaces."""


@main.group("eval")
def eval_group() -> None:
    """Measure retrieval quality on a benchmark."""


def model_of(spaces: Collections, uri: str) -> ModelIdentity | None:
    """The space's declared model (None for a new space or one without)."""
    from engram_index.errors import UnknownSpace

    try:
        return spaces.info(uri).model
    except UnknownSpace:
        return None


def default_service_did(host: str) -> str:
    """did:web of the host alone: what a client derives from the service's URL (the port is not part of it)."""
    return f"did:web:{host}"


def llm_and_reranker(llm_spec: str | None, rerank_spec: str | None) -> tuple[LLM | None, Reranker | None]:
    """The LLM and reranker that --llm and --rerank name (None when absent); a usage error when malformed."""
    from engram_index.llm.openai_compat import llm_from_spec
    from engram_index.rerank import reranker_from_spec

    try:
        llm = llm_from_spec(llm_spec) if llm_spec else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--llm") from None
    try:
        return llm, reranker_from_spec(rerank_spec, llm) if rerank_spec else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--rerank") from None


def env_spaces() -> list[str]:
    """The space URIs of $ENGRAM_SPACES (separated by commas or whitespace), checked."""
    import os
    import re

    out = []
    for text in re.split(r"[\s,]+", os.environ.get("ENGRAM_SPACES", "").strip()):
        if text:
            try:
                out.append(str(parse_space_uri(text)))
            except BadRecord as exc:
                raise click.UsageError(f"ENGRAM_SPACES: {exc.message}") from exc
    return out


def make_embedder(spec: str) -> Embedder | None:
    """The embedder an operator asked for, with command-line errors."""
    from engram_index.embed.factory import embedder_from_spec

    try:
        return embedder_from_spec(spec)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--embedder") from exc
    except EngramError as exc:
        raise click.ClickException(exc.message) from exc


def make_face_embedder(spec: str, garden_spec: str, garden: Embedder | None) -> Embedder | None:
    """The v5 and Kindgi faces' embedder an operator asked for, with command-line errors."""
    from engram_index.embed.factory import face_embedder_from_spec

    try:
        return face_embedder_from_spec(spec, garden_spec, garden)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--face-embedder") from exc
