"""How a v5 hybrid search spends its two threads once the query's vector is there."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest
from supermemory import Supermemory

from engram_index.engine.search import SpaceIndex
from engram_index.engine.started import StartedSearch
from engram_index.engine.types import Filters
from engram_index.supermemory import search
from engram_index.supermemory.face import stamp
from tests.limits import PATIENCE_S
from tests.supermemory.conftest import Server, add_done


def test_the_chunks_hits_are_taken_while_the_memories_search_runs_beside_and_the_memories_after_it(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The memories' rest runs on the thread that made the vector as one compiled call that holds no GIL
    # (engine/hybrid_rest.py): the search thread takes the chunks' hits meanwhile, the memories' once it ends.
    add_done(client, ns, "The lighthouse keeper logs the ships at dawn. Gulls nest on the rocks.")
    add_done(client, ns, "The harbour master counts the ships at noon.")
    face = server.app.state.supermemory
    events: list[tuple[str, str]] = []
    beside = SpaceIndex._run_beside
    take = search._take
    chunks_taken = threading.Event()

    def held_beside(self: SpaceIndex, *args: Any) -> Any:
        events.append(("beside begins", threading.current_thread().name))
        chunks_taken.wait(PATIENCE_S)  # (a long vector side: it ends once the chunks' hits are taken, if ever)
        try:
            return beside(self, *args)
        finally:
            events.append(("beside ends", threading.current_thread().name))

    def recorded_take(face_: Any, ns_: str, leg: Any, *args: Any) -> Any:
        events.append((f"take {leg.kind}", threading.current_thread().name))
        try:
            return take(face_, ns_, leg, *args)
        finally:
            if leg.kind == "chunk":
                chunks_taken.set()

    waiting = threading.Event()  # the memories' search is set to run beside: the vector may come now
    run_beside = StartedSearch.run_beside

    def announced(self: StartedSearch) -> None:
        run_beside(self)
        waiting.set()

    def embed() -> None:
        assert waiting.wait(PATIENCE_S)
        vector.set_result(face.embed_query("ships"))

    monkeypatch.setattr(SpaceIndex, "_run_beside", held_beside)
    monkeypatch.setattr(StartedSearch, "run_beside", announced)
    monkeypatch.setattr(search, "_take", recorded_take)
    vector: Future = Future()
    embedder = threading.Thread(target=embed, name="embedder")
    embedder.start()
    got = search.found(face, ns, "ships", "hybrid", 10, Filters(), False, stamp(), vector=vector)
    embedder.join()
    search_thread = events[1][1]  # (the search pool's)
    assert search_thread != "embedder"
    assert events == [("beside begins", "embedder"), ("take chunk", search_thread), ("beside ends", "embedder"),
                      ("take memory", search_thread)], events
    assert got.ids  # (the search found its candidates)
