"""A collection's declaration is kept by a process no other can change it under (Collections.info)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram_index.collections import Collections
from engram_index.engine.types import ModelIdentity
from engram_index.errors import StorageError

A = "at://did:plc:infosinfosinfosinfosinfos/space/garden.engram.space/a"


def test_a_read_only_opening_holding_the_lock_keeps_the_declaration_as_no_writer_can_open(tmp_path: Path) -> None:
    writer = Collections(tmp_path)
    writer.ensure_collection(A, ModelIdentity("m1", "d1", 8))
    writer.catch_up()
    writer.close()
    reader = Collections(tmp_path, read_only=True)  # as a `serve --workers` process: the shared lock held
    try:
        assert reader.info(A).model == ModelIdentity("m1", "d1", 8)
        with pytest.raises(StorageError):
            Collections(tmp_path)  # no writer while a reader holds the lock: nothing can change it

        def unread(uri: str) -> None:
            raise AssertionError("the declaration was read again")

        reader.store.collection = unread  # type: ignore[method-assign]
        assert reader.info(A).model == ModelIdentity("m1", "d1", 8)
    finally:
        reader.close()
