"""The face's reads of one document's or one memory's rows seek an index to them: none walks the namespace.

SQLite plans without statistics (the store never runs ANALYZE), so a plan depends on the schema and the
SQL alone: what a tiny namespace is planned with here, a namespace of 100k memories is served with.
"""

from __future__ import annotations

from collections.abc import Callable


import pytest

from engram_index.store.sqlite import Store
from engram_index.supermemory import documents, related
from engram_index.supermemory.face import Face


def plans(face: Face, read: Callable[[], object]) -> list[list[str]]:
    """The query plan of each SELECT that `read` runs on this thread's connection."""
    assert isinstance(face.store, Store)
    conn = face.store._reader()
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        read()
    finally:
        conn.set_trace_callback(None)
    selects = [s for s in seen if s.lstrip().upper().startswith("SELECT")]
    assert selects
    return [[r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + s)] for s in selects]


def walks_the_namespace(plan: list[str]) -> bool:
    """Whether a plan reads a table by its namespace alone (a scan of everything the namespace holds)."""
    return any(("SCAN " in step and " USING " not in step) or step.endswith("(ns=?)") for step in plan)


def test_a_documents_memories_are_read_through_the_document_index(face: Face) -> None:
    for plan in plans(face, lambda: documents.memories_of(face, "n", "d1")):
        assert not walks_the_namespace(plan), plan


def test_a_documents_recallable_memories_are_counted_in_the_document_index(face: Face) -> None:
    for plan in plans(face, lambda: documents.recallable_count(face, "n", 0, doc_id="d1")):
        assert not walks_the_namespace(plan) and any("COVERING INDEX" in step for step in plan), plan


def test_a_memorys_related_memories_are_found_through_the_relation_indexes(face: Face) -> None:
    found = plans(face, lambda: related.related(face, "n", "m1", 10, 0))
    relation_plans = [p for p in found if any("sm_relations" in step for step in p)]
    assert relation_plans
    for plan in relation_plans:
        assert not walks_the_namespace(plan), plan


def test_a_documents_latest_memories_are_read_through_the_document_index(face: Face) -> None:
    from engram_index.supermemory.memories_form import latest_of

    for plan in plans(face, lambda: latest_of(face, "n", "d1")):
        assert not walks_the_namespace(plan), plan


def test_a_profile_without_buckets_reads_its_newest_memories_through_an_index(face: Face) -> None:
    from engram_index.supermemory import memories

    found = plans(face, lambda: memories.profile(face, "n", {}))
    memory_plans = [p for p in found if any("sm_memories" in step for step in p)]
    assert memory_plans
    for plan in memory_plans:
        assert not walks_the_namespace(plan) and not any("TEMP B-TREE" in step for step in plan), plan
        assert all("COVERING" in step for step in plan if "sm_memories_profile" in step), plan


@pytest.mark.parametrize("kind, sort", [("documents", "createdAt"), ("documents", "updatedAt"),
                                        ("chunks", "createdAt"), ("chunks", "position"),
                                        ("memories", "createdAt"), ("memories", "updatedAt")])
def test_a_deep_page_of_a_list_skips_the_items_before_it_in_an_index(face: Face, kind: str, sort: str) -> None:
    from engram_index.supermemory import memories

    for plan in plans(face, lambda: memories.list_items(face, "n", kind, {"sort": sort, "page": 500}, {})):
        if any(step.startswith(f"SEARCH sm_{kind}") or step.startswith(f"SCAN sm_{kind}") for step in plan) \
                and not any("count" in step for step in plan):
            assert all("COVERING INDEX" in step or "PRIMARY KEY" in step and "id=?" in step
                       for step in plan if step.startswith(("SEARCH", "SCAN"))), plan


def test_a_keys_feedback_of_the_day_is_counted_through_an_index(face: Face) -> None:
    from engram_index.supermemory import namespaces

    for plan in plans(face, lambda: namespaces.feedback(face, "k1", {"rating": 5})):
        assert all(" USING " in step for step in plan if step.startswith(("SEARCH", "SCAN"))), plan
