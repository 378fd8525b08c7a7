"""Stored JSON reads back as it was written, whichever parser reads it."""

from __future__ import annotations

import json

import pytest

from engram_index.store.rows import stored_tags


@pytest.mark.parametrize("tags", [
    [], ["a"], ["project:x", "ü-ñ", "日本"], ["12345678901234567890123"], ["lone \ud800 surrogate"], ["a", "a"],
])
def test_stored_tags_read_back_as_the_strings_written(tags: list[str]) -> None:
    assert stored_tags(json.dumps(tags)) == tuple(tags)


def test_a_stored_tags_array_with_a_number_reads_it_exactly() -> None:
    # Not written by the service, but read back as the standard parser reads it (no float for a long number).
    assert stored_tags("[123456789012345678901234567890]") == (123456789012345678901234567890,)
