"""The shortest path through the face: add a document, see it processed, search it."""

from __future__ import annotations

from supermemory import Supermemory

from tests.supermemory.conftest import wait_done


def test_a_document_added_through_the_sdk_is_processed_and_found_by_search(client: Supermemory, ns: str) -> None:
    ref = client.add(ns, content="I live in Paris. I work at Acme as an engineer.")
    assert ref.status == "queued"
    doc = wait_done(client, ns, ref.id)
    assert doc.system.status == "done"
    found = client.search(ns, query="where do I live", search_mode="memories")
    assert [r.memory for r in found.results][0] == "I live in Paris."
