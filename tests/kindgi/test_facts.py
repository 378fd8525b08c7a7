"""Facts and their revisions through the official SDK: write, get, list, supersede, verify, delete."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from kindgi.client import ConflictError, NotFoundError, paginate

from tests.kindgi.server import Server

SCOPE = {"tenantId": "acme", "projectId": "web"}


def test_a_written_fact_is_answered_201_with_version_1_attributed_to_the_caller(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact(type="preference", scope=SCOPE, content={"drink": "green tea"},
                                    attributedTo={"kind": "user", "id": "mallory"})
    assert fact.version == 1 and fact.type == "preference" and fact.scope.tenant_id == "acme"
    assert fact.created_at.tzinfo is not None
    assert fact.attributed_to is not None and (fact.attributed_to.kind, fact.attributed_to.id) == ("user", "alice")
    assert fact.trust == "asserted" and fact.revision_id is None and fact.content == {"drink": "green tea"}
    assert fact.content_hash is not None and fact.content_hash.startswith("sha256:") and fact.size


def test_a_service_token_attributes_its_facts_to_the_service(server: Server) -> None:
    client = server.client(service="ingest", projects=["web"])
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="x")
    assert fact.attributed_to is not None and (fact.attributed_to.kind, fact.attributed_to.id) == ("service", "ingest")


def test_answers_leave_absent_fields_out_and_carry_the_required_ones(server: Server) -> None:
    token = server.token(user="alice", projects=["web"])
    answer = httpx.post(f"{server.url}/v1/memory/facts", headers={"Authorization": f"Bearer {token}"},
                        json={"type": "note", "scope": SCOPE, "content": "plain"})
    assert answer.status_code == 201
    body = answer.json()
    assert {"id", "type", "scope", "version", "createdAt"} <= set(body)
    assert None not in body.values() and "null" not in answer.text
    assert datetime.fromisoformat(body["createdAt"]).tzinfo is not None


def test_get_reads_the_current_revision_a_version_or_the_revision_current_at_a_time(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    first = client.memory.write_fact(type="note", scope=SCOPE, content="one")
    second = client.memory.supersede_fact(first.id, content="two", expect_version=1)
    assert client.memory.get_fact(first.id).content == "two"
    assert client.memory.get_fact(first.id, version=1).content == "one"
    between = (first.created_at + (second.created_at - first.created_at) / 2).isoformat()
    assert client.memory.get_fact(first.id, as_of=between).version == 1
    assert client.memory.get_fact(first.id, as_of=second.created_at.isoformat()).version == 2
    before = (first.created_at - timedelta(seconds=1)).isoformat()
    with pytest.raises(NotFoundError):
        client.memory.get_fact(first.id, as_of=before)


def test_supersede_keeps_the_id_adds_one_to_the_version_and_closes_the_old_revision(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    first = client.memory.write_fact(type="note", scope=SCOPE, content="one", subjects=[{"kind": "external", "id": "e1"}])
    second = client.memory.supersede_fact(first.id, content="two")
    assert second.id == first.id and second.version == 2 and second.supersedes == first.id
    assert second.revision_id not in (None, first.id) and second.subjects is not None
    revisions = client.memory.list_fact_revisions(first.id).data
    assert [r.version for r in revisions] == [2, 1]
    old = revisions[1]
    assert old.invalidation_reason == "superseded" and old.invalidated_by == "user:alice"
    assert old.invalidated_at == second.created_at
    third = client.memory.supersede_fact(first.id, content="three")
    assert third.supersedes == second.revision_id


def test_verify_writes_the_next_revision_verified_by_the_caller(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="checked")
    verified = client.memory.verify_fact(fact.id)
    assert verified.version == 2 and verified.trust == "verified" and verified.verified_by == "user:alice"
    assert verified.verified_at is not None and verified.content == "checked"
    again = client.memory.verify_fact(fact.id, {"expectVersion": 2})
    assert again.version == 3


def test_delete_tombstones_the_fact_and_keeps_its_history(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="doomed words")
    gone = client.memory.delete_fact(fact.id, expect_version=1)
    assert gone.invalidation_reason == "deleted" and gone.invalidated_by == "user:alice" and gone.version == 1
    with pytest.raises(NotFoundError) as err:
        client.memory.get_fact(fact.id)
    assert err.value.server_code == "fact-not-found" and err.value.details == {"factId": fact.id}
    assert client.memory.list_facts().data == []
    assert client.memory.retrieve(mode="keyword", query="doomed").results == []
    assert [r.invalidation_reason for r in client.memory.list_fact_revisions(fact.id).data] == ["deleted"]
    with pytest.raises(NotFoundError):
        client.memory.delete_fact(fact.id)


@pytest.mark.parametrize("change", ["supersede", "verify", "delete"])
def test_an_expect_version_that_no_longer_holds_is_409_fact_changed_with_the_current_version(
        server: Server, change: str) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="v1")
    client.memory.supersede_fact(fact.id, content="v2")
    with pytest.raises(ConflictError) as err:
        if change == "supersede":
            client.memory.supersede_fact(fact.id, content="v3", expect_version=1)
        elif change == "verify":
            client.memory.verify_fact(fact.id, expect_version=1)
        else:
            client.memory.delete_fact(fact.id, expect_version=1)
    assert err.value.status == 409 and err.value.server_code == "fact-changed"
    assert err.value.details == {"factId": fact.id, "currentVersion": 2}


def test_list_pages_newest_first_with_a_cursor(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    ids = [client.memory.write_fact(type="note", scope=SCOPE, content=f"fact {i}").id for i in range(7)]
    page = client.memory.list_facts(limit=3)
    assert [f.id for f in page.data] == ids[::-1][:3] and page.has_more and page.next_cursor
    assert [f.id for f in paginate(client.memory.list_facts, limit=3)] == ids[::-1]
    last = client.memory.list_facts(limit=7)
    assert not last.has_more and last.next_cursor is None


def test_list_filters_by_type_partial_scope_and_platform_scope(server: Server) -> None:
    client = server.client(user="alice", orgs=["o1"], projects=["web", "app"])
    a = client.memory.write_fact(type="note", scope={"tenantId": "acme", "projectId": "web"}, content="a")
    b = client.memory.write_fact(type="task", scope={"tenantId": "acme", "projectId": "app"}, content="b")
    c = client.memory.write_fact(type="note", scope={"tenantId": "acme", "orgId": "o1"}, content="c")
    assert [f.id for f in client.memory.list_facts(type="task").data] == [b.id]
    assert [f.id for f in client.memory.list_facts(scope=json.dumps({"projectId": "web"})).data] == [a.id]
    assert [f.id for f in client.memory.list_facts(scope_kind="org", scope_id="o1").data] == [c.id]
    assert {f.id for f in client.memory.list_facts(scope_kind="project", scope_id="app", inherit=True).data} == {b.id, c.id}


def test_list_as_of_shows_memory_as_it_stood_then(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="old")
    then = client.memory.get_fact(fact.id).created_at
    client.memory.supersede_fact(fact.id, content="new")
    client.memory.delete_fact(fact.id)
    assert client.memory.list_facts().data == []
    assert [f.content for f in client.memory.list_facts(as_of=then.isoformat()).data] == ["old"]


def test_list_as_of_pages_the_revisions_alive_then_newest_first_current_and_closed_alike(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    a = client.memory.write_fact(type="note", scope=SCOPE, content="a")
    b = client.memory.write_fact(type="note", scope=SCOPE, content="b1")
    c = client.memory.write_fact(type="note", scope=SCOPE, content="c")
    before = client.memory.get_fact(c.id).created_at.isoformat()
    client.memory.supersede_fact(b.id, content="b2")
    client.memory.delete_fact(c.id)
    after = client.memory.write_fact(type="note", scope=SCOPE, content="d").created_at.isoformat()
    client.memory.write_fact(type="note", scope=SCOPE, content="e")

    def contents(as_of: str) -> list[str]:
        return [f.content for f in paginate(client.memory.list_facts, as_of=as_of, limit=1)]  # type: ignore[misc]

    assert contents(before) == ["c", "b1", "a"]
    assert contents(after) == ["d", "b2", "a"]
    assert a.id in {f.id for f in client.memory.list_facts(as_of=after).data}


def test_a_supersede_keeps_fields_it_does_not_change_and_replaces_those_it_does(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    until = datetime.now(timezone.utc) + timedelta(days=30)
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="x", valid_from="2026-01-01T00:00:00Z",
                                    observed_at="2026-02-01T10:00:00+02:00", retention={"keepUntil": until.isoformat()})
    nxt = client.memory.supersede_fact(fact.id, content="y", valid_until="2027-01-01T00:00:00Z")
    assert nxt.valid_from == fact.valid_from and nxt.valid_until is not None and nxt.observed_at == fact.observed_at
    assert nxt.observed_at is not None and nxt.observed_at.utcoffset() == timedelta(0)
    assert nxt.retention is not None and nxt.expires_at == fact.expires_at


def test_a_listing_judges_visibility_in_the_time_index_and_reads_only_the_pages_rows(server: Server) -> None:
    # A caller's newest facts can lie behind many it may not see (another project's, another user's):
    # those must be skipped in the index, not each read from the table, or a page costs what they number.
    from engram_index.kindgi.auth import Principal
    from engram_index.store.sqlite import Store

    writer = server.client(user="alice", projects=["web", "app"])
    writer.memory.write_fact(type="note", scope=SCOPE, content="seen")
    writer.memory.write_fact(type="note", scope={"tenantId": "acme", "projectId": "app"}, content="hidden")
    facts = server.app.state.kindgi.facts
    if not isinstance(facts.store, Store):
        pytest.skip("the plan asked of SQLite")
    reader = Principal("acme", "k", user="alice", projects=frozenset({"web"}))
    conn = facts.store._reader()
    for as_of in (None, facts.clock()):  # now, and memory as it stood at a time (every revision alive then)
        seen: list[str] = []
        conn.set_trace_callback(seen.append)
        listed, _ = facts.page(reader, limit=5, type_="note", scope={"projectId": "web"}, as_of=as_of)
        conn.set_trace_callback(None)
        assert [f["content"] for f in listed] == ["seen"]
        sql = next(s for s in seen if s.startswith("SELECT"))
        plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql)]
        scans = [step for step in plan if step.startswith(("SCAN kindgi", "SEARCH kindgi"))]
        assert scans and all("COVERING INDEX kindgi_by_time" in step for step in scans), plan
        assert not any(step.startswith("SEARCH kindgi") and "(tenant=?)" in step for step in plan), plan
