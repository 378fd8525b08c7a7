"""The engram-index command line: import, search, evaluate and serve."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
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
def _spaces(data: Path, store: str | None = None) -> Iterator[Collections]:
    """Open a data directory (caching `store`, when given) for one command and close it afterwards."""
    spaces = Collections(data, store=store)
    try:
        yield spaces
    finally:
        spaces.close()


def _load_progress() -> tuple[Progress, Callable[[str, int, int], None]]:
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
        with _spaces(data, store) as spaces:
            if embedder is not None and identity is None and _model_of(spaces, space_uri) is None:
                # A space made by --embed takes the embedder's model (one declared already stays).
                identity = embedder.identity
                console.print(f"the space's model is the embedder's: {identity.model} ({identity.digest},"
                              f" {identity.dims} dims)")
            spaces.ensure_space(space_uri, identity, document_prefix, query_prefix)
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


@main.group("eval")
def eval_group() -> None:
    """Measure retrieval quality on a benchmark."""


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


def _model_of(spaces: Collections, uri: str) -> ModelIdentity | None:
    """The space's declared model (None for a new space or one without)."""
    from engram_index.errors import UnknownSpace

    try:
        return spaces.info(uri).model
    except UnknownSpace:
        return None


@main.command()
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), required=True, help=DATA_HELP)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--service-did", default=None, help="This service's DID (default: did:web:<host>, as clients derive it from the URL).")
@click.option("--insecure-open", is_flag=True, help="Serve without checking space credentials (trusted networks only).")
@click.option("--plc-url", envvar="ENGRAM_PLC_URL", default="https://plc.directory", show_default=True,
              help="PLC directory that resolves did:plc authorities ($ENGRAM_PLC_URL).")
@click.option("--did-web-http-localhost", is_flag=True,
              help="Resolve did:web:localhost authorities over plain http (development only).")
@click.option("--rate", type=click.FloatRange(min=0.1), default=50.0, show_default=True, help="Searches a second per space.")
@click.option("--burst", type=click.FloatRange(min=1), default=100.0, show_default=True, help="Search burst per space.")
@click.option("--concurrent", type=click.IntRange(1, 256), default=8, show_default=True, help="Concurrent searches per space.")
@click.option("--key-rate", type=click.FloatRange(min=0.1), default=50.0, show_default=True,
              help="Requests a second per key of the v5 and Kindgi faces (429 beyond, with Retry-After).")
@click.option("--key-burst", type=click.FloatRange(min=1), default=100.0, show_default=True,
              help="Request burst per key of the v5 and Kindgi faces.")
@click.option("--key-concurrent", type=click.IntRange(1, 256), default=8, show_default=True,
              help="Requests running at once per key of the v5 and Kindgi faces (a 0.5 s wait, 50 ms under a "
                   "standing queue, then 429).")
@click.option("--embedder", "embedder_spec", default="auto", show_default=True,
              help="Query embedder: auto (local if installed), local, none, ollama:MODEL:DIMS[@URL], "
                   "openai:MODEL:DIMS:DIGEST@URL (key in $ENGRAM_OPENAI_KEY).")
@click.option("--face-embedder", "face_embedder_spec", default="auto", show_default=True,
              help="Embedder of the v5 and Kindgi faces: auto (the local model's int8 graph when --embedder is "
                   "the local model, else the --embedder), or any --embedder spec (local: float32).")
@click.option("--embed-authority", "embed_authorities", multiple=True,
              help="Embed queries only for spaces of this authority DID (repeatable; default: all).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Processes serving requests. Above 1, indexes are caught up first, then served read-only.")
@click.option("--sync-account", envvar="ENGRAM_SYNC_ACCOUNT", default=None,
              help="DID of the account this indexer signs in as to read spaces ($ENGRAM_SYNC_ACCOUNT).")
@click.option("--sync-password", envvar="ENGRAM_SYNC_PASSWORD", default=None,
              help="Its (app) password; prefer $ENGRAM_SYNC_PASSWORD.")
@click.option("--public-url", envvar="ENGRAM_PUBLIC_URL", default=None,
              help="This service's public https URL: space hosts send write notifications there.")
@click.option("--open-registration", is_flag=True,
              help="Let members have their spaces indexed (garden.engram.registerSpace); needs --sync-account.")
@click.option("--poll-interval", type=click.FloatRange(min=1), default=300.0, show_default=True,
              help="Seconds between polls of every synced space (the backstop for lost notifications).")
@click.option("--search-threads", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Threads running searches in each process (more contend for the GIL).")
@click.option("--access-log/--no-access-log", default=True, show_default=True,
              help="Log a line per request.")
@click.option("--llm", "llm_spec", envvar="ENGRAM_LLM", default=None,
              help="OpenAI-compatible chat model for memories, rewriteQuery and aggregate: MODEL@URL, e.g. "
                   "qwen2.5:3b@http://127.0.0.1:11434/v1 (key in $ENGRAM_LLM_API_KEY).")
@click.option("--rerank", "rerank_spec", envvar="ENGRAM_RERANK", default=None,
              help="Reranker for rerank: order: url:http://HOST/rerank#MODEL (Cohere/Jina), url:http://HOST/rerank "
                   "(TEI), or llm (key in $ENGRAM_RERANK_API_KEY).")
@click.option("--malloc-arenas", type=click.IntRange(0, 1024), envvar="MALLOC_ARENA_MAX", default=2, show_default=True,
              help="Heaps glibc's malloc may use ($MALLOC_ARENA_MAX; 0: glibc's 8 per core). Few keep the resident "
                   "set flat under load, for a few per cent of throughput.")
@click.option("--allow-private-urls", is_flag=True,
              help="Let v5 URL documents be fetched from private, loopback and link-local addresses (an "
                   "intranet); off by default, so that no caller can make the server read its own network.")
@store_option
def serve(
    data: Path, host: str, port: int, service_did: str | None, insecure_open: bool, plc_url: str,
    did_web_http_localhost: bool, rate: float, burst: float, concurrent: int, key_rate: float, key_burst: float,
    key_concurrent: int, embedder_spec: str, face_embedder_spec: str,
    embed_authorities: tuple[str, ...], workers: int, sync_account: str | None, sync_password: str | None,
    public_url: str | None, poll_interval: float, open_registration: bool, search_threads: int, access_log: bool,
    llm_spec: str | None, rerank_spec: str | None, malloc_arenas: int, allow_private_urls: bool,
    store: str | None,
) -> None:
    """Serve every face over HTTP: garden.engram XRPC, supermemory v5 (/ns) and Kindgi memory (/v1/memory).

    Example: engram-index serve --data ./data --port 8080 --service-did did:web:index.example.com
    """
    import logging

    from engram_index.engram.api.embedding import QueryEmbedding
    from engram_index.admission import Admission
    from engram_index.engram.api.limits import SpaceLimits
    from engram_index.app import create_app, space_credentials
    from engram_index.engram.auth import Authenticator, InsecureOpen
    from engram_index.heap import limit_arenas
    from engram_index.envelopes import envelope_for
    from engram_index.server import run, run_workers

    if malloc_arenas:  # before the threads start; worker processes read the variable when they start
        os.environ["MALLOC_ARENA_MAX"] = str(malloc_arenas)
        limit_arenas(malloc_arenas)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    did = service_did or default_service_did(host)
    logging.getLogger("engram_index").info(
        "service DID %s: members address requests to it (Atproto-Space-Audience)%s", did,
        "" if service_did else "; set --service-did for a public name")
    from engram_index.engram.sync.client import Account
    from engram_index.engram.sync.runner import SyncConfig

    if bool(sync_account) != bool(sync_password):
        raise click.UsageError("--sync-account and --sync-password go together")
    if open_registration and not sync_account:
        raise click.UsageError("--open-registration needs --sync-account: registered spaces are synced as that account")
    llm, reranker = _llm_and_reranker(llm_spec, rerank_spec)
    with _spaces(data, store) as opened:
        from engram_index.engram.syncstate import SyncState

        for space in _env_spaces():
            SyncState(opened.store).add_space(space, int(time.time() * 1000))
        syncing = bool(SyncState(opened.store).spaces())
    if workers > 1 and syncing:
        raise click.UsageError("spaces synced from the network are served by one process: drop --workers")
    sync = SyncConfig(Account(sync_account, sync_password) if sync_account and sync_password else None,
                      plc_url, public_url, poll_interval, did_web_http_localhost, open_registration=open_registration)
    if workers > 1:
        from engram_index.app import WORKER_CONFIG_ENV

        # Workers only read: bring every space's keyword index up to date (and compact it) first.
        with _spaces(data, store) as spaces:
            spaces.catch_up()
            from engram_index.supermemory.tables import migrate

            migrate(spaces.store)  # the v5 face's tables, which read-only workers cannot create
        os.environ[WORKER_CONFIG_ENV] = json.dumps({
            "data": str(data), "service_did": did, "insecure_open": insecure_open, "rate": rate,
            "burst": burst, "concurrent": concurrent, "key_rate": key_rate, "key_burst": key_burst,
            "key_concurrent": key_concurrent, "embedder": embedder_spec, "face_embedder": face_embedder_spec,
            "embed_authorities": list(embed_authorities), "plc_url": plc_url,
            "did_web_http_localhost": did_web_http_localhost, "search_threads": search_threads,
            "llm": llm_spec, "rerank": rerank_spec, "store": store,
        })
        run_workers("engram_index.app:worker_app", workers, host, port, access_log=access_log, envelopes=envelope_for)
        return
    embedding = QueryEmbedding(make_embedder(embedder_spec), frozenset(embed_authorities) or None)
    face_embedder = make_face_embedder(face_embedder_spec, embedder_spec, embedding.embedder)
    authenticator: Authenticator = InsecureOpen() if insecure_open else space_credentials(
        data, did, plc_url=plc_url, allow_http_localhost=did_web_http_localhost)
    app = create_app(
        data, did, authenticator=authenticator, limits=SpaceLimits(rate, burst, concurrent),
        key_limits=Admission(key_rate, key_burst, key_concurrent), embedding=embedding,
        sync=sync,
        search_threads=search_threads,
        llm=llm,
        reranker=reranker,
        store=store,
        face_embedder=face_embedder,
    )
    app.state.allow_private_urls = allow_private_urls  # read by the v5 pipeline when it fetches a URL
    run(app, host, port, access_log=access_log, envelopes=envelope_for)


def default_service_did(host: str) -> str:
    """did:web of the host alone: what a client derives from the service's URL (the port is not part of it)."""
    return f"did:web:{host}"


def _llm_and_reranker(llm_spec: str | None, rerank_spec: str | None) -> tuple[LLM | None, Reranker | None]:
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


def _env_spaces() -> list[str]:
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


def make_face_embedder(spec: str, garden_spec: str, garden: Embedder | None) -> Embedder | None:
    """The v5 and Kindgi faces' embedder an operator asked for, with command-line errors."""
    from engram_index.embed.factory import face_embedder_from_spec

    try:
        return face_embedder_from_spec(spec, garden_spec, garden)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--face-embedder") from exc


def make_embedder(spec: str) -> Embedder | None:
    """The embedder an operator asked for, with command-line errors."""
    from engram_index.embed.factory import embedder_from_spec

    try:
        return embedder_from_spec(spec)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--embedder") from exc
    except EngramError as exc:
        raise click.ClickException(exc.message) from exc


from engram_index import cli_admin, cli_keys  # noqa: E402,F401  (register `spaces`, `dev-credential` and `keys` on main)
from engram_index import cli_dev  # noqa: E402,F401  (registers `dev-network` on main)
from engram_index import cli_search  # noqa: E402,F401  (registers `search` on main)
from engram_index import cli_mcp  # noqa: E402,F401  (registers `mcp` on main)
from engram_index import cli_locomo  # noqa: E402,F401  (registers `eval locomo`)


if __name__ == "__main__":  # pragma: no cover
    # Run as a script, this file is `__main__`; the importable module holds every registered command.
    from engram_index.cli import main as _registered

    sys.exit(_registered())
