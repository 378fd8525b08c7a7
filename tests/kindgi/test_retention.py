"""Retention (keepUntil, keepDays, legalHold), expiry, validity times and review: pending."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from kindgi.client import ConflictError, InvalidRequestError, NotFoundError

from tests.kindgi.server import Server

SCOPE = {"tenantId": "acme", "projectId": "web"}


def test_expires_at_is_computed_from_keep_until_or_keep_days_after_the_first_write(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    until = (datetime.now(timezone.utc) + timedelta(days=3)).replace(microsecond=0)
    a = client.memory.write_fact(type="note", scope=SCOPE, content="a", retention={"keepUntil": until.isoformat()})
    assert a.expires_at == until
    b = client.memory.write_fact(type="note", scope=SCOPE, content="b", retention={"keepDays": 2})
    assert b.expires_at == b.created_at + timedelta(days=2)
    later = client.memory.supersede_fact(b.id, content="b2")
    assert later.expires_at == b.expires_at  # from the fact's first write, not the revision's
    both = client.memory.write_fact(type="note", scope=SCOPE, content="c",
                                    retention={"keepDays": 30, "keepUntil": until.isoformat()})
    assert both.expires_at == until
    assert client.memory.write_fact(type="note", scope=SCOPE, content="d").expires_at is None


def test_no_read_returns_a_fact_past_its_expiry(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    past = (datetime.now(timezone.utc) - timedelta(minutes=1)).isoformat()
    gone = client.memory.write_fact(type="note", scope=SCOPE, content="expired walrus", retention={"keepUntil": past})
    kept = client.memory.write_fact(type="note", scope=SCOPE, content="kept walrus")
    with pytest.raises(NotFoundError):
        client.memory.get_fact(gone.id)
    with pytest.raises(NotFoundError):
        client.memory.list_fact_revisions(gone.id)
    assert [f.id for f in client.memory.list_facts().data] == [kept.id]
    for mode in ("list", "keyword", "semantic", "both"):
        query = None if mode == "list" else "walrus"
        assert [r.fact.id for r in client.memory.retrieve(mode=mode, query=query).results] == [kept.id]


def test_legal_hold_blocks_delete_and_erasure_with_409_legal_hold(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    admin = server.client(admin=True)
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="held", retention={"legalHold": True},
                                    subjects=[{"kind": "external", "id": "ext-1"}])
    with pytest.raises(ConflictError) as deleting:
        client.memory.delete_fact(fact.id)
    assert deleting.value.server_code == "legal-hold" and deleting.value.details == {"factId": fact.id}
    for selector in ({"factId": fact.id}, {"subject": {"kind": "external", "id": "ext-1"}}):
        with pytest.raises(ConflictError) as erasing:
            admin.memory.create_erasure(selector)
        assert erasing.value.server_code == "legal-hold" and erasing.value.details == {"factIds": [fact.id]}
    assert client.memory.get_fact(fact.id).content == "held"
    released = client.memory.supersede_fact(fact.id, content="held", retention={"legalHold": False})
    assert client.memory.delete_fact(released.id).invalidation_reason == "deleted"


def test_a_fact_pending_review_is_never_retrieved_until_verified(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact({"type": "note", "scope": SCOPE, "content": "unreviewed platypus",
                                     "review": "pending"})
    assert fact.review == "pending"
    for mode in ("list", "keyword", "semantic", "both"):
        query = None if mode == "list" else "platypus"
        assert client.memory.retrieve(mode=mode, query=query).results == []
    assert client.memory.list_facts().data == []
    assert client.memory.get_fact(fact.id).review == "pending"  # a reviewer can read it to approve it
    approved = client.memory.verify_fact(fact.id)
    assert approved.review is None and approved.trust == "verified"
    assert [r.fact.id for r in client.memory.retrieve(mode="keyword", query="platypus").results] == [fact.id]


def test_validity_times_are_kept_and_a_window_backwards_is_refused(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="x", valid_from="2026-01-01T00:00:00Z",
                                    valid_until="2026-06-01T00:00:00Z", observed_at="2025-12-31T23:00:00Z")
    assert fact.valid_from == datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert fact.valid_until == datetime(2026, 6, 1, tzinfo=timezone.utc)
    assert fact.observed_at == datetime(2025, 12, 31, 23, tzinfo=timezone.utc)
    with pytest.raises(InvalidRequestError) as err:
        client.memory.write_fact(type="note", scope=SCOPE, content="x", valid_from="2026-06-01T00:00:00Z",
                                 valid_until="2026-01-01T00:00:00Z")
    assert err.value.server_code == "validation-failed"


@pytest.mark.parametrize("retention, code", [
    ({"keepDays": 0}, "validation-failed"),
    ({"keepDays": "7"}, "bad-input"),
    ({"legalHold": "yes"}, "bad-input"),
    ({"keepUntil": "tomorrow"}, "bad-input"),
])
def test_malformed_retention_is_refused(server: Server, retention: dict[str, object], code: str) -> None:
    import httpx

    token = server.token(user="alice", projects=["web"])
    answer = httpx.post(f"{server.url}/v1/memory/facts", headers={"Authorization": f"Bearer {token}"},
                        json={"type": "note", "scope": SCOPE, "content": "x", "retention": retention})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == code
