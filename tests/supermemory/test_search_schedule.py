"""How a v5 hybrid search spends its two threads once the query's vector is there."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest
from supermemory import Supermemory

from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Filters
from engram_index.supermemory import search
from engram_index.supermemory.face import stamp
from engram_index.supermemory.found import KINDS
from engram_index.supermemory.tables import chunks_collection
from tests.limits import PATIENCE_S
from tests.supermemory.conftest import Server, add_done


def found_with_a_later_vector(face: Any, ns: str, query: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`search.found` whose vector a thread named "embedder" makes once the chunks' search is set to run where
    the vector is made (so that it does run there, not at once on the search's thread)."""
    waiting = threading.Event()
    after_vector = search.AfterVector

    def announced(*args: Any) -> Any:
        made = after_vector(*args)
        waiting.set()
        return made

    def embed() -> None:
        assert waiting.wait(PATIENCE_S)
        vector.set_result(face.embed_query(query))

    monkeypatch.setattr(search, "AfterVector", announced)
    vector: Future = Future()
    embedder = threading.Thread(target=embed, name="embedder")
    embedder.start()
    try:
        return search.found(face, ns, query, "hybrid", 10, Filters(), False, stamp(), vector=vector)
    finally:
        embedder.join()


def test_the_chunks_are_searched_and_taken_where_the_vector_is_made_while_the_memories_rest_runs_here(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The thread that made the vector searches the chunks and takes their hits at once; the search's own thread
    # runs the memories' rest (one compiled call that holds no GIL, engine/hybrid_rest.py) meanwhile, and takes
    # the memories' hits once it ends. Each side waits for the other's step, so the test needs no timing.
    add_done(client, ns, "The lighthouse keeper logs the ships at dawn. Gulls nest on the rocks.")
    add_done(client, ns, "The harbour master counts the ships at noon.")
    face = server.app.state.supermemory
    events: list[tuple[str, str]] = []
    fused = SpaceIndex._fused
    take = search._take
    memories_rest_begun, chunks_taken = threading.Event(), threading.Event()

    def held_rest(self: SpaceIndex, *args: Any) -> Any:
        if threading.current_thread().name == "embedder":
            return fused(self, *args)
        events.append(("memories' rest begins", threading.current_thread().name))
        memories_rest_begun.set()
        chunks_taken.wait(PATIENCE_S)  # (a long vector side: it ends once the chunks' hits are taken, if ever)
        try:
            return fused(self, *args)
        finally:
            events.append(("memories' rest ends", threading.current_thread().name))

    def recorded_take(face_: Any, ns_: str, leg: Any, *args: Any) -> Any:
        if leg.kind == "chunk":
            memories_rest_begun.wait(PATIENCE_S)
        events.append((f"take {leg.kind}", threading.current_thread().name))
        try:
            return take(face_, ns_, leg, *args)
        finally:
            if leg.kind == "chunk":
                chunks_taken.set()

    monkeypatch.setattr(SpaceIndex, "_fused", held_rest)
    monkeypatch.setattr(search, "_take", recorded_take)
    got = found_with_a_later_vector(face, ns, "ships", monkeypatch)
    search_thread = events[0][1]  # (the search pool's)
    assert search_thread != "embedder"
    assert events == [("memories' rest begins", search_thread), ("take chunk", "embedder"),
                      ("memories' rest ends", search_thread), ("take memory", search_thread)], events
    assert {KINDS[k] for k in got.kinds.tolist()} == {"memory", "chunk"}


class Broken(Exception):
    """A step that failed on purpose."""


@pytest.mark.parametrize("failing, raised", [
    ({"take memory", "take chunk"}, "take memory"),
    ({"take memory", "search chunk"}, "search chunk"),
    ({"search memory", "search chunk", "take memory"}, "search memory"),
    ({"take chunk"}, "take chunk"),
])
def test_errors_come_as_a_search_that_searches_each_collection_then_takes_each_ones_hits(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch, failing: set[str],
        raised: str) -> None:
    # Whichever thread ran a step, a search's error comes before a take's, each in the collections' order.
    add_done(client, ns, "The lighthouse keeper logs the ships at dawn. Gulls nest on the rocks.")
    face = server.app.state.supermemory
    take, finish = search._take, search.StartedSearch.finish

    def broken_take(face_: Any, ns_: str, leg: Any, *args: Any) -> Any:
        if f"take {leg.kind}" in failing:
            raise Broken(f"take {leg.kind}")
        return take(face_, ns_, leg, *args)

    def broken_finish(self: Any) -> Any:
        kind = "chunk" if self.req.q and self.index is face.collections.index(chunks_collection(ns)) else "memory"
        if f"search {kind}" in failing:
            raise Broken(f"search {kind}")
        return finish(self)

    monkeypatch.setattr(search, "_take", broken_take)
    monkeypatch.setattr(search.StartedSearch, "finish", broken_finish)
    for vector in (face.start_embedding("ships lighthouse"), face.embed_query("ships")):
        with pytest.raises(Broken) as caught:
            search.found(face, ns, "ships lighthouse", "hybrid", 10, Filters(), False, stamp(), vector=vector)
        assert str(caught.value) == raised


def test_the_two_collections_hits_are_taken_one_at_a_time(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Both takes are Python: two at once would share one GIL and pass it to and fro. Each take waits a while for
    # the other to begin; the other begins only once it has ended.
    add_done(client, ns, "The lighthouse keeper logs the ships at dawn. Gulls nest on the rocks.")
    add_done(client, ns, "The harbour master counts the ships at noon.")
    face = server.app.state.supermemory
    events: list[str] = []
    take = search._take
    taking = {"memory": threading.Event(), "chunk": threading.Event()}

    def recorded_take(face_: Any, ns_: str, leg: Any, *args: Any) -> Any:
        events.append(f"take {leg.kind} begins")
        taking[leg.kind].set()
        taking["chunk" if leg.kind == "memory" else "memory"].wait(0.5)  # (at once, were two takes run together)
        try:
            return take(face_, ns_, leg, *args)
        finally:
            events.append(f"take {leg.kind} ends")

    monkeypatch.setattr(search, "_take", recorded_take)
    found_with_a_later_vector(face, ns, "ships", monkeypatch)
    assert events in (["take chunk begins", "take chunk ends", "take memory begins", "take memory ends"],
                      ["take memory begins", "take memory ends", "take chunk begins", "take chunk ends"]), events
