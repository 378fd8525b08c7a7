"""Bearer keys for the supermemory and Kindgi faces: `keys create`, `keys list`, `keys revoke` (safe while serving)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from engram_index.cli.common import DATA_HELP, main, store_option
from engram_index.errors import EngramError
from engram_index.keys import PREFIXES, KeyRecord, KeyStore

FACES = click.Choice(sorted(PREFIXES))
PROGRESS_MIN_KEYS = 1000  # fewer keys list at once: no bar


@main.group()
def keys() -> None:
    """Bearer keys for the supermemory and Kindgi faces (create, list, revoke), while the service runs too."""


def _grants(face: str, namespaces: tuple[str, ...], tenant: str | None, user: str | None,
            orgs: tuple[str, ...], projects: tuple[str, ...], admin: bool,
            service: str | None = None) -> dict[str, Any]:
    """The grants of a new key, checked against what its face understands."""
    kindgi_only = tenant is not None or user is not None or orgs or projects or admin or service is not None
    if face == "supermemory":
        if kindgi_only:
            raise click.UsageError("--tenant, --user, --service, --org, --project and --admin are for kindgi tokens")
        return {"namespaces": sorted(set(namespaces)) if namespaces else None}
    if namespaces:
        raise click.UsageError("--namespace is for supermemory keys")
    if not tenant:
        raise click.UsageError("a kindgi token needs --tenant")
    if admin and (user or orgs or projects):
        raise click.UsageError("--admin reaches the whole tenant: give no --user, --org or --project with it")
    if user and service:
        raise click.UsageError("a token acts as a user or as a service: give --user or --service, not both")
    grants: dict[str, Any] = {"tenant": tenant, "user": user, "orgs": sorted(set(orgs)),
                              "projects": sorted(set(projects)), "admin": admin}
    if service:
        grants["service"] = service  # kindgi: facts it writes are attributed to service:<id>
    return grants


def _reach(record: KeyRecord) -> str:
    """What a key reaches, in a few words."""
    g = record.grants
    if record.face == "supermemory":
        return "every namespace" if g.get("namespaces") is None else "namespaces " + ", ".join(g["namespaces"])
    if g.get("admin"):
        return f"tenant {g['tenant']} (admin)" + (f"; service {g['service']}" if g.get("service") else "")
    parts = [f"tenant {g['tenant']}"]
    if g.get("service"):
        parts.append(f"service {g['service']}")
    if g.get("user"):
        parts.append(f"user {g['user']}")
    if g.get("orgs"):
        parts.append("orgs " + ", ".join(g["orgs"]))
    if g.get("projects"):
        parts.append("projects " + ", ".join(g["projects"]))
    return "; ".join(parts)


def _when(ms: int | None) -> str:
    """A timestamp for a table, or '-'."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@keys.command("create")
@click.argument("face", type=FACES)
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), required=True, help=DATA_HELP)
@click.option("--namespace", "namespaces", multiple=True, help="supermemory: a namespace the key reaches (repeat); none: all")
@click.option("--tenant", help="kindgi: the tenant of the token (required for kindgi)")
@click.option("--user", help="kindgi: the user the token acts as")
@click.option("--service", help="kindgi: the service the token acts as (instead of a user)")
@click.option("--org", "orgs", multiple=True, help="kindgi: an org the token may read and write (repeat)")
@click.option("--project", "projects", multiple=True, help="kindgi: a project the token may read and write (repeat)")
@click.option("--admin", is_flag=True, help="kindgi: a tenant admin, who reaches every fact of the tenant")
@click.option("--label", help="a note to tell keys apart in `keys list`")
@click.option("--expires-in", type=click.IntRange(min=1), help="seconds until the key stops working (default: never)")
@store_option
def keys_create(face: str, data: Path, namespaces: tuple[str, ...], tenant: str | None, user: str | None,
                service: str | None, orgs: tuple[str, ...], projects: tuple[str, ...], admin: bool, label: str | None,
                expires_in: int | None, store: str | None) -> None:
    """Mint a bearer key for FACE (supermemory or kindgi); the key is the last word printed, shown only once.

    Example: engram-index keys create supermemory --data ./data --namespace notes
    (or: engram-index keys create kindgi --data ./data --tenant acme --user alice --project web)
    """
    grants = _grants(face, namespaces, tenant, user, orgs, projects, admin, service)
    keys_of = _key_store(data, store)
    expires_ms = None
    if expires_in is not None:
        import time

        expires_ms = int(time.time() * 1000) + expires_in * 1000
    token, record = keys_of.create(face, grants, label=label, expires_ms=expires_ms)
    click.echo(f"created {face} key {record.id} ({_reach(record)}); it is shown only now:")
    click.echo(token)


@keys.command("list")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), required=True, help=DATA_HELP)
@click.option("--face", type=FACES, help="only the keys of this face")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per key")
@store_option
def keys_list(data: Path, face: str | None, as_json: bool, store: str | None) -> None:
    """List keys (never their secrets): id, face, what each reaches, created, expires, revoked.

    Example: engram-index keys list --data ./data --face kindgi
    """
    if store is None and not data.is_dir():
        raise click.ClickException(f"no data directory at {data}")
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table

    records = _key_store(data, store).list(face)
    # Many keys take a while to format: a bar on a terminal's stderr (stdout stays the list alone).
    errors = Console(stderr=True)
    with Progress(TextColumn("[bold]listing keys"), BarColumn(), MofNCompleteColumn(), console=errors,
                  transient=True, disable=len(records) < PROGRESS_MIN_KEYS or not errors.is_terminal) as bar:
        task = bar.add_task("keys", total=len(records))
        if as_json:
            for r in records:
                click.echo(json.dumps({"id": r.id, "face": r.face, "label": r.label, "grants": r.grants,
                                       "createdMs": r.created_ms, "expiresMs": r.expires_ms,
                                       "revokedMs": r.revoked_ms}))
                bar.advance(task)
            return
        table = Table("id", "face", "reaches", "label", "created", "expires", "revoked")
        for r in records:
            table.add_row(r.id, r.face, _reach(r), r.label or "", _when(r.created_ms), _when(r.expires_ms),
                          _when(r.revoked_ms))
            bar.advance(task)
    Console(soft_wrap=True).print(table)


@keys.command("revoke")
@click.argument("key_id")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), required=True, help=DATA_HELP)
@store_option
def keys_revoke(key_id: str, data: Path, store: str | None) -> None:
    """Revoke the key KEY_ID (from `keys list`); a running service refuses it from its next request.

    Example: engram-index keys revoke 3f9a0c1b2d4e --data ./data
    """
    if store is None and not data.is_dir():
        raise click.ClickException(f"no data directory at {data}")
    try:
        record = _key_store(data, store).revoke(key_id)
    except EngramError as exc:
        raise click.ClickException(exc.message) from exc
    click.echo(f"revoked {record.face} key {record.id}")


def _key_store(data: Path, store: str | None) -> KeyStore:
    """The keys of the data directory, or of the shared PostgreSQL store (every node's keys) when given."""
    if store is None:
        return KeyStore(data)
    from engram_index.store.postgres import PostgresStore

    try:
        return KeyStore(data, PostgresStore(store))
    except EngramError as exc:
        raise click.ClickException(exc.message) from exc
