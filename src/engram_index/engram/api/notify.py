"""Write notifications from space hosts: com.atproto.space.notifyWrite and notifySpaceDeleted.

Each call carries a service-auth JWT from the space's authority; it is answered at once and the
sync runs in the background. A `prevSpaceRev` other than the last revision we saw means a
notification was lost: the whole space is synced, not just the repo named.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from engram_index.engram.auth.service_auth import ServiceAuth
from engram_index.errors import BadRecord, InvalidInput, UnknownSpace, Unavailable
from engram_index.engram.records import parse_space_uri
from engram_index.engram.sync.runner import SyncRunner
from engram_index.engram.api.revocation import NotTheAuthority, json_body

WRITE = "com.atproto.space.notifyWrite"
DELETED = "com.atproto.space.notifySpaceDeleted"


async def _checked(request: Request, nsid: str) -> tuple[SyncRunner, dict[str, Any], str]:
    """The runner, the body and its space, once the caller proved to be the space's authority."""
    runner: SyncRunner | None = request.app.state.sync
    if runner is None:
        raise Unavailable("this service does not sync spaces from the network")
    auth: ServiceAuth = request.app.state.service_auth
    issuer = await auth.verify(request, nsid)
    body = await json_body(request)
    space = body.get("space")
    if not isinstance(space, str):
        raise InvalidInput("the body needs space")
    try:
        authority = parse_space_uri(space).authority
    except BadRecord as exc:
        raise InvalidInput(exc.message) from exc
    if authority != issuer:
        raise NotTheAuthority("only the space's authority may notify about it")
    if not runner.syncer.state.is_configured(space):
        raise UnknownSpace(f"this service does not sync {space}")
    return runner, body, space


async def notify_write(request: Request) -> dict[str, Any]:
    """A member repo of a space moved: sync it (or the whole space after a gap)."""
    runner, body, space = await _checked(request, WRITE)
    repo, space_rev, prev = body.get("repo"), body.get("spaceRev"), body.get("prevSpaceRev")
    if not isinstance(repo, str) or not repo.startswith("did:"):
        raise InvalidInput("the body needs repo (a DID)")
    state = runner.syncer.state
    last = state.space_rev(space)
    # Also when we saw none yet: what came before our registration (or restart) is unknown to us.
    # A whole-space sync only pulls the repos whose revision moved, so this stays cheap.
    gap = isinstance(prev, str) and prev != last
    if isinstance(space_rev, str) and (last is None or space_rev > last):
        state.set_space_rev(space, space_rev)
    runner.request(space, None if gap else repo)
    return {}


async def notify_space_deleted(request: Request) -> dict[str, Any]:
    """The authority deleted the space: forget everything of it."""
    runner, _, space = await _checked(request, DELETED)
    runner.delete_space(space)
    return {}
