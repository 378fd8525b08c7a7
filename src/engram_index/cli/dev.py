"""`engram-index dev-network`: members only, fully local. A PLC directory on loopback publishes an
authority for every space of the data directory, the service checks real space credentials against
it, and a credential is minted and printed as a working curl request. Nothing leaves the machine."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import click

from engram_index.cli.common import DATA_HELP, default_service_did, main, make_embedder
from engram_index.engram.identity.keys import P256, PrivateKey

KEYS_DIR = "dev-authorities"  # beside the records: each authority's key, kept across runs


def _authority_key(data: Path, did: str) -> PrivateKey:
    """The dev authority's P-256 key for `did`, made on first use and kept (64 hex digits) in the data directory."""
    path = data / KEYS_DIR / f"{did.replace(':', '_')}.key"
    if path.exists():
        return PrivateKey.from_hex(path.read_text().strip(), P256)
    key = PrivateKey.generate(P256)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(key.to_hex() + "\n")
    path.chmod(0o600)
    return key


@main.command("dev-network")
@click.option("--data", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True, help=DATA_HELP)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--q", "query", default="white matter diffusion", show_default=True,
              help="The search text of the printed request.")
@click.option("--embedder", "embedder_spec", default="auto", show_default=True, help="As for serve --embedder.")
def dev_network(data: Path, host: str, port: int, query: str, embedder_spec: str) -> None:
    """Serve the data directory members-only with a local PLC directory and authorities, and print a
    curl request carrying a freshly minted credential (valid one hour).

    Each space's authority gets a P-256 key (kept in DATA/dev-authorities/ as 64 hex digits, usable
    with dev-credential --authority-key); the service checks credentials exactly as in production.
    Example: engram-index dev-network --data ./data --port 8080
    """
    import logging

    from engram_index.app import create_app, space_credentials
    from engram_index.collections import Collections
    from engram_index.engram.api.embedding import QueryEmbedding
    from engram_index.engram.auth.mint import SpaceClient, curl_line, mint_credential
    from engram_index.engram.records import is_space_uri, parse_space_uri
    from engram_index.errors import EngramError
    from engram_index.server import run
    from engram_index.testkit.plc import FakePlc, did_document
    from engram_index.testkit.serve import serving

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        opened = Collections(data)
        try:
            space_list = [s for s in opened.store.collections() if is_space_uri(s)]
        finally:
            opened.close()
    except EngramError as exc:
        raise click.ClickException(exc.message) from exc
    if not space_list:
        raise click.ClickException(f"{data} holds no space: import one first (engram-index import)")
    plc = FakePlc()
    keys: dict[str, PrivateKey] = {}
    for space in space_list:
        authority = parse_space_uri(space).authority
        if authority not in keys:
            keys[authority] = _authority_key(data, authority)
            plc.publish(authority, did_document(authority, {"#atproto_space": keys[authority]}))
    did = default_service_did(host)
    url = f"http://{host}:{port}"
    with ExitStack() as stack:
        plc_url = stack.enter_context(serving(plc.app(), probe="/_health"))
        app = create_app(data, did, authenticator=space_credentials(data, did, plc_url=plc_url),
                         embedding=QueryEmbedding(make_embedder(embedder_spec)))
        space = space_list[0]
        authority = parse_space_uri(space).authority
        holder = PrivateKey.generate(P256)
        token = mint_credential(keys[authority], authority, space, holder.did_key, lifetime=3600, now=time.time())
        headers = SpaceClient(token, holder, did).headers()
        click.echo(f"local PLC directory at {plc_url}; service {did} at {url}; spaces: {', '.join(space_list)}")
        click.echo("a member's request (valid one hour), once the service below is up:")
        click.echo(curl_line(f"{url}/xrpc/garden.engram.searchMemories", headers,
                             {"space": space, "q": query, "limit": "3"}), nl=True)
        click.echo("without the headers the same request is refused with 401 AuthRequired.", err=True)
        run(app, host, port, access_log=True)
