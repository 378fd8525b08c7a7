"""Operator commands: which spaces are synced (`spaces add|list|remove`), `repack` and `dev-credential`."""

from __future__ import annotations

import json
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import click

from engram_index.cli.common import DATA_HELP, console, main, open_data
from engram_index.errors import BadRecord, EngramError
from engram_index.engram.records import parse_space_uri


@main.group()
def spaces() -> None:
    """Which spaces this service keeps current from the network (add, list, remove)."""


@spaces.command("add")
@click.argument("space")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), required=True, help=DATA_HELP)
def spaces_add(space: str, data: Path) -> None:
    """Sync SPACE from its members' repo hosts (the running service picks it up at its next poll).

    Example: engram-index spaces add at://did:plc:…/space/garden.engram.space/main --data ./data
    """
    from engram_index.engram.syncstate import SyncState

    try:
        uri = str(parse_space_uri(space))
    except BadRecord as exc:
        raise click.ClickException(exc.message) from exc
    with open_data(data) as opened:
        opened.ensure_collection(uri)
        SyncState(opened.store).add_space(uri, int(time.time() * 1000))
    click.echo(f"syncing {uri}")


@spaces.command("list")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), required=True, help=DATA_HELP)
@click.option("--json", "as_json", is_flag=True)
def spaces_list(data: Path, as_json: bool) -> None:
    """The synced spaces, when each last synced, and what failed.

    Example: engram-index spaces list --data ./data --json
    """
    from engram_index.cli.search import reading
    from engram_index.engram.records import is_space_uri
    from engram_index.engram.syncstate import SyncState

    with reading(data) as opened:
        state = SyncState(opened.store)
        rows: list[dict[str, Any]] = []
        for space, problem, synced_ms in state.spaces():
            if not is_space_uri(space):
                continue  # not a garden space: another face's
            repos, records = state.problems(space)
            rows.append({"space": space, "syncedMs": synced_ms, "problem": problem,
                         "failedRepos": [{"repo": r, "problem": p} for r, p in repos],
                         "invalidRecords": [{"repo": r, "reason": p, "count": n} for r, p, n in records]})
    if as_json:
        click.echo(json.dumps(rows))
        return
    for row in rows:
        click.echo(f"{row['space']}  last synced {row['syncedMs'] or 'never'}  {row['problem'] or 'ok'}")
        for failed in row["failedRepos"]:
            click.echo(f"  not indexed: {failed['repo']}: {failed['problem']}")


@spaces.command("remove")
@click.argument("space")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), required=True, help=DATA_HELP)
@click.option("--drop", is_flag=True, help="Also delete the space's records and index.")
def spaces_remove(space: str, data: Path, drop: bool) -> None:
    """Stop syncing SPACE (and with --drop, forget its data).

    Example: engram-index spaces remove at://did:plc:…/space/garden.engram.space/main --data ./data --drop
    """
    from engram_index.engram.syncstate import SyncState

    with open_data(data) as opened:
        state = SyncState(opened.store)
        if not state.remove_space(space):
            raise click.ClickException(f"{space} is not synced here")
        if drop:
            opened.drop(space, state.forget_space(space))
    click.echo(f"stopped syncing {space}" + (" and dropped its data" if drop else ""))


@main.command()
@click.option("--data", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True, help=DATA_HELP)
def repack(data: Path) -> None:
    """Rewrite a record store made by an older release with the 16 KB pages new stores get.

    With 4 KB pages most memories spill out of their page: the store is ~3x larger and fetching
    results slower. Run it with the service stopped; it needs free disk space for a copy of
    records.sqlite, and an interruption leaves the old file as it was.
    Example: engram-index repack --data ./data
    """
    from engram_index.collections import lock_data_dir
    from engram_index.store.sqlite import Store

    try:
        with lock_data_dir(data), closing(Store(data / "records.sqlite")) as store:
            old = store.page_size()
            with console.status(f"repacking {store.path} …"):
                sizes = store.repack()
            new = store.page_size()
    except EngramError as exc:
        raise click.ClickException(exc.message) from exc
    if sizes is None:
        click.echo(f"the record store already has {old // 1024} KB pages: nothing to do")
        return
    before, after = sizes
    click.echo(f"repacked the record store from {old // 1024} KB pages to {new // 1024} KB:"
               f" {before / 1e6:,.1f} MB -> {after / 1e6:,.1f} MB")


@main.command("dev-credential")
@click.argument("space")
@click.option("--authority-key", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="The authority's credential-signing key: a PEM file, or a file holding 64 hex digits.")
@click.option("--alg", type=click.Choice(["ES256", "ES256K"]), default="ES256", show_default=True,
              help="The curve of a hex key (PEM keys name their own).")
@click.option("--audience", required=True, help="The DID of the index service the requests are for.")
@click.option("--kid", default="#atproto_space", show_default=True,
              help="The authority's verification method (#atproto when its DID document has no #atproto_space).")
@click.option("--lifetime", type=click.IntRange(1, 3600), default=600, show_default=True, help="Seconds.")
@click.option("--style", type=click.Choice(["bare", "keyed"]), default="bare", show_default=True,
              help="Signature parameters: none, or keyid and alg.")
@click.option("--url", default=None, help="Print a curl line for searchMemories at this service URL.")
@click.option("--q", "query", default="hello", show_default=True, help="The search text of the curl line.")
@click.option("--json", "as_json", is_flag=True, help="Print the headers as one JSON object.")
def dev_credential(
    space: str, authority_key: Path, alg: str, audience: str, kid: str, lifetime: int, style: str,
    url: str | None, query: str, as_json: bool,
) -> None:
    """Mint a space credential with an authority key you hold and print ready-to-use request headers.

    The holder key is a fresh P-256 key; the headers stay valid for the credential's lifetime.
    Example: engram-index dev-credential at://did:plc:…/space/garden.engram.space/main
    --authority-key authority.pem --audience did:web:index.example.com --url https://index.example.com
    """
    from engram_index.engram.auth.mint import SpaceClient, curl_line, load_private_key, mint_credential
    from engram_index.engram.identity.keys import P256, PrivateKey

    try:
        authority = parse_space_uri(space).authority
        key = load_private_key(authority_key.read_text(), alg)
    except (BadRecord, ValueError) as exc:
        raise click.ClickException(str(getattr(exc, "message", exc))) from exc
    holder = PrivateKey.generate(P256)
    token = mint_credential(key, authority, space, holder.did_key, lifetime=lifetime, kid=kid or None)
    headers = SpaceClient(token, holder, audience, style=style).headers()
    if as_json:
        click.echo(json.dumps(headers))
    elif url:
        click.echo(curl_line(f"{url.rstrip('/')}/xrpc/garden.engram.searchMemories", headers,
                             {"space": space, "q": query}))
    else:
        for name, value in headers.items():
            click.echo(f"{name}: {value}")
    click.echo(f"# authority key {key.did_key} ({key.alg}); valid {lifetime} s", err=True)
