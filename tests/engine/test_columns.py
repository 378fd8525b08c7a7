"""The columns' authors: each ordinal's, as it was put, replaced or shared."""

from __future__ import annotations

import numpy as np

from engram_index.engine.columns import Columns
from engram_index.engine.types import Document


def test_each_ordinal_names_the_author_it_was_put_with_including_a_replacement() -> None:
    cols = Columns()
    for o, author in enumerate(["d1", "", "d2", "d1"]):
        cols.put(o, Document(f"m{o}", author, "text"))
    assert cols.authors(np.array([0, 1, 2, 3])) == ["d1", "", "d2", "d1"]
    cols.put(2, Document("m2", "d3", "text"))
    assert cols.authors(np.array([3, 2, 0])) == ["d1", "d3", "d1"]
    assert cols.authors(np.array([], np.int64)) == []
