"""`engram-index mcp`: the MCP server over stdio, on a data directory or beside a running service."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import click

from engram_index.cli.common import DATA_HELP, default_service_did, main, make_embedder


@main.command("mcp")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=DATA_HELP + " The MCP server opens it itself (no service may be serving it).")
@click.option("--url", default=None, help="The URL of a running engram-index service, instead of --data.")
@click.option("--key", envvar="ENGRAM_INDEX_KEY", default=None,
              help="A v5 (sm_…) or Kindgi (kg_…) key; none for garden.engram spaces of an open service.")
@click.option("--space-headers", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A garden.engram space credential: the JSON headers `dev-credential --json` prints (valid for"
                   " the credential's life).")
@click.option("--space", "spaces", multiple=True,
              help="With --url and no key: a garden.engram space to offer (repeatable; the service does not list them).")
@click.option("--embedder", "embedder_spec", default="auto", show_default=True,
              help="With --data: the query embedder, as for serve.")
def mcp_cmd(data: Path | None, url: str | None, key: str | None, space_headers: Path | None, spaces: tuple[str, ...],
            embedder_spec: str) -> None:
    """Serve the MCP tools over stdio (for an agent to launch).

    \b
    Example: engram-index mcp --data ./data
    Example: ENGRAM_INDEX_KEY=kg_… engram-index mcp --url http://127.0.0.1:8080
    """
    if (data is None) == (url is None):
        raise click.UsageError("give one of --data DIR or --url URL")
    import httpx

    from engram_index.console.access import Console
    from engram_index.console.mcp_server import build

    signed: dict[str, str] | None = None
    if space_headers is not None:
        import json

        from engram_index.console.access import credential_of

        try:
            key, signed = credential_of({k.lower(): v for k, v in json.loads(space_headers.read_text()).items()})
        except (ValueError, AttributeError) as exc:
            raise click.BadParameter(f"not a JSON object of headers: {exc}", param_hint="--space-headers") from exc
        if signed is None:
            raise click.BadParameter("its Authorization is not Atproto-Space …", param_hint="--space-headers")
    if url is not None:
        client = httpx.AsyncClient(base_url=url.rstrip("/"), timeout=30.0)
        offered = list(spaces)
        console = Console(client, key, (lambda: offered) if offered else None, signed)
        build(lambda ctx: console).run("stdio")
        return
    assert data is not None
    from engram_index.app import create_app
    from engram_index.console.wiring import app_console
    from engram_index.engram.api.embedding import QueryEmbedding
    from engram_index.engram.auth import InsecureOpen

    # Whoever may read the data directory may read every space in it: its garden.engram spaces are open here,
    # while v5 and Kindgi still check the key against the directory's keys.
    app = create_app(data, default_service_did("localhost"), authenticator=InsecureOpen(),
                     embedding=QueryEmbedding(make_embedder(embedder_spec)))

    @asynccontextmanager
    async def lifespan(server: Any) -> AsyncIterator[None]:
        async with app.router.lifespan_context(app):
            yield

    build(lambda ctx: app_console(app, key, signed), lifespan=lifespan).run("stdio")
