"""The fake space network, checked the way a syncer checks real hosts (without the syncer)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from engram_index.engram.identity.keys import P256, PrivateKey, parse_public_key
from engram_index.engram.sync.car import read_car
from engram_index.engram.sync.lthash import LtHash
from engram_index.engram.sync.verify import check_commit, export_state, record_json, value_matches
from engram_index.testkit.spacenet import SpaceNetwork

from .spacenet_reader import (
    HTTP,
    SERVICE_DID,
    Reader,
    Receiver,
    audience,
    delegation_token,
    fold,
    receiver,
    repo_host,
    request_credential,
    space_host,
)

MEMORY = "garden.engram.memory"


@pytest.fixture(scope="module")
def net() -> Iterator[SpaceNetwork]:
    with SpaceNetwork(pds_count=2) as network:
        yield network


@pytest.fixture(scope="module")
def inbox(net: SpaceNetwork) -> Iterator[Receiver]:
    with receiver(net) as box:
        yield box


def memory(text: str) -> dict[str, object]:
    return {"$type": MEMORY, "text": text, "createdAt": "2026-01-01T00:00:00.000Z",
            "vector": {"$bytes": "AAA8"}}


def world(net: SpaceNetwork) -> tuple[str, str, str, Reader]:
    """A space with two members on different repo hosts, and a reader signed in as the indexer."""
    alice, bob, indexer = net.account(pds=0), net.account(pds=1), net.account()
    space = net.create_space(members=[alice.did, bob.did], readers=[indexer.did])
    return space, alice.did, bob.did, Reader.sign_in(net, indexer, space)


def test_a_reader_gets_a_credential_and_lists_the_members_repos(net: SpaceNetwork) -> None:
    space, alice, bob, reader = world(net)
    carol = net.account()
    net.add_member(space, carol.did)
    revs = {did: net.write(space, did, MEMORY, "3kaaa", memory(did)) for did in (alice, bob, carol.did)}
    assert space_host(net, space) == net.host.url and audience(net.host.url) == net.host.did
    assert HTTP.get(f"{net.host.url}/.well-known/did.json").json()["id"] == net.host.did
    assert {r["did"]: r["rev"] for r in reader.list_repos()} == revs  # three repos over two pages of 2


def test_op_values_match_their_cids_and_the_ops_fold_to_the_signed_commit(net: SpaceNetwork) -> None:
    space, alice, _, reader = world(net)
    net.apply(space, alice, [(MEMORY, "a", memory("one")), (MEMORY, "b", memory("two")), (MEMORY, "c", memory("x"))])
    net.write(space, alice, MEMORY, "a", memory("one, edited"))
    net.delete(space, alice, MEMORY, "c")
    ops, commit = reader.ops(alice, limit=2)  # the batch of three is one page: revs are never split
    assert [(op.rkey, op.cid is None, op.prev is None) for op in ops] == [
        ("a", False, True), ("b", False, True), ("c", False, True), ("a", False, False), ("c", True, False)]
    assert [op.value is not None for op in ops] == [False, True, False, True, False]  # current values only
    assert all(value_matches(op) for op in ops if op.value is not None)
    _, key = repo_host(net, alice)
    state = fold(LtHash(), ops)
    assert check_commit(commit, key, space, alice, state) is None
    assert commit.rev == net.repo_rev(space, alice) == ops[-1].rev

    later = net.write(space, alice, MEMORY, "d", memory("three"))
    more, newer = reader.ops(alice, since=commit.rev)
    assert [op.rev for op in more] == [later]
    assert check_commit(newer, key, space, alice, fold(state, more)) is None
    assert reader.ops(alice, since=later)[0] == []


def test_each_reader_gets_a_fresh_commit_ikm(net: SpaceNetwork) -> None:
    space, alice, _, reader = world(net)
    net.write(space, alice, MEMORY, "a", memory("one"))
    first, second = reader.ops(alice)[1], reader.ops(alice)[1]
    assert first.ikm != second.ikm and first.hash == second.hash and first.rev == second.rev


def test_the_repo_car_reads_and_verifies_with_the_members_key(net: SpaceNetwork) -> None:
    space, _, bob, reader = world(net)
    net.apply(space, bob, [(MEMORY, f"r{i}", memory(f"memory {i}")) for i in range(5)])
    net.delete(space, bob, MEMORY, "r2")
    host, key = repo_host(net, bob)
    response = reader.get(host, "com.atproto.space.getRepo", repo=bob)
    assert response.headers["content-type"] == "application/vnd.ipld.car"
    export = read_car(response.content)
    assert check_commit(export.commit, key, space, bob, export_state(export)) is None
    assert {path: record_json(block) for path, block in export.records.items()} == net.records(space, bob)


def test_reads_without_a_valid_credential_are_401(net: SpaceNetwork) -> None:
    space, alice, _, reader = world(net)
    net.write(space, alice, MEMORY, "a", memory("one"))
    host, _ = repo_host(net, alice)
    other = net.create_space(readers=[])
    assert HTTP.get(f"{host}/xrpc/com.atproto.space.listRepoOps", params={"space": space, "repo": alice}
                     ).status_code == 401
    assert HTTP.get(f"{net.host.url}/xrpc/com.atproto.space.listRepos", params={"space": space}).status_code == 401
    wrong_space = HTTP.get(f"{net.host.url}/xrpc/com.atproto.space.listRepos", params={"space": other},
                            headers=reader.headers(net.host.url))
    assert wrong_space.status_code == 401 and wrong_space.json()["error"] == "InvalidToken"
    # Signed for the space host, sent to the repo host: the audience is not that host's DID.
    misaddressed = HTTP.get(f"{host}/xrpc/com.atproto.space.getRepo", params={"space": space, "repo": alice},
                             headers=reader.headers(net.host.url))
    assert misaddressed.status_code == 401 and misaddressed.json()["error"] == "BadSpaceAudience"
    register = HTTP.post(f"{net.host.url}/xrpc/com.atproto.space.registerNotify",
                          json={"space": space, "service": SERVICE_DID, "endpoint": "http://127.0.0.1:9"})
    assert register.status_code == 401


def test_only_readers_and_members_get_a_credential_and_only_with_a_true_signature(net: SpaceNetwork) -> None:
    outsider, indexer = net.account(), net.account()
    space = net.create_space(readers=[indexer.did])
    key = PrivateKey.generate(P256)
    refused = request_credential(net.host.url, delegation_token(outsider, space), key)
    assert refused.status_code == 403
    token = delegation_token(indexer, space)
    assert request_credential(net.host.url, token, key, keyid=PrivateKey.generate(P256).did_key).status_code == 401
    assert request_credential(net.host.url, token + "x", key).status_code == 401
    wrong_password = HTTP.post(f"{indexer.pds}/xrpc/com.atproto.server.createSession",
                                json={"identifier": indexer.did, "password": "guess"})
    assert wrong_password.status_code == 401
    assert request_credential(net.host.url, token, key).status_code == 200


def test_a_corrupted_commit_signature_fails_once(net: SpaceNetwork) -> None:
    space, alice, _, reader = world(net)
    net.write(space, alice, MEMORY, "a", memory("one"))
    _, key = repo_host(net, alice)
    net.corrupt_next_commit(alice)
    ops, bad = reader.ops(alice)
    assert "signature" in (check_commit(bad, key, space, alice, fold(LtHash(), ops)) or "")
    assert check_commit(reader.ops(alice)[1], key, space, alice, fold(LtHash(), ops)) is None


def test_a_wrong_value_and_omitted_values_are_reported_as_armed(net: SpaceNetwork) -> None:
    space, alice, _, reader = world(net)
    net.write(space, alice, MEMORY, "a", memory("one"))
    net.report_wrong_value(alice)
    (wrong,), _ = reader.ops(alice)
    assert wrong.value is not None and not value_matches(wrong)
    net.omit_values(alice)
    (bare,), _ = reader.ops(alice)
    assert bare.value is None and bare.cid == wrong.cid
    (good,), _ = reader.ops(alice)
    assert value_matches(good)


def test_a_dropped_op_or_a_wrong_set_hash_makes_the_fold_disagree(net: SpaceNetwork) -> None:
    space, alice, bob, reader = world(net)
    for did in (alice, bob):
        net.write(space, did, MEMORY, "a", memory("one"))
        net.write(space, did, MEMORY, "b", memory("two"))
    net.drop_op(space, alice)
    ops, commit = reader.ops(alice)
    assert len(ops) == 1
    assert "set hash" in (check_commit(commit, repo_host(net, alice)[1], space, alice, fold(LtHash(), ops)) or "")
    net.sign_wrong_hash(bob)
    ops, commit = reader.ops(bob)
    assert "set hash" in (check_commit(commit, repo_host(net, bob)[1], space, bob, fold(LtHash(), ops)) or "")


def test_after_a_key_rotation_commits_verify_only_with_the_new_key(net: SpaceNetwork) -> None:
    space, alice, _, reader = world(net)
    net.write(space, alice, MEMORY, "a", memory("one"))
    _, old = repo_host(net, alice)
    Reader.sign_in(net, net.accounts[alice], space)  # the space host now holds her old document
    new = net.rotate_key(alice)
    Reader.sign_in(net, net.accounts[alice], space)  # her delegation tokens are signed with the new key
    ops, commit = reader.ops(alice)
    state = fold(LtHash(), ops)
    assert check_commit(commit, old, space, alice, state) is not None
    _, published = repo_host(net, alice)
    assert published == parse_public_key(new.did_key)
    assert check_commit(commit, published, space, alice, state) is None


def test_a_removed_member_is_gone_from_list_repos_and_its_repo_is_404(net: SpaceNetwork) -> None:
    space, alice, bob, reader = world(net)
    for did in (alice, bob):
        net.write(space, did, MEMORY, "a", memory("one"))
    net.remove_member(space, bob)
    assert [r["did"] for r in reader.list_repos()] == [alice]
    host, _ = repo_host(net, bob)
    for nsid in ("com.atproto.space.listRepoOps", "com.atproto.space.getRepo"):
        response = reader.get(host, nsid, repo=bob)
        assert response.status_code == 404 and response.json()["error"] == "RepoNotFound"
    with pytest.raises(PermissionError):
        net.write(space, bob, MEMORY, "b", memory("two"))
    elsewhere, _ = repo_host(net, alice)  # a repo host holds only its own accounts' repos
    assert elsewhere != host and reader.get(host, "com.atproto.space.getRepo", repo=alice).status_code == 404


def test_a_space_host_can_be_published_as_the_authoritys_pds() -> None:
    net = SpaceNetwork(space_host_service=False)  # not served: only the published document is looked at
    services = {s["id"]: s["serviceEndpoint"] for s in net.plc.documents[net.authority.did]["service"]}
    assert services == {"#atproto_pds": net.host.url}


def test_a_truncated_log_answers_since_not_found_for_older_revs(net: SpaceNetwork) -> None:
    space, alice, _, reader = world(net)
    revs = [net.write(space, alice, MEMORY, f"r{i}", memory(str(i))) for i in range(4)]
    net.truncate_log(space, alice, keep=2)
    host, _ = repo_host(net, alice)
    for since in ({}, {"since": revs[0]}):
        response = reader.get(host, "com.atproto.space.listRepoOps", repo=alice, **since)
        assert response.status_code == 400 and response.json()["error"] == "SinceNotFound"
    ops, _ = reader.ops(alice, since=revs[1])
    assert [op.rev for op in ops] == revs[2:]


def test_slow_hosts_still_answer(net: SpaceNetwork) -> None:
    space, alice, _, reader = world(net)
    net.write(space, alice, MEMORY, "a", memory("one"))
    host, _ = repo_host(net, alice)
    net.set_delay(0.5)
    try:
        with pytest.raises(httpx.ReadTimeout):
            HTTP.get(f"{host}/xrpc/com.atproto.space.listRepoOps", params={"space": space, "repo": alice},
                      headers=reader.headers(host), timeout=0.05)
        assert reader.ops(alice)[0][0].rkey == "a"
    finally:
        net.set_delay(0.0)


def register(reader: Reader, endpoint: str) -> httpx.Response:
    return HTTP.post(f"{net_host(reader)}/xrpc/com.atproto.space.registerNotify",
                      json={"space": reader.space, "service": SERVICE_DID, "endpoint": endpoint},
                      headers=reader.headers(net_host(reader)))


def net_host(reader: Reader) -> str:
    return space_host(reader.net, reader.space)


def test_writes_are_notified_with_service_auth_and_a_space_rev_chain(net: SpaceNetwork, inbox: Receiver) -> None:
    space, alice, bob, reader = world(net)
    net.write(space, alice, MEMORY, "before", memory("not notified: nobody registered yet"))
    response = register(reader, inbox.url)
    assert response.status_code == 200 and "expiresAt" in response.json()
    revs = [net.write(space, alice, MEMORY, "a", memory("one")), net.write(space, bob, MEMORY, "a", memory("two"))]
    net.flush_notifications()
    bodies = inbox.bodies(space)
    assert [(b["repo"], b["repoRev"]) for b in bodies] == [(alice, revs[0]), (bob, revs[1])]
    assert bodies[1]["prevSpaceRev"] == bodies[0]["spaceRev"] < bodies[1]["spaceRev"]
    assert {issuer for _, issuer, body in inbox.received if body.get("space") == space} == {net.authority.did}
    assert not inbox.refused


def test_lost_notifications_leave_a_gap_in_the_space_rev_chain(net: SpaceNetwork, inbox: Receiver) -> None:
    space, alice, _, reader = world(net)
    register(reader, inbox.url).raise_for_status()
    net.write(space, alice, MEMORY, "a", memory("one"))
    net.lose_notifications(1)
    net.write(space, alice, MEMORY, "b", memory("two"))
    net.write(space, alice, MEMORY, "c", memory("three"))
    net.flush_notifications()
    first, third = inbox.bodies(space)
    assert third["prevSpaceRev"] != first["spaceRev"]


def test_a_deleted_space_is_404_and_its_services_are_told(net: SpaceNetwork, inbox: Receiver) -> None:
    space, alice, _, reader = world(net)
    net.write(space, alice, MEMORY, "a", memory("one"))
    register(reader, inbox.url).raise_for_status()
    net.delete_space(space)
    net.flush_notifications()
    assert inbox.bodies(space, "com.atproto.space.notifySpaceDeleted") == [{"space": space}]
    host, _ = repo_host(net, alice)
    for url, nsid in ((net.host.url, "com.atproto.space.listRepos"), (host, "com.atproto.space.listRepoOps")):
        response = reader.get(url, nsid, repo=alice)
        assert response.status_code == 404 and response.json()["error"] == "SpaceNotFound"
