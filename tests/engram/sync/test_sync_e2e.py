"""Sync end to end: a fake space network, our service syncing from it over real HTTP, and searches
by a member of the space: writes become searchable, tampering is never indexed, lost notifications
are healed by the poll, members and spaces that go are forgotten."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from engram_index.engram.api.limits import SpaceLimits
from tests.limits import roomy_app, PATIENCE_S
from engram_index.engram.auth.credentials import SpaceCredentials
from engram_index.engram.auth.state import AuthState
from engram_index.engram.identity.did import DidResolver
from engram_index.collections import Collections
from engram_index.engram.syncstate import SyncState
from engram_index.engram.sync.client import Account
from engram_index.engram.sync.runner import SyncConfig
from engram_index.testkit.serve import free_port, serving
from engram_index.testkit.spacenet import SpaceNetwork

MODEL = {"model": "m", "modelDigest": "sha256:00", "dims": 4}


def memory(text: str, axis: int = 0, **extra: Any) -> dict[str, Any]:
    vector = np.zeros(4, dtype="<f2")
    vector[axis] = 1
    return {"$type": "garden.engram.memory", "text": text, "tags": ["t"], "createdAt": "2026-11-01T00:00:00.000Z",
            "embedding": {**MODEL, "encoding": "f16le",
                          "vector": {"$bytes": base64.b64encode(vector.tobytes()).decode().rstrip("=")}}, **extra}


def config(**changes: Any) -> dict[str, Any]:
    return {"$type": "garden.engram.config", **MODEL, "createdAt": "2026-11-01T00:00:00.000Z", **changes}


@dataclass
class World:
    """The network, its space, a member, and our service syncing it."""

    net: SpaceNetwork
    space: str
    alice: str
    url: str
    did: str

    def headers(self) -> dict[str, str]:
        return self.net.authority.member(self.space, self.did).headers()

    def search(self, q: str, **params: Any) -> httpx.Response:
        def once() -> httpx.Response:
            return httpx.get(f"{self.url}/xrpc/garden.engram.searchMemories",
                             params={"space": self.space, "q": q, "mode": "keyword", **params}, headers=self.headers())

        response = once()
        deadline = time.monotonic() + PATIENCE_S
        while response.status_code == 503 and time.monotonic() < deadline:  # the index loads in the background
            time.sleep(0.05)
            response = once()
        return response

    def texts(self) -> set[str]:
        r = httpx.get(f"{self.url}/xrpc/garden.engram.listMemories", params={"space": self.space, "limit": 100},
                      headers=self.headers())
        return {m["text"] for m in r.json().get("memories", [])} if r.status_code == 200 else set()

    def status(self) -> dict[str, Any]:
        r = httpx.get(f"{self.url}/xrpc/garden.engram.getSpaceStatus", params={"space": self.space},
                      headers=self.headers())
        return dict(r.json())


def eventually(check: Callable[[], bool], what: str, timeout: float = PATIENCE_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


@contextmanager
def world(tmp: Path, *, poll_s: float = 3600.0, notify: bool = True, notify_lifetime: float = 3600.0) -> Iterator[World]:
    with SpaceNetwork(notify_lifetime=notify_lifetime) as net:
        alice, indexer = net.account(), net.account()
        authority = net.authority_account()
        space = net.create_space(members=[alice.did, authority.did], readers=[indexer.did])
        net.write(space, authority.did, "garden.engram.config", "self", config())
        net.write(space, alice.did, "garden.engram.memory", "3kaaaaaaaaa22", memory("the first memory of alice"))
        opened = Collections(tmp)
        SyncState(opened.store).add_space(space, 0)
        opened.close()
        port = free_port()
        did = f"did:web:127.0.0.1%3A{port}"
        url = f"http://127.0.0.1:{port}"
        checker = SpaceCredentials(did, DidResolver(net.plc_url, min_refresh=0.0), AuthState())
        sync = SyncConfig(Account(indexer.did, indexer.password), net.plc_url, url if notify else None, poll_s,
                          retry_s=0.5, did_min_refresh=0.0)
        app = roomy_app(tmp, did, authenticator=checker, limits=SpaceLimits(rate=1e6, burst=1e6), sync=sync)
        with serving(app, port=port):
            w = World(net, space, alice.did, url, did)
            eventually(lambda: "the first memory of alice" in w.texts(), "the first sync")
            yield w


@pytest.fixture()
def w(tmp_path: Path) -> Iterator[World]:
    with world(tmp_path) as made:
        yield made


def test_a_members_write_is_notified_synced_and_searchable_with_vectors(w: World) -> None:
    w.net.write(w.space, w.alice, "garden.engram.memory", "3kbbbbbbbbb22", memory("deploy the HTTPServer", axis=1))
    eventually(lambda: "deploy the HTTPServer" in w.texts(), "the notified write")
    found = w.search("httpserver").json()["memories"]
    assert [m["text"] for m in found] == ["deploy the HTTPServer"]
    vector = base64.urlsafe_b64encode(np.eye(4, dtype="<f2")[1].tobytes()).decode().rstrip("=")
    hybrid = w.search("deploy", mode="hybrid", vector=vector, model="m", modelDigest="sha256:00").json()
    assert hybrid["memories"][0]["text"] == "deploy the HTTPServer"
    status = w.status()
    assert status["config"] == MODEL and status["sync"]["failedRepos"] == []
    assert w.did in w.net.registrations(w.space)  # we registered for notifications


def test_a_gap_in_space_revisions_syncs_the_whole_space(w: World) -> None:
    bob = w.net.account()
    w.net.add_member(w.space, bob.did)
    w.net.lose_notifications(1)
    w.net.write(w.space, bob.did, "garden.engram.memory", "3kbobbbbbbb22", memory("bob was never announced"))
    w.net.write(w.space, w.alice, "garden.engram.memory", "3kalice2222a2", memory("alice after the gap"))
    # alice's notification names a prevSpaceRev we never saw: the whole space is synced, bob included.
    eventually(lambda: {"bob was never announced", "alice after the gap"} <= w.texts(), "the gap healed")


def test_updates_and_deletes_follow_the_member(w: World) -> None:
    w.net.write(w.space, w.alice, "garden.engram.memory", "3kaaaaaaaaa22", memory("alice changed her mind"))
    eventually(lambda: w.texts() == {"alice changed her mind"}, "the update")
    w.net.delete(w.space, w.alice, "garden.engram.memory", "3kaaaaaaaaa22")
    eventually(lambda: w.texts() == set(), "the delete")


def test_a_tampered_commit_is_never_indexed_and_shows_in_the_status(w: World) -> None:
    w.net.corrupt_next_commit(w.alice, times=1000)
    w.net.write(w.space, w.alice, "garden.engram.memory", "3kccccccccc22", memory("forged secret"))
    eventually(lambda: any(f["repo"] == w.alice for f in w.status()["sync"]["failedRepos"]), "the failure")
    assert "forged secret" not in w.texts()
    assert "the first memory of alice" in w.texts()  # what was verified before stays
    w.net.accounts[w.alice].faults.bad_signatures = 0  # the host behaves again
    w.net.write(w.space, w.alice, "garden.engram.memory", "3kddddddddd22", memory("honest again"))
    eventually(lambda: {"forged secret", "honest again"} <= w.texts(), "the healed repo")
    assert w.status()["sync"]["failedRepos"] == []


@pytest.mark.parametrize("fault", ["report_wrong_value", "omit_values", "sign_wrong_hash", "drop_op", "truncate_log"])
def test_an_op_log_that_does_not_verify_falls_back_to_the_whole_repo(w: World, fault: str) -> None:
    if fault == "drop_op":
        w.net.write(w.space, w.alice, "garden.engram.memory", "3keeeeeeeee22", memory("first of two"))
        eventually(lambda: "first of two" in w.texts(), "the first write")
        w.net.lose_notifications(1)
        w.net.write(w.space, w.alice, "garden.engram.memory", "3kfffffffff22", memory("second of two"))
        w.net.drop_op(w.space, w.alice)
        w.net.write(w.space, w.alice, "garden.engram.memory", "3kggggggggg22", memory("third"))
        eventually(lambda: {"second of two", "third"} <= w.texts(), "the whole repo")
        return
    if fault == "truncate_log":
        w.net.lose_notifications(1)
        w.net.write(w.space, w.alice, "garden.engram.memory", "3keeeeeeeee22", memory("lost in the log"))
        w.net.truncate_log(w.space, w.alice, keep=0)
    else:
        getattr(w.net, fault)(w.alice)
    w.net.write(w.space, w.alice, "garden.engram.memory", "3khhhhhhhhh22", memory("arrives whole"))
    eventually(lambda: "arrives whole" in w.texts(), "the write, through the CAR")
    if fault == "truncate_log":
        assert "lost in the log" in w.texts()
    if fault == "sign_wrong_hash":
        return  # the CAR's commit signs the wrong hash too: nothing new may be indexed
    assert w.status()["sync"]["failedRepos"] == []


def test_a_rotated_member_key_is_picked_up(w: World) -> None:
    w.net.rotate_key(w.alice)
    w.net.write(w.space, w.alice, "garden.engram.memory", "3kiiiiiiiii22", memory("signed with the new key"))
    eventually(lambda: "signed with the new key" in w.texts(), "the write under the new key")


def test_an_invalid_memory_is_skipped_with_its_reason(w: World) -> None:
    w.net.write(w.space, w.alice, "garden.engram.memory", "3kjjjjjjjjj22", {"$type": "garden.engram.memory",
                                                                            "text": "no date"})
    w.net.write(w.space, w.alice, "garden.engram.memory", "3kkkkkkkkkk22", memory("valid after it"))
    eventually(lambda: "valid after it" in w.texts(), "the valid write")
    skipped = w.status()["skipped"]
    assert any(s["author"] == w.alice and "not a valid memory" in s["reason"] for s in skipped), skipped
    assert "no date" not in w.texts()


def test_a_synced_vector_of_zeros_is_skipped_with_its_reason_and_one_of_norm_300_is_searchable(w: World) -> None:
    def with_vector(text: str, values: list[float]) -> dict[str, Any]:
        raw = np.array(values, "<f2").tobytes()
        return memory(text) | {"embedding": {**MODEL, "encoding": "f16le",
                                             "vector": {"$bytes": base64.b64encode(raw).decode().rstrip("=")}}}

    w.net.write(w.space, w.alice, "garden.engram.memory", "3kllllllllll2", with_vector("no direction", [0, 0, 0, 0]))
    w.net.write(w.space, w.alice, "garden.engram.memory", "3kmmmmmmmmm22", with_vector("far out", [150, -150, 150, 150]))
    eventually(lambda: {"no direction", "far out"} <= set(w.texts()), "both writes")
    skipped = w.status()["skipped"]
    assert {"author": w.alice, "count": 1, "reason": "vector is all zeros: it has no direction"} in skipped, skipped
    query = base64.urlsafe_b64encode(np.array([1, -1, 1, 1], "<f2").tobytes()).decode().rstrip("=")
    top = w.search("", mode="vector", vector=query, model="m", modelDigest="sha256:00").json()["memories"][0]
    assert top["text"] == "far out" and top["similarity"] == 1000


def test_a_member_who_leaves_takes_their_memories_along_at_the_next_poll(tmp_path: Path) -> None:
    with world(tmp_path, poll_s=1.0) as w:
        w.net.remove_member(w.space, w.alice)
        eventually(lambda: w.texts() == set(), "alice's memories gone")


def test_a_deleted_space_is_forgotten(w: World) -> None:
    w.net.delete_space(w.space)
    eventually(lambda: w.search("memory").status_code == 400, "the space gone")
    assert w.search("memory").json()["error"] == "UnknownSpace"


def test_a_missed_notification_is_healed_by_the_poll(tmp_path: Path) -> None:
    with world(tmp_path, poll_s=1.0) as w:
        w.net.lose_notifications(1)
        w.net.write(w.space, w.alice, "garden.engram.memory", "3kmmmmmmmmm22", memory("never announced"))
        eventually(lambda: "never announced" in w.texts(), "the poll")


def test_a_notification_registration_is_renewed_before_it_lapses(tmp_path: Path) -> None:
    with world(tmp_path, poll_s=0.5, notify_lifetime=60.0) as w:
        def expires() -> float:
            with w.net.lock:
                return w.net.spaces[w.space].registrations[w.did].expires

        first = expires()
        eventually(lambda: expires() > first, "a renewal")
        w.net.write(w.space, w.alice, "garden.engram.memory", "3krenewed2222", memory("after the renewal"))
        eventually(lambda: "after the renewal" in w.texts(), "a notified write")


def test_without_notifications_the_poll_alone_keeps_the_space_current(tmp_path: Path) -> None:
    with world(tmp_path, poll_s=1.0, notify=False) as w:
        assert w.net.registrations(w.space) == {}
        w.net.write(w.space, w.alice, "garden.engram.memory", "3knnnnnnnnn22", memory("polled in"))
        eventually(lambda: "polled in" in w.texts(), "the poll")


def test_a_notification_not_from_the_authority_is_refused(w: World) -> None:
    from engram_index.engram.auth.service_auth import mint_service_auth

    stranger = w.net.account()
    token = mint_service_auth(stranger.key, stranger.did, w.did + "#atproto_space_syncer",
                              "com.atproto.space.notifySpaceDeleted")
    r = httpx.post(f"{w.url}/xrpc/com.atproto.space.notifySpaceDeleted", json={"space": w.space},
                   headers={"authorization": f"Bearer {token}"})
    assert (r.status_code, r.json()["error"]) == (403, "Forbidden")  # as the reference server answers
    assert "the first memory of alice" in w.texts()


NEXT = {"model": "m2", "modelDigest": "sha256:02", "dims": 4}


def next_embedding(axis: int) -> dict[str, Any]:
    vector = np.zeros(4, dtype="<f2")
    vector[axis] = 1
    return {**NEXT, "encoding": "f16le", "vector": {"$bytes": base64.b64encode(vector.tobytes()).decode().rstrip("=")}}


def vector_param(axis: int) -> str:
    return base64.urlsafe_b64encode(np.eye(4, dtype="<f2")[axis].tobytes()).decode().rstrip("=")


def test_a_move_to_the_next_model_switches_searches_over_without_a_window(w: World) -> None:
    authority = w.net.authority.did
    w.net.write(w.space, authority, "garden.engram.config", "self", config(next=NEXT))
    w.net.write(w.space, w.alice, "garden.engram.memory", "3kaaaaaaaaa22",
                memory("the first memory of alice", axis=0, nextEmbedding=next_embedding(2)))
    eventually(lambda: (w.status().get("active"), w.status().get("building")) == (MODEL, NEXT),
               "the config with next")
    assert w.status()["config"] == {**MODEL, "next": NEXT}
    eventually(lambda: w.status().get("buildingMemories") == 1, "alice's vector for the next model")

    def vector_search(model: dict[str, Any], axis: int) -> httpx.Response:
        return w.search("", mode="vector", vector=vector_param(axis), model=model["model"],
                        modelDigest=model["modelDigest"])

    eventually(lambda: vector_search(MODEL, 0).json()["memories"][0]["similarity"] == 1000, "old-model search")
    # The switch: every search meanwhile answers (with one model or the other), none waits for a load.
    w.net.write(w.space, authority, "garden.engram.config", "self", config(**NEXT))
    deadline = time.monotonic() + PATIENCE_S
    while True:
        model = w.status()["active"]
        response = vector_search(NEXT if model == NEXT else MODEL, 2 if model == NEXT else 0)
        assert response.status_code in (200, 400), response.text  # 400: ModelMismatch in the very instant
        if model == NEXT and response.status_code == 200:
            break
        assert time.monotonic() < deadline, "the switch never happened"
    hits = response.json()["memories"]
    assert hits[0]["text"] == "the first memory of alice" and hits[0]["similarity"] == 1000
    old = vector_search(MODEL, 0)
    assert (old.status_code, old.json()["error"]) == (400, "ModelMismatch")
