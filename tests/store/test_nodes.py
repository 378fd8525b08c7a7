"""Nodes over one PostgreSQL store: each node's index follows every other node's writes from the change log."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engram_index.collections import Collections
from engram_index.engine.types import Document, SearchRequest
from engram_index.store.base import StoredDocument

URI = "at://did:plc:nodes234nodes234nodes234no/space/garden.engram.space/s"


def doc(i: int, text: str) -> StoredDocument:
    return StoredDocument(Document(id=f"d{i}", author="did:plc:a", text=text, created_ms=i))


def found(node: Collections, word: str) -> list[str]:
    return sorted(h.document.id for h in node.search(URI, SearchRequest(q=word, mode="keyword", limit=50)).hits)


def eventually(check: Callable[[], bool], within_s: float = 30.0) -> bool:
    """Whether `check` holds before the deadline (a generous one: this waits for a condition, it times nothing)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


@pytest.fixture
def nodes(tmp_path: Path, postgres_server: object) -> Iterator[tuple[Collections, Collections]]:
    url = postgres_server.database()  # type: ignore[attr-defined]
    first = Collections(tmp_path / "node-a", store=url)
    first.ensure_collection(URI)
    second = Collections(tmp_path / "node-b", store=url)
    first.index(URI), second.index(URI)
    yield first, second
    first.close()
    second.close()


def test_a_write_through_one_node_becomes_searchable_on_another(nodes: tuple[Collections, Collections]) -> None:
    a, b = nodes
    a.write(URI, [doc(0, "the quick brown fox")])
    assert found(a, "fox") == ["d0"]  # read-your-writes: at once on the node that took it
    assert eventually(lambda: found(b, "fox") == ["d0"])


def test_a_delete_through_one_node_leaves_the_other_nodes_index(nodes: tuple[Collections, Collections]) -> None:
    a, b = nodes
    a.write(URI, [doc(0, "alpha"), doc(1, "alpha beta")])
    assert eventually(lambda: found(b, "alpha") == ["d0", "d1"])
    a.write(URI, [], deletes=["d0"])
    assert eventually(lambda: found(b, "alpha") == ["d1"])


def test_interleaved_writes_of_two_nodes_leave_both_indexes_alike_and_each_reads_its_own(
        nodes: tuple[Collections, Collections]) -> None:
    a, b = nodes
    for i in range(20):
        node = a if i % 2 == 0 else b
        node.write(URI, [doc(i, f"common word{i}"), doc(100 + i % 3, f"common shared{i}")])
        assert found(node, f"word{i}") == [f"d{i}"]  # its own write, even right after the other node's
    info = a.info(URI)
    assert eventually(lambda: a.index(URI).seq == b.index(URI).seq == info.seq)
    assert found(a, "common") == found(b, "common") and len(found(a, "common")) == 23
    assert found(a, "shared19") == found(b, "shared19") == ["d101"]


def test_a_node_that_joins_later_builds_its_index_from_the_store(tmp_path: Path,
                                                                 nodes: tuple[Collections, Collections]) -> None:
    a, _ = nodes
    a.write(URI, [doc(i, f"late{i % 2}") for i in range(10)])
    joined = Collections(tmp_path / "node-c", store=a.store_url)
    try:
        assert found(joined, "late1") == [f"d{i}" for i in (1, 3, 5, 7, 9)]
        a.write(URI, [doc(99, "late1")])
        assert eventually(lambda: "d99" in found(joined, "late1"))
    finally:
        joined.close()
