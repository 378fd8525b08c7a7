"""Closing a data directory while a space's index loads in the background: the load stops before
the store closes under it (it used to crash the process), and the next opening loads it whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engram_index.collections import Collections
from engram_index.engine.types import Document, ModelIdentity
from engram_index.errors import IndexLoading
from engram_index.store.sqlite import StoredDocument

SPACE = "at://did:plc:close234close234close234cl/space/garden.engram.space/s"
N = 20_000


def test_closing_during_a_background_load_stops_the_load_first_and_loses_nothing(tmp_path: Path) -> None:
    spaces = Collections(tmp_path)
    spaces.ensure_collection(SPACE, ModelIdentity("m", "sha256:00", 4))
    vectors = np.random.default_rng(1).standard_normal((N, 4)).astype("<f2")
    spaces.write(SPACE, [StoredDocument(Document(id=f"{SPACE}/did:plc:a/garden.engram.memory/r{i}", author="did:plc:a",
                                                 text=f"memory {i}", created_ms=i, vector=vectors[i].tobytes()))
                         for i in range(N)])
    spaces.close()
    for _ in range(5):
        opened = Collections(tmp_path)
        try:
            opened.index_if_loaded(SPACE)
        except IndexLoading:
            pass  # loading in the background, as a service starts
        opened.close()  # at once: the load is in the middle of reading the store
    reopened = Collections(tmp_path)
    try:
        assert len(reopened.index(SPACE)) == N
    finally:
        reopened.close()
