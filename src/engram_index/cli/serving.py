"""`serve`: every face on one HTTP service, in one process or in worker processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from engram_index.cli.common import (
    DATA_HELP, default_service_did, env_spaces, llm_and_reranker, main,
    make_embedder, make_face_embedder, open_data, store_option,
)


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
              help="Processes serving requests. Above 1, indexes are caught up first, then served read-only. "
                   "As many as the cores: each searches on its own event loop (no hop to a thread) while it has "
                   "at most twice the cores' requests in flight.")
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
@click.option("--max-collections", type=click.IntRange(1, 1_000_000), default=128, show_default=True,
              help="Collections (spaces, namespaces, tenants) each process keeps loaded; beyond it the least recently "
                   "used idle one is closed, and loads again on its next request.")
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
    public_url: str | None, poll_interval: float, open_registration: bool, search_threads: int,
    max_collections: int, access_log: bool,
    llm_spec: str | None, rerank_spec: str | None, malloc_arenas: int, allow_private_urls: bool,
    store: str | None,
) -> None:
    """Serve every face over HTTP: garden.engram XRPC, supermemory v5 (/ns) and Kindgi memory (/v1/memory).

    Example: engram-index serve --data ./data --port 8080 --service-did did:web:index.example.com
    """
    import logging

    from engram_index.engram.api.embedding import QueryEmbedding
    from engram_index.app import app_from_settings
    from engram_index.heap import limit_arenas
    from engram_index.envelopes import envelope_for
    from engram_index.server import run, run_workers
    from engram_index.settings import ServeSettings

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
    llm, reranker = llm_and_reranker(llm_spec, rerank_spec)
    with open_data(data, store) as opened:
        from engram_index.engram.syncstate import SyncState

        for space in env_spaces():
            SyncState(opened.store).add_space(space, int(time.time() * 1000))
        syncing = bool(SyncState(opened.store).spaces())
    if workers > 1 and syncing:
        raise click.UsageError("spaces synced from the network are served by one process: drop --workers")
    sync = SyncConfig(Account(sync_account, sync_password) if sync_account and sync_password else None,
                      plc_url, public_url, poll_interval, did_web_http_localhost, open_registration=open_registration)
    settings = ServeSettings(
        data=str(data), service_did=did, insecure_open=insecure_open, plc_url=plc_url,
        did_web_http_localhost=did_web_http_localhost, rate=rate, burst=burst, concurrent=concurrent,
        key_rate=key_rate, key_burst=key_burst, key_concurrent=key_concurrent, embedder=embedder_spec,
        face_embedder=face_embedder_spec, embed_authorities=tuple(embed_authorities), search_threads=search_threads,
        max_collections=max_collections, workers=workers,
        llm=llm_spec, rerank=rerank_spec, store=store, allow_private_urls=allow_private_urls,
    )
    if workers > 1:
        from engram_index.app import WORKER_CONFIG_ENV

        # Workers only read: bring every space's keyword index up to date (and compact it) first.
        with open_data(data, store) as spaces:
            spaces.catch_up()
            from engram_index.supermemory.tables import migrate

            migrate(spaces.store)  # the v5 face's tables, which read-only workers cannot create
        os.environ[WORKER_CONFIG_ENV] = settings.to_json()  # each worker builds its app from the same settings
        run_workers("engram_index.app:worker_app", workers, host, port, access_log=access_log, envelopes=envelope_for)
        return
    embedding = QueryEmbedding(make_embedder(embedder_spec), frozenset(embed_authorities) or None)
    face_embedder = make_face_embedder(face_embedder_spec, embedder_spec, embedding.embedder)
    app = app_from_settings(settings, embedding=embedding, face_embedder=face_embedder, llm=llm, reranker=reranker,
                            sync=sync)
    run(app, host, port, access_log=access_log, envelopes=envelope_for)
