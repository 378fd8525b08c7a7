"""garden.engram.registerSpace as published: with open registration any member may have a space
indexed once its authority made our account a member; NotAMember otherwise, RegistrationClosed
when the operator keeps the list, and registering twice changes nothing. Requests are made as the
reference client makes them (tests/engram/api/reference_client.py)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from tests.limits import roomy_app
from engram_index.engram.api.lexicon import Lexicons
from engram_index.engram.api.limits import SpaceLimits
from engram_index.engram.auth.credentials import SpaceCredentials
from engram_index.engram.auth.mint import mint_credential
from engram_index.engram.auth.state import AuthState
from engram_index.engram.identity.did import DidResolver
from engram_index.engram.sync.client import Account
from engram_index.engram.sync.runner import SyncConfig
from engram_index.testkit.serve import free_port, serving
from engram_index.testkit.spacenet import SpaceNetwork

from ..api.reference_client import Agent, XrpcError, did_key
from .test_sync_e2e import config, eventually

LEX = Lexicons.bundled()


def memory(text: str) -> dict[str, Any]:
    vector = np.array([1, 0, 0, 0], dtype="<f2")
    return {"$type": "garden.engram.memory", "text": text, "createdAt": "2026-11-01T00:00:00.000Z",
            "embedding": {"model": "m", "modelDigest": "sha256:00", "dims": 4, "encoding": "f16le",
                          "vector": {"$bytes": base64.b64encode(vector.tobytes()).decode().rstrip("=")}}}


@dataclass
class World:
    net: SpaceNetwork
    url: str
    readable: str  # our account may read it
    closed_to_us: str  # our account is no member
    indexer: str

    def agent(self, space: str) -> Agent:
        key = ec.generate_private_key(ec.SECP256R1())
        credential = mint_credential(self.net.authority.credential_key, self.net.authority.did, space,
                                     did_key(key), kid=self.net.authority.kid)
        return Agent(self.url, space, credential, key, appview_did="did:web:127.0.0.1")


@contextmanager
def world(tmp: Path, *, open_registration: bool) -> Iterator[World]:
    with SpaceNetwork() as net:
        alice, indexer = net.account(), net.account()
        authority = net.authority_account()
        readable = net.create_space(members=[alice.did, authority.did], readers=[indexer.did])
        closed = net.create_space(members=[alice.did, authority.did])
        for space in (readable, closed):
            net.write(space, authority.did, "garden.engram.config", "self", config())
            net.write(space, alice.did, "garden.engram.memory", "3kaaaaaaaaa22", memory("alice wrote this"))
        did = "did:web:127.0.0.1"
        checker = SpaceCredentials(did, DidResolver(net.plc_url, min_refresh=0.0), AuthState())
        sync = SyncConfig(Account(indexer.did, indexer.password), net.plc_url, None, 3600.0,
                          retry_s=0.5, did_min_refresh=0.0, open_registration=open_registration)
        app = roomy_app(tmp, did, authenticator=checker, limits=SpaceLimits(rate=1e6, burst=1e6), sync=sync)
        with serving(app, port=free_port()) as url:
            yield World(net, url, readable, closed, indexer.did)


@pytest.fixture()
def open_world(tmp_path: Path) -> Iterator[World]:
    with world(tmp_path, open_registration=True) as made:
        yield made


def texts(agent: Agent) -> set[str]:
    try:
        return {m["text"] for m in agent.list()["memories"]}
    except XrpcError:
        return set()


def test_describe_service_says_registration_is_open_and_names_the_account_to_add(open_world: World) -> None:
    body = httpx.get(f"{open_world.url}/xrpc/garden.engram.describeService").json()
    assert body["registration"] == "open" and body["account"] == open_world.indexer
    assert LEX.output_errors("garden.engram.describeService", body) == []


def test_a_member_registers_a_space_our_account_may_read_and_it_is_synced(open_world: World) -> None:
    agent = open_world.agent(open_world.readable)
    with pytest.raises(XrpcError) as before:
        agent.list()
    assert before.value.name == "UnknownSpace"
    out = agent.register()
    assert out == {"space": open_world.readable}
    assert LEX.output_errors("garden.engram.registerSpace", out) == []
    eventually(lambda: texts(agent) == {"alice wrote this"}, "the registered space synced")
    eventually(lambda: agent.indexing() == "granted", "access reported granted")
    status = agent.query("garden.engram.getSpaceStatus", {"space": open_world.readable})
    assert LEX.output_errors("garden.engram.getSpaceStatus", status) == []


def test_registering_twice_changes_nothing(open_world: World) -> None:
    agent = open_world.agent(open_world.readable)
    agent.register()
    eventually(lambda: texts(agent) == {"alice wrote this"}, "the registered space synced")
    before = agent.query("garden.engram.getSpaceStatus", {"space": open_world.readable})
    assert agent.register() == {"space": open_world.readable}
    after = agent.query("garden.engram.getSpaceStatus", {"space": open_world.readable})
    assert (after["memories"], after["sync"]) == (before["memories"], before["sync"])


def test_a_space_our_account_is_no_member_of_is_refused_with_not_a_member(open_world: World) -> None:
    agent = open_world.agent(open_world.closed_to_us)
    with pytest.raises(XrpcError) as refused:
        agent.register()
    assert (refused.value.status, refused.value.name) == (403, "NotAMember")
    assert open_world.indexer in refused.value.message
    with pytest.raises(XrpcError) as still:
        agent.list()
    assert still.value.name == "UnknownSpace"  # nothing was registered


def test_registration_needs_the_callers_membership_first(open_world: World) -> None:
    stranger = Agent(open_world.url, open_world.readable, "not-a-credential",
                     ec.generate_private_key(ec.SECP256R1()), appview_did="did:web:127.0.0.1")
    with pytest.raises(XrpcError) as refused:
        stranger.register()
    assert refused.value.status == 401


@pytest.mark.parametrize("content", [b"{}", b'{"space": 7}', b"[]", b"not json", b'{"space": "' + b"x" * 70000 + b'"}'])
def test_a_malformed_registration_body_is_refused_before_anything_else(open_world: World, content: bytes) -> None:
    r = httpx.post(f"{open_world.url}/xrpc/garden.engram.registerSpace", content=content,
                   headers={"content-type": "application/json"})
    expected = (413, "PayloadTooLarge") if len(content) > 70000 else (400, "InvalidRequest")
    assert (r.status_code, r.json()["error"]) == expected


def test_with_closed_registration_members_are_told_registration_closed(tmp_path: Path) -> None:
    with world(tmp_path, open_registration=False) as closed:
        body = httpx.get(f"{closed.url}/xrpc/garden.engram.describeService").json()
        assert body["registration"] == "closed"
        with pytest.raises(XrpcError) as refused:
            closed.agent(closed.readable).register()
        assert (refused.value.status, refused.value.name) == (403, "RegistrationClosed")


def test_a_notification_from_an_account_that_is_not_the_authority_is_forbidden(open_world: World) -> None:
    from engram_index.engram.auth.service_auth import mint_service_auth

    stranger = open_world.net.account()  # a real, resolvable DID: its token verifies, it is just not the authority
    token = mint_service_auth(stranger.key, stranger.did, "did:web:127.0.0.1#atproto_space_syncer",
                              "com.atproto.space.notifyWrite")
    r = httpx.post(f"{open_world.url}/xrpc/com.atproto.space.notifyWrite",
                   json={"space": open_world.readable, "repo": stranger.did, "spaceRev": "1"},
                   headers={"authorization": f"Bearer {token}"})
    assert (r.status_code, r.json()["error"]) == (403, "Forbidden")
