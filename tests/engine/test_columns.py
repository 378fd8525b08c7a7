"""The columns' authors: each ordinal's, as it was put, replaced or shared."""

from __future__ import annotations

import numpy as np

from engram_index.engine.columns import Columns
from engram_index.engine.types import Document, Filters


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


def _state(cols: Columns) -> dict[str, object]:
    """Everything the columns hold, to compare two of them."""
    size = cols.size
    return {
        "size": size, "count": cols.count, "sourced": cols.sourced,
        "live": cols.live[:size].tolist(), "created": cols.created[:size].tolist(),
        "author": cols.author[:size].tolist(), "source": cols.source[:size].tolist(),
        "first_tag": cols.first_tag[:size].tolist(), "ids": cols.ids[:size],
        "by_id": dict(cols._by_id), "authors": list(cols._author_names), "sources": dict(cols._source_codes),
        "first_tags": dict(cols._first_tag_codes), "tags": {t: sorted(m) for t, m in cols._tags.items()},
        "doc_tags": dict(cols._doc_tags),
        "tag_ords": {t: sorted(cols._tag_ords(t).tolist()) for t in ("a", "b", "c", "zz")},
    }


def test_putting_many_documents_at_once_leaves_the_columns_as_putting_them_one_by_one() -> None:
    rng = np.random.default_rng(5)
    one, many = Columns(), Columns()
    for batch in range(30):
        # Fresh ordinals, live ones replaced, repeats within a batch, and removals between batches.
        size = int(rng.integers(0, 60))
        ords = rng.integers(0, 150 if batch % 3 else 40, size).tolist()
        if batch % 4 == 0:
            ords = list(range(batch * 200, batch * 200 + size))  # a load's run of fresh ordinals
        docs = [Document(f"d{int(rng.integers(0, 120))}", f"a{int(rng.integers(0, 5))}", "text",
                         tuple(str(t) for t in rng.choice(["a", "b", "c", "a"], int(rng.integers(0, 4)))),
                         source=None if rng.random() < 0.5 else f"s{int(rng.integers(0, 3))}",
                         created_ms=int(rng.integers(0, 1000)))
                for _ in ords]
        for o, doc in zip(ords, docs):
            one.put(o, doc)
        many.put_many(ords, docs)
        assert _state(many) == _state(one), batch
        for o in rng.integers(0, 150, 5).tolist():
            one.remove(o)
            many.remove(o)
    assert _state(many) == _state(one)


def test_putting_many_documents_drops_the_kept_filter_masks() -> None:
    cols = Columns()
    cols.put_many([0, 1], [Document("m0", "x", "t", ("a",)), Document("m1", "x", "t")])
    filters = Filters(tags=("a",))
    first = cols.mask(filters)
    assert first is not None and first[:2].tolist() == [True, False]
    cols.put_many([2], [Document("m2", "x", "t", ("a",))])
    again = cols.mask(filters)
    assert again is not None and again[:3].tolist() == [True, False, True]
