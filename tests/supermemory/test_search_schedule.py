"""How a v5 hybrid search spends its two threads once the query's vector is there."""

from __future__ import annotations

import threading
import time
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


def test_no_collections_hits_are_taken_while_the_memories_search_still_runs_beside(
        server: Server, client: Supermemory, ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The memories' compiled rest runs on the thread that made the vector; taking hits is Python, and
    # taking the chunks' meanwhile would hold the GIL that rest waits for between its compiled steps.
    add_done(client, ns, "The lighthouse keeper logs the ships at dawn. Gulls nest on the rocks.")
    add_done(client, ns, "The harbour master counts the ships at noon.")
    face = server.app.state.supermemory
    events: list[tuple[str, str]] = []
    beside = SpaceIndex._run_beside
    take = search._take

    def slow_beside(self: SpaceIndex, *args: Any) -> Any:
        events.append(("beside begins", threading.current_thread().name))
        time.sleep(0.2)  # (a long vector side: the search thread has every chance to take hits meanwhile)
        try:
            return beside(self, *args)
        finally:
            events.append(("beside ends", threading.current_thread().name))

    def recorded_take(*args: Any) -> Any:
        events.append(("take", threading.current_thread().name))
        return take(*args)

    waiting = threading.Event()  # the memories' search is set to run beside: the vector may come now
    run_beside = StartedSearch.run_beside

    def announced(self: StartedSearch) -> None:
        run_beside(self)
        waiting.set()

    def embed() -> None:
        assert waiting.wait(PATIENCE_S)
        vector.set_result(face.embed_query("ships"))

    monkeypatch.setattr(SpaceIndex, "_run_beside", slow_beside)
    monkeypatch.setattr(StartedSearch, "run_beside", announced)
    monkeypatch.setattr(search, "_take", recorded_take)
    vector: Future = Future()
    embedder = threading.Thread(target=embed, name="embedder")
    embedder.start()
    got = search.found(face, ns, "ships", "hybrid", 10, Filters(), False, stamp(), vector=vector)
    embedder.join()
    assert [e for e, _ in events] == ["beside begins", "beside ends", "take", "take"], events
    assert events[0][1] == "embedder"
    assert got.ids  # (the search found its candidates)
