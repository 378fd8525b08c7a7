"""Memories: get with related and documents, forgetting by id and by description, expiry, lists, profiles."""

from __future__ import annotations

import httpx
import pytest
import supermemory
from supermemory import Supermemory

from tests.supermemory.conftest import Server, add_done, wait_done


def _memory(client: Supermemory, ns: str, text: str) -> str:
    """The id of the memory with this text."""
    rows = client.list(ns, "memories", limit=100, include={"forgotten": True}).memories
    return next(m.id for m in rows if m.memory == text)


def test_a_version_chain_is_walked_nearest_first_in_both_directions(client: Supermemory, ns: str) -> None:
    add_done(client, ns, "My favourite colour is red.", id="colour")
    for colour in ("green", "blue", "black"):
        client.documents.update(ns, "colour", content=f"My favourite colour is {colour}.")
        wait_done(client, ns, "colour")
    black = client.memories.get(ns, _memory(client, ns, "My favourite colour is black."),
                                include=["related", "documents"])
    assert black.version == 4 and black.is_latest
    assert [p.memory for p in black.included.related.parents] == [
        "My favourite colour is blue.", "My favourite colour is green.", "My favourite colour is red."]
    assert all(p.document.id == black.included.document.id for p in black.included.related.parents)
    red = client.memories.get(ns, _memory(client, ns, "My favourite colour is red."), include="related",
                              related_limit=2)
    assert not red.is_latest and [c.memory for c in red.included.related.children] == [
        "My favourite colour is green.", "My favourite colour is blue."]
    found = client.search(ns, query="favourite colour", search_mode="memories", threshold=0,
                          include={"related": True}).results
    assert [m.memory for m in found] == ["My favourite colour is black."]
    assert [p.memory for p in found[0].included.related.parents][:1] == ["My favourite colour is blue."]
    assert found[0].included.related.children == []
    with pytest.raises(supermemory.BadRequestError):
        client.memories.get(ns, black.id, related_limit=0)
    with pytest.raises(supermemory.NotFoundError):
        client.memories.get(ns, "m_missing")


def test_forgetting_by_id_is_soft_and_reported_per_id(client: Supermemory, ns: str) -> None:
    add_done(client, ns, "The wifi password is hunter2.")
    mid = _memory(client, ns, "The wifi password is hunter2.")
    result = client.memories.forget(ns, ids=[mid, "m_nope"])
    assert result.count == 1 == len(result.matches) and result.matches[0].memory == "The wifi password is hunter2."
    assert [(e.id, e.error) for e in result.errors] == [("m_nope", "memory not found")]
    got = client.memories.get(ns, mid)
    assert got.is_forgotten and got.memory == "The wifi password is hunter2."
    assert client.list(ns, "memories").memories == []
    assert [m.is_forgotten for m in client.list(ns, "memories", include={"forgotten": True}).memories] == [True]
    assert client.namespaces.list(q=ns).namespaces[0].memory_count == 0
    with pytest.raises(supermemory.BadRequestError):
        client.memories.forget(ns, ids=[])
    with pytest.raises(supermemory.BadRequestError):
        client.memories.forget(ns, ids=["x"] * 501)


def test_semantic_forgetting_previews_with_dry_run_then_forgets(client: Supermemory, ns: str) -> None:
    add_done(client, ns, "Bob prefers window seats on flights. The office plant needs water weekly.")
    preview = client.memories.forget_matching(ns, query="window seats on flights", dry_run=True)
    assert [m.memory for m in preview.matches] == ["Bob prefers window seats on flights."] and preview.count == 1
    assert not client.memories.get(ns, preview.matches[0].id).is_forgotten
    done = client.memories.forget_matching(ns, query="window seats on flights", dry_run=False)
    assert [m.id for m in done.matches] == [m.id for m in preview.matches]
    assert client.memories.get(ns, done.matches[0].id).is_forgotten
    assert client.memories.forget_matching(ns, query="window seats on flights", dry_run=True).count == 0
    with pytest.raises(supermemory.BadRequestError):
        client.memories.forget_matching(ns, query="", dry_run=True)
    with pytest.raises(supermemory.BadRequestError):
        client.memories.forget_matching(ns, query="x", dry_run=True, extra_body={"reason": "old"})


def test_memories_expire_at_their_documents_forget_after_time(client: Supermemory, ns: str) -> None:
    add_done(client, ns, "The promo code works this week.", metadata={"forgetAfter": "2000-01-01T00:00:00Z"})
    add_done(client, ns, "The promo banner is blue and large.")
    results = client.search(ns, query="promo code", search_mode="memories", threshold=0).results
    assert [r.memory for r in results] == ["The promo banner is blue and large."]
    recalled = client.search(ns, query="promo code", search_mode="memories", threshold=0,
                             include={"forgotten": True}).results
    expired = [r for r in recalled if r.memory == "The promo code works this week."]
    assert expired and expired[0].is_latest is False
    mid = _memory(client, ns, "The promo code works this week.")
    assert client.memories.get(ns, mid).is_forgotten
    client.documents.update(ns, client.list(ns, "documents", sort="createdAt", order="asc").documents[0].id,
                            metadata={"forgetAfter": "2999-01-01T00:00:00Z"})
    assert not client.memories.get(ns, mid).is_forgotten


def test_lists_page_sort_and_filter(client: Supermemory, ns: str) -> None:
    for i in range(3):
        add_done(client, ns, f"Item {i} is in the list. It has a second sentence {i}.", metadata={"i": i})
    docs = client.list(ns, "documents", limit=2, order="asc")
    assert [d.metadata["i"] for d in docs.documents] == [0, 1] and docs.chunks == [] and docs.memories == []
    assert docs.pagination.total_items == 3 and docs.pagination.total_pages == 2
    assert docs.documents[0].content is None and docs.documents[0].system.memory_count is None
    rich = client.list(ns, "documents", include={"content": True, "memoryCount": True}, limit=1)
    assert rich.documents[0].content.startswith("Item 2") and rich.documents[0].system.memory_count == 2
    chunks = client.list(ns, "chunks", sort="position", filter={"field": "i", "operator": "gte", "value": 1})
    assert {c.metadata["i"] for c in chunks.chunks} == {1, 2} and all(c.document_id for c in chunks.chunks)
    memories = client.list(ns, "memories", filter={"field": "i", "operator": "eq", "value": 2}, limit=100)
    assert len(memories.memories) == 2 and memories.pagination.total_items == 2
    for kind in ("documents", "chunks", "memories"):
        for sort in ("createdAt", "updatedAt"):
            for order in ("asc", "desc"):
                assert client.list(ns, kind, sort=sort, order=order).pagination.total_items > 0
    for bad in ({"sort": "position"}, {"limit": 0}, {"limit": 101}, {"page": 0}):
        with pytest.raises(supermemory.BadRequestError):
            client.list(ns, "documents", **bad)  # type: ignore[arg-type]
    with pytest.raises(supermemory.BadRequestError):
        client.list(ns, "documents", include={"forgotten": True})
    with pytest.raises(supermemory.BadRequestError):
        client.list(ns, "bananas")  # type: ignore[arg-type]


def test_profiles_split_static_and_dynamic_and_fill_buckets(client: Supermemory, ns: str, server: Server) -> None:
    add_done(client, ns, "I am allergic to peanuts. Today I am working from home. I play the cello.")
    assert client.profiles.get_buckets(ns).buckets == {}
    assert client.profiles.set_buckets(ns, buckets={"diet": "food, meals, allergies"}).buckets == {
        "diet": "food, meals, allergies"}
    client.profiles.set_buckets(ns, buckets={"music": "instruments and songs, cello"})
    profile = client.profile(ns).profile
    assert {f.memory for f in profile.static} == {"I am allergic to peanuts.", "I play the cello."}
    assert [f.memory for f in profile.dynamic] == ["Today I am working from home."]
    assert [f.memory for f in profile.buckets["diet"]] == ["I am allergic to peanuts."]
    assert [f.memory for f in profile.buckets["music"]] == ["I play the cello."]
    only = client.profile(ns, buckets=["music"]).profile
    assert list(only.buckets) == ["music"]
    with pytest.raises(supermemory.BadRequestError):
        client.profile(ns, buckets=["Not A Slug"])
    with pytest.raises(supermemory.BadRequestError):
        client.profile(ns, extra_body={"q": "x"})
    assert client.profiles.delete_buckets(ns, buckets=["diet", "unknown"]).buckets == {
        "music": "instruments and songs, cello"}
    with pytest.raises(supermemory.BadRequestError):
        client.profiles.delete_buckets(ns, buckets=["music", "music"])
    markdown = httpx.post(f"{server.url}/ns/{ns}/profile", headers={"Authorization": f"Bearer {server.key}",
                                                                    "Accept": "text/markdown"})
    assert markdown.headers["content-type"].startswith("text/markdown") and "- I play the cello." in markdown.text
