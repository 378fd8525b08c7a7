"""Namespaces: created by their first document, listed with counts, described, deleted or moved, isolated."""

from __future__ import annotations

import httpx
import pytest
import supermemory
from supermemory import Supermemory

from tests.supermemory.conftest import Server, add_done, wait_done


def test_a_namespace_is_created_by_its_first_document_and_listed_with_counts(client: Supermemory, ns: str,
                                                                               server: Server) -> None:
    with pytest.raises(supermemory.NotFoundError):
        client.namespaces.get(ns)
    add_done(client, ns, "The first fact. The second fact here.")
    add_done(client, ns, "Third fact is here.")
    listed = client.namespaces.list(q=ns.upper(), limit=100)
    assert [(n.namespace, n.document_count, n.memory_count) for n in listed.namespaces] == [(ns, 2, 3)]
    assert listed.pagination.total_items == 1 and listed.pagination.current_page == 1
    headers = {"Authorization": f"Bearer {server.key}"}
    params = {"q": ns}
    assert httpx.get(f"{server.url}/ns", params=params, headers=headers).json() == httpx.get(
        f"{server.url}/namespaces", params=params, headers=headers).json()
    for bad in ({"limit": "0"}, {"limit": "101"}, {"page": "0"}, {"extra": "1"}):
        assert httpx.get(f"{server.url}/ns", params=bad, headers=headers).status_code == 400


def test_namespaces_list_newest_first_and_page(client: Supermemory, ns: str) -> None:
    for i in range(3):
        add_done(client, f"{ns}_{i}", f"Namespace {i} holds a fact.")
    page = client.namespaces.list(q=ns, limit=2, page=1)
    assert [n.namespace for n in page.namespaces] == [f"{ns}_2", f"{ns}_1"]
    assert page.pagination.total_pages == 2
    assert [n.namespace for n in client.namespaces.list(q=ns, limit=2, page=2).namespaces] == [f"{ns}_0"]


def test_supporting_context_is_set_and_cleared_with_null(client: Supermemory, ns: str) -> None:
    add_done(client, ns, "A fact to make the namespace.")
    assert client.namespaces.get(ns).supporting_context is None
    assert client.namespaces.update(ns, supporting_context="about me").supporting_context == "about me"
    assert client.namespaces.update(ns, supporting_context=None).supporting_context is None
    with pytest.raises(supermemory.BadRequestError):
        client.namespaces.update(ns)
    with pytest.raises(supermemory.NotFoundError):
        client.namespaces.update(ns + "_none", supporting_context="x")


def test_deleting_a_namespace_removes_everything_in_it(client: Supermemory, ns: str) -> None:
    add_done(client, ns, "This is gone soon. That is also gone.")
    gone = client.namespaces.delete(ns)
    assert (gone.status, gone.deleted_documents_count, gone.deleted_memories_count) == ("deleted", 1, 2)
    assert client.search(ns, query="gone", threshold=0).results == []
    with pytest.raises(supermemory.NotFoundError):
        client.namespaces.get(ns)
    add_done(client, ns, "A new life for the name.")
    assert [r.memory for r in client.search(ns, query="gone life", search_mode="memories", threshold=0).results] == [
        "A new life for the name."]


def test_moving_a_namespace_reprocesses_its_documents_in_the_destination(client: Supermemory, ns: str) -> None:
    doc_id = add_done(client, ns, "Moved facts stay findable.", id="keep", metadata={"m": "1"})
    moved = client.namespaces.delete(ns, move_to=ns + "_dest")
    assert (moved.status, moved.move_to) == ("queued", ns + "_dest") and moved.operation_id
    doc = wait_done(client, ns + "_dest", "keep")
    assert doc.id == doc_id and doc.metadata == {"m": "1"}
    assert client.search(ns + "_dest", query="moved facts", search_mode="memories").results
    with pytest.raises(supermemory.NotFoundError):
        client.namespaces.get(ns)
    with pytest.raises(supermemory.BadRequestError):
        client.namespaces.delete(ns + "_dest", move_to=ns + "_dest")


def test_moving_a_namespace_carries_its_memories_with_their_ids_versions_and_forgetting(
        client: Supermemory, ns: str) -> None:
    add_done(client, ns, "The wifi password is hunter2. The office opens at nine.", id="notes")
    add_done(client, ns + "_dest", "The destination already holds this.", id="there")
    before = {m.memory: m for m in client.list(ns, "memories").memories}
    wifi = before["The wifi password is hunter2."]
    assert client.memories.forget(ns, ids=[wifi.id]).count == 1
    client.namespaces.delete(ns, move_to=ns + "_dest")
    dest = ns + "_dest"
    assert wait_done(client, dest, "notes").system.status == "done"
    kept = {m.memory: m for m in client.list(dest, "memories", include={"forgotten": True}).memories}
    assert set(kept) == {"The wifi password is hunter2.", "The office opens at nine.",
                         "The destination already holds this."}
    assert kept["The wifi password is hunter2."].id == wifi.id and kept["The wifi password is hunter2."].is_forgotten
    assert kept["The office opens at nine."].id == before["The office opens at nine."].id
    assert not any("hunter2" in (r.memory or "") for r in client.search(
        dest, query="wifi password hunter2", search_mode="memories", threshold=0).results)  # forgotten stays so
    assert [r.memory for r in client.search(dest, query="office opens", search_mode="memories").results][:1] == [
        "The office opens at nine."]
    assert client.search(dest, query="office opens nine", search_mode="chunks").results
    assert client.namespaces.list(q=dest).namespaces[0].document_count == 2


def test_isolation_between_namespaces_is_absolute(client: Supermemory, ns: str) -> None:
    mine, theirs = ns + "_a", ns + "_b"
    add_done(client, mine, "The secret code is blue falcon.", id="same", metadata={"k": "v"})
    add_done(client, theirs, "The secret code is blue falcon.", id="same", metadata={"k": "v"})
    add_done(client, theirs, "The secret code is red falcon.", id="same")
    for mode in ("hybrid", "memories", "chunks"):
        results = client.search(mine, query="secret code falcon", search_mode=mode, threshold=0, limit=100,
                                include={"documents": True, "related": True, "forgotten": True}).results
        mine_doc = client.documents.get(mine, "same").id
        assert results and all(r.included.document.id == mine_doc for r in results)
        assert not any("red" in (r.memory or r.chunk or "") for r in results)
        for r in results:
            rel = r.included.related
            assert not rel.parents and not rel.children and not rel.siblings
    assert client.list(mine, "memories").pagination.total_items == 1
    their_memory = client.list(theirs, "memories").memories[0].id
    with pytest.raises(supermemory.NotFoundError):
        client.memories.get(mine, their_memory)
    forgot = client.memories.forget(mine, ids=[their_memory])
    assert forgot.count == 0 and forgot.errors[0].id == their_memory
    assert client.documents.get(theirs, "same").id != client.documents.get(mine, "same").id
    assert client.namespaces.list(q=mine).namespaces[0].memory_count == 1


def test_the_organization_context_is_read_and_replaced_by_an_admin(client: Supermemory, ns: str) -> None:
    add_done(client, ns, "An org needs a namespace.")
    org = client.organization.update(organizational_context="We build search.")
    assert org.organizational_context == "We build search." and org.namespace_count >= 1
    assert client.organization.get().organizational_context == "We build search."
    assert client.organization.update(organizational_context=None).organizational_context is None
    with pytest.raises(supermemory.BadRequestError):
        client.organization.update(organizational_context="")


def test_feedback_is_kept_and_counts_down(client: Supermemory) -> None:
    first = client.feedback.post_feedback(type="bug", title="A title", description="It broke.")
    second = client.feedback.post_feedback(type="docs", title="Another", description="Typo.")
    assert first.id != second.id and second.remaining == first.remaining - 1
    with pytest.raises(supermemory.BadRequestError):
        client.feedback.post_feedback(type="praise", title="t", description="d")  # type: ignore[arg-type]
