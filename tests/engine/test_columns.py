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


def test_an_authors_code_is_known_once_an_ordinal_had_it_and_stays_after_it_is_replaced() -> None:
    cols = Columns()
    assert cols.author_code("d1") is None
    cols.put(0, Document("m0", "d1", "text"))
    code = cols.author_code("d1")
    assert code is not None and int(cols.author[0]) == code
    cols.put(0, Document("m0", "d2", "text"))
    assert cols.author_code("d1") == code and cols.author_code("d2") != code


def test_each_ordinal_holds_its_first_tags_code_one_code_a_tag_and_none_once_removed() -> None:
    cols = Columns()
    for o, tags in enumerate([("a", "x"), (), ("b",), ("a",), ("x", "a")]):
        cols.put(o, Document(f"m{o}", "", "text", tags))
    codes = cols.first_tag[:5].tolist()
    assert codes[1] == 0  # no tag
    assert codes[0] == codes[3] != 0 and len({codes[0], codes[2], codes[4]}) == 3
    cols.put(3, Document("m3", "", "text", ("b", "a")))
    assert int(cols.first_tag[3]) == codes[2]
    cols.remove(0)
    assert int(cols.first_tag[0]) == 0
