"""Expired memories: a sweep tags them in the index, so that a search reads by id only those expired since,
and a document whose forgetAfter moves later brings its memories back."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from supermemory import Supermemory

from engram_index.collections import Collections
from engram_index.embed.hashing import HashingEmbedder
from engram_index.keys import KeyStore
from engram_index.supermemory import expiry
from engram_index.supermemory.face import Face, stamp
from tests.limits import PATIENCE_S
from tests.supermemory.conftest import Server, add_done, wait_done
from tests.supermemory.test_query_plans import plans

PAST, FUTURE = "2000-01-01T00:00:00Z", "2999-01-01T00:00:00Z"
PROMO, SALE, BANNER = ("The promo code works this week.", "The winter sale ends on Friday.",
                       "The promo banner is blue and large.")


def _settled() -> int:
    """A moment late enough that no process reads the memories swept until now by id any more (CAUGHT_UP_S)."""
    return stamp() + int(expiry.CAUGHT_UP_S * 1000) + 1


def _face(server: Server) -> Face:
    """The server's v5 face."""
    face: Face = server.app.state.supermemory
    return face


def _memories(client: Supermemory, ns: str, **options: Any) -> set[str]:
    """The memories a search of every test memory's words finds, threshold 0."""
    results = client.search(ns, query="promo code winter sale banner", search_mode="memories", threshold=0,
                            **options).results
    return {r.memory for r in results}


def _memory_id(server: Server, ns: str, text: str) -> str:
    """A memory's id by its text (lists leave expired memories out)."""
    return str(_face(server).store.query("SELECT id FROM sm_memories WHERE ns=? AND memory=?", (ns, text))[0][0])


def test_a_swept_namespace_leaves_expired_memories_out_by_their_tag_and_reads_none_by_id(
        server: Server, client: Supermemory, ns: str) -> None:
    add_done(client, ns, PROMO, metadata={"forgetAfter": PAST})
    add_done(client, ns, SALE, metadata={"forgetAfter": PAST})
    add_done(client, ns, BANNER, metadata={"forgetAfter": FUTURE})
    face = _face(server)
    assert expiry.unswept(face, ns, stamp()) == {_memory_id(server, ns, PROMO), _memory_id(server, ns, SALE)}
    assert expiry.sweep(face, ns, stamp()) == 2  # (before any search: a search has them swept, below)
    assert expiry.unswept(face, ns, _settled()) == set()
    assert _memories(client, ns) == {BANNER}
    recalled = client.search(ns, query="promo code winter sale", search_mode="memories", threshold=0,
                             include={"forgotten": True}).results
    assert {r.memory for r in recalled if r.is_latest is False} == {PROMO, SALE}
    assert client.memories.get(ns, _memory_id(server, ns, PROMO)).is_forgotten
    assert expiry.sweep(face, ns, stamp()) == 0


def test_a_search_that_meets_unswept_expired_memories_has_them_swept(
        server: Server, client: Supermemory, ns: str) -> None:
    add_done(client, ns, PROMO, metadata={"forgetAfter": PAST})
    face = _face(server)
    assert expiry.unswept(face, ns, stamp())
    assert _memories(client, ns) == set()
    deadline = time.monotonic() + PATIENCE_S
    while expiry.unswept(face, ns, _settled()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert expiry.unswept(face, ns, _settled()) == set()
    assert _memories(client, ns) == set()


def test_a_swept_memory_comes_back_when_its_document_forgets_it_later_and_leaves_again(
        server: Server, client: Supermemory, ns: str) -> None:
    doc = add_done(client, ns, PROMO, metadata={"forgetAfter": PAST})
    face = _face(server)
    expiry.sweep(face, ns, stamp())
    client.documents.update(ns, doc, metadata={"forgetAfter": FUTURE})
    assert _memories(client, ns) == {PROMO}
    assert not client.memories.get(ns, _memory_id(server, ns, PROMO)).is_forgotten
    client.documents.update(ns, doc, metadata={"forgetAfter": PAST})
    assert _memories(client, ns) == set()
    expiry.sweep(face, ns, stamp())
    assert _memories(client, ns) == set()
    client.documents.update(ns, doc, metadata={})
    assert _memories(client, ns) == {PROMO}


def test_a_resubmission_that_moves_forget_after_moves_its_memories_expiry(
        server: Server, client: Supermemory, ns: str) -> None:
    add_done(client, ns, PROMO, id=f"{ns}-promo", metadata={"forgetAfter": PAST})
    expiry.sweep(_face(server), ns, stamp())
    client.add(ns, content=PROMO, id=f"{ns}-promo", metadata={"forgetAfter": FUTURE})
    assert _memories(client, ns) == {PROMO}
    client.add(ns, content=PROMO, id=f"{ns}-promo", metadata={"forgetAfter": PAST})
    assert _memories(client, ns) == set()


def test_a_reprocessed_document_that_keeps_a_swept_memory_brings_it_back_with_a_later_forget_after(
        server: Server, client: Supermemory, ns: str) -> None:
    doc = add_done(client, ns, f"{PROMO} {SALE}", metadata={"forgetAfter": PAST})
    expiry.sweep(_face(server), ns, stamp())
    client.documents.update(ns, doc, content=f"{PROMO} {BANNER}", metadata={"forgetAfter": FUTURE})
    wait_done(client, ns, doc)
    assert _memories(client, ns) == {PROMO, BANNER}


def test_the_unswept_expired_memories_are_read_through_their_own_partial_index(face: Face) -> None:
    for plan in plans(face, lambda: expiry.unswept(face, "n", 0)):
        assert any("sm_memories_unswept" in step for step in plan), plan


def test_a_memory_another_node_swept_stays_out_before_this_nodes_index_has_its_tag(
        server: Server, client: Supermemory, ns: str) -> None:
    face = _face(server)
    if face.sole_writer:
        pytest.skip("a process that makes every write of its store tags its own index as it sweeps")
    add_done(client, ns, PROMO, metadata={"forgetAfter": PAST})
    add_done(client, ns, BANNER)
    # As another node's sweep leaves the store before this node's index catches up on its records: the
    # column says tagged, this index's record does not carry the tag yet.
    face.store.execute([("UPDATE sm_memories SET expiry_tagged=? WHERE ns=? AND memory=?", (stamp(), ns, PROMO))])
    assert expiry.unswept(face, ns, stamp()) == {_memory_id(server, ns, PROMO)}
    assert _memories(client, ns) == {BANNER}


def test_the_memories_swept_lately_are_read_through_their_own_partial_index(tmp_path: Path) -> None:
    spaces = Collections(tmp_path)
    Face(spaces, KeyStore(tmp_path), HashingEmbedder()).close()  # (its tables made)
    readers = Collections(tmp_path, read_only=True, lock=False)
    reader = Face(readers, KeyStore(tmp_path), HashingEmbedder(), read_only=True)
    try:
        found = plans(reader, lambda: expiry.unswept(reader, "n", 0))
        assert len(found) == 2
        assert any("sm_memories_unswept" in step for step in found[0]), found[0]
        assert any("sm_memories_swept" in step for step in found[1]), found[1]
    finally:
        reader.close()
        readers.close()
        spaces.close()
