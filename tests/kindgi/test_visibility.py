"""Who sees what: two users, a tenant admin, another tenant, and filters applied before the limit."""

from __future__ import annotations

import pytest
from kindgi.client import AuthError, InvalidRequestError, NotFoundError

from tests.kindgi.server import Server

MODES = ["list", "keyword", "semantic", "both"]


def _ids(client: object, mode: str, query: str = "tea", **kw: object) -> set[str]:
    args = {"mode": mode, **({} if mode == "list" else {"query": query}), **kw}
    return {r.fact.id for r in client.memory.retrieve(**args).results}  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", MODES)
def test_a_users_own_facts_are_hidden_from_another_user_and_seen_by_the_tenant_admin(server: Server, mode: str) -> None:
    alice = server.client(user="alice", projects=["web"])
    bob = server.client(user="bob", projects=["web"])
    admin = server.client(admin=True)
    mine = alice.memory.write_fact(type="note", scope={"tenantId": "acme", "userId": "alice"}, content="alice tea")
    shared = alice.memory.write_fact(type="note", scope={"tenantId": "acme", "projectId": "web"}, content="web tea")
    assert _ids(alice, mode) == {mine.id, shared.id}
    assert _ids(bob, mode) == {shared.id}
    assert _ids(admin, mode) == {mine.id, shared.id}


def test_a_fact_the_caller_may_not_see_is_404_exactly_like_one_that_does_not_exist(server: Server) -> None:
    alice = server.client(user="alice", projects=["web"])
    bob = server.client(user="bob")
    fact = alice.memory.write_fact(type="note", scope={"tenantId": "acme", "projectId": "web"}, content="x")
    with pytest.raises(NotFoundError) as hidden:
        bob.memory.get_fact(fact.id)
    with pytest.raises(NotFoundError) as missing:
        bob.memory.get_fact("00000000-0000-0000-0000-000000000000")
    assert hidden.value.server_code == missing.value.server_code == "fact-not-found"
    for call in (lambda: bob.memory.list_fact_revisions(fact.id), lambda: bob.memory.supersede_fact(fact.id, content="y"),
                 lambda: bob.memory.verify_fact(fact.id), lambda: bob.memory.delete_fact(fact.id)):
        with pytest.raises(NotFoundError):
            call()


def test_another_tenants_facts_are_never_seen(server: Server) -> None:
    acme = server.client(user="alice", projects=["web"])
    other = server.client("globex", admin=True)
    fact = acme.memory.write_fact(type="note", scope={"tenantId": "acme", "projectId": "web"}, content="acme tea")
    with pytest.raises(NotFoundError):
        other.memory.get_fact(fact.id)
    assert other.memory.list_facts().data == []
    assert _ids(other, "keyword") == set() and _ids(other, "both") == set()


@pytest.mark.parametrize("call", ["write", "retrieve", "list"])
def test_a_scope_naming_another_tenant_is_400_scope_mismatch(server: Server, call: str) -> None:
    client = server.client(user="alice", projects=["web"])
    with pytest.raises(InvalidRequestError) as err:
        if call == "write":
            client.memory.write_fact(type="note", scope={"tenantId": "globex", "projectId": "web"}, content="x")
        elif call == "retrieve":
            client.memory.retrieve(mode="list", scope={"tenantId": "globex"})
        else:
            client.memory.list_facts(scope='{"tenantId": "globex"}')
    assert err.value.status == 400 and err.value.server_code == "scope-mismatch"


@pytest.mark.parametrize("scope", [
    {"tenantId": "acme"},  # tenant-wide: admins only
    {"tenantId": "acme", "userId": "bob"},
    {"tenantId": "acme", "projectId": "secret"},
    {"tenantId": "acme", "orgId": "other-org"},
    {"tenantId": "acme", "threadId": "t1"},
])
def test_writing_where_the_caller_holds_no_right_is_403_permission_denied(server: Server, scope: dict[str, str]) -> None:
    client = server.client(user="alice", orgs=["o1"], projects=["web"])
    with pytest.raises(AuthError) as err:
        client.memory.write_fact(type="note", scope=scope, content="x")
    assert err.value.status == 403 and err.value.server_code == "permission-denied"


def test_a_retrieve_scope_is_a_filter_where_every_key_given_must_match(server: Server) -> None:
    client = server.client(user="alice", orgs=["o1"], projects=["web", "app"])
    web = client.memory.write_fact(type="note", scope={"tenantId": "acme", "projectId": "web", "threadId": "t1"},
                                   content="tea in web")
    client.memory.write_fact(type="note", scope={"tenantId": "acme", "projectId": "app"}, content="tea in app")
    for mode in MODES:
        assert _ids(client, mode, scope={"tenantId": "acme", "projectId": "web"}) == {web.id}
        assert _ids(client, mode, scope={"tenantId": "acme", "projectId": "web", "threadId": "t2"}) == set()


def test_conversation_facts_are_seen_by_holders_of_their_project(server: Server) -> None:
    writer = server.client(service="app", projects=["web"])
    reader = server.client(user="carol", projects=["web"])
    outsider = server.client(user="dave", projects=["app"])
    fact = writer.memory.write_fact(type="note", content="participant tea",
                                    scope={"tenantId": "acme", "projectId": "web", "participantId": "p1"})
    assert _ids(reader, "keyword") == {fact.id}
    assert _ids(outsider, "keyword") == set()


@pytest.mark.parametrize("mode", MODES)
def test_a_limit_of_10_returns_10_visible_facts_when_there_are(server: Server, mode: str) -> None:
    alice = server.client(user="alice", projects=["web"])
    bob = server.client(user="bob", projects=["web"])
    for i in range(12):
        bob.memory.write_fact(type="note", scope={"tenantId": "acme", "userId": "bob"}, content=f"bob tea {i}")
    mine = [alice.memory.write_fact(type="note", scope={"tenantId": "acme", "userId": "alice"},
                                    content=f"alice tea {i}").id for i in range(11)]
    for i in range(12):
        bob.memory.write_fact(type="note", scope={"tenantId": "acme", "userId": "bob"}, content=f"bob tea later {i}")
    found = _ids(alice, mode, limit=10)
    assert len(found) == 10 and found <= set(mine)


@pytest.mark.parametrize("mode", MODES)
def test_a_token_with_many_projects_sees_exactly_its_facts_too(server: Server, mode: str) -> None:
    many = [f"p{i}" for i in range(130)]  # past the combined-tag limit: the per-kind groups filter
    reader = server.client(user="erin", projects=many)
    writer = server.client(admin=True)
    seen = {writer.memory.write_fact(type="note", scope={"tenantId": "acme", "projectId": p}, content=f"tea {p}").id
            for p in ("p0", "p129")}
    seen.add(writer.memory.write_fact(type="note", scope={"tenantId": "acme", "userId": "erin"}, content="erin tea").id)
    writer.memory.write_fact(type="note", scope={"tenantId": "acme", "projectId": "p130"}, content="tea elsewhere")
    writer.memory.write_fact(type="note", scope={"tenantId": "acme", "userId": "frank"}, content="frank tea")
    assert _ids(reader, mode) == seen


@pytest.mark.parametrize("mode", ["keyword", "both"])
def test_conversation_context_never_brings_in_a_fact_the_caller_may_not_see(server: Server, mode: str) -> None:
    alice = server.client(user="alice", projects=["web"])
    bob = server.client(user="bob", projects=["web"])
    talk = {"tenantId": "acme", "projectId": "web", "threadId": "t-ctx", "sessionId": "s-ctx"}
    question = alice.memory.write_fact(type="turn", scope=talk, content="which glacier did you hike")
    answer = alice.memory.write_fact(type="turn", scope=talk, content="the one near the lake")
    # Written just after the answer, in the same session, but bob's alone: the answer's successor.
    aside = bob.memory.write_fact(type="turn", scope={**talk, "userId": "bob"}, content="an aside of mine")
    found = _ids(alice, mode, query="Which glacier did they hike?")
    assert question.id in found and answer.id in found  # the answer, by its question just before it
    assert aside.id not in found and aside.id in _ids(bob, mode, query="Which glacier near the lake?")
    assert aside.id not in _ids(alice, mode, query="Where is the lake?")
