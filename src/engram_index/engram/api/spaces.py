"""The calls about a space as a whole: describeService, warmSpace, registerSpace, and the wait for
a space's index to load that every search-like call goes through."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.requests import Request

from engram_index import __version__
from engram_index.endpoints import in_thread
from engram_index.collections import Collections
from engram_index.engine.search import SpaceIndex
from engram_index.errors import BadRecord, EngramError, IndexLoading, InvalidInput, UnknownSpace
from engram_index.engram.records import parse_space_uri
from engram_index.engram.syncstate import SyncState

WARM_NSID = "garden.engram.warmSpace"
REGISTER_NSID = "garden.engram.registerSpace"
# How long a call waits for a space's index to load before answering IndexLoading: under the 5 s
# default timeout of common HTTP clients (httpx's, which the reference client uses), so a client
# gets an answer rather than a timeout of its own.
LOAD_WAIT_S = 4.0


class RegistrationClosed(EngramError):
    """This service indexes only the spaces its operator configures."""

    code = "registration_closed"
    status = 403


class NotAMember(EngramError):
    """This service's account cannot read the space: it is not a member."""

    code = "not_a_member"
    status = 403


async def loaded_index(spaces: Collections, uri: str, wait_s: float = LOAD_WAIT_S) -> SpaceIndex:
    """The space's index, waiting up to `wait_s` for it to load (IndexLoading past that)."""
    deadline = time.monotonic() + wait_s
    pause = 0.005
    while True:
        try:
            return spaces.index_if_loaded(uri)
        except IndexLoading:
            left = deadline - time.monotonic()
            if left <= 0:
                raise IndexLoading(f"the index of {uri} is still loading after {wait_s:g} s; retry shortly") from None
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, 0.1)


def describe(request: Request) -> dict[str, Any]:
    """garden.engram.describeService: the DID to address, the account to add, and the registration policy."""
    state = request.app.state
    out: dict[str, Any] = {"did": state.service_did, "registration": "open" if registration_open(request) else "closed",
                           "version": __version__}
    if state.sync is not None and state.sync.config.account is not None:
        out["account"] = state.sync.config.account.did
    return out


def registration_open(request: Request) -> bool:
    """Members may register spaces: the operator opened registration and the service has an account to sync with."""
    sync = request.app.state.sync
    return sync is not None and sync.config.open_registration and sync.config.account is not None


def _space_of(body: dict[str, Any]) -> str:
    """The body's space, which must be a space URI."""
    try:
        return str(parse_space_uri(body["space"]))
    except BadRecord as exc:
        raise InvalidInput(exc.message) from exc


async def warm_space(request: Request) -> dict[str, Any]:
    """garden.engram.warmSpace: start loading the space's index and answer at once."""
    spaces: Collections = request.app.state.spaces
    uri = _space_of(request.state.body)
    try:
        spaces.index_if_loaded(uri)
    except IndexLoading:
        pass  # loading now, in the background
    return {}


async def register_space(request: Request) -> dict[str, Any]:
    """garden.engram.registerSpace: keep a space current from the network, once its authority made
    this service's account a member (checked by getting a credential for it)."""
    spaces: Collections = request.app.state.spaces
    sent = request.state.body["space"]
    uri = _space_of(request.state.body)
    if uri != sent:
        raise InvalidInput(f"write the space as {uri}")
    state = SyncState(spaces.store)
    if await in_thread(_indexed, spaces, state, uri):
        return {"space": uri}  # already indexed: nothing changes
    if not registration_open(request):
        raise RegistrationClosed("this service indexes only the spaces its operator configures")
    runner = request.app.state.sync
    problem = await runner.can_read(uri)
    if problem is not None:
        raise NotAMember(f"add this service's account ({runner.config.account.did}) to the space as a member"
                         f" first ({problem})")
    await in_thread(_register, spaces, state, uri)
    runner.request(uri)
    return {"space": uri}


def _indexed(spaces: Collections, state: SyncState, uri: str) -> bool:
    """Whether the space is indexed here already (imported, or kept current by sync)."""
    if state.is_configured(uri):
        return True
    try:
        spaces.info(uri)
    except UnknownSpace:
        return False
    return True


def _register(spaces: Collections, state: SyncState, uri: str) -> None:
    """Make the space and keep it current from now on."""
    spaces.ensure_collection(uri)
    state.add_space(uri, int(time.time() * 1000))
