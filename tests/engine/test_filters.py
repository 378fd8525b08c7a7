"""The engine's generic filters: all-of, any-of groups, none-of tags, a time window and an id allow-list,
exact in every mode."""

from collections.abc import Iterator

import numpy as np
import pytest

from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document, Filters, Mode, SearchRequest

DIMS = 4
MODES: tuple[Mode, ...] = ("keyword", "vector", "hybrid")


@pytest.fixture
def index() -> Iterator[SpaceIndex]:
    rows = [
        ("m0", ("org:a", "project:-"), 10),
        ("m1", ("org:b", "project:-"), 20),
        ("m2", ("org:-", "project:x"), 30),
        ("m3", ("org:a", "project:x"), 40),
        ("m4", ("org:c", "project:y"), 50),
    ]
    docs: dict[int, Document] = {}
    vec = np.array([1, 0, 0, 0], np.float32)
    for i, (doc_id, tags, created) in enumerate(rows):
        docs[i] = Document(id=doc_id, author="x", text=f"shared words {doc_id}", tags=tags, created_ms=created,
                           vector=(vec + 0.01 * i).astype("<f2").tobytes())
    space = SpaceIndex(None, DIMS, lambda ords: {o: docs[o] for o in ords if o in docs})
    space.apply(list(docs.items()), seq=1)
    space.commit()
    yield space


def found(index: SpaceIndex, mode: Mode, filters: Filters) -> set[str]:
    req = SearchRequest(mode=mode, q="shared words", vector=np.array([1, 0, 0, 0], np.float32), limit=10,
                        filters=filters)
    return {h.document.id for h in index.search(req).hits}


@pytest.mark.parametrize("mode", MODES)
def test_any_of_groups_keep_documents_with_one_tag_of_every_group(index: SpaceIndex, mode: Mode) -> None:
    filters = Filters(any_tags=(("org:-", "org:a"), ("project:-", "project:x")))
    assert found(index, mode, filters) == {"m0", "m2", "m3"}


@pytest.mark.parametrize("mode", MODES)
def test_none_of_drops_documents_carrying_any_listed_tag(index: SpaceIndex, mode: Mode) -> None:
    assert found(index, mode, Filters(none_tags=("org:a", "project:y"))) == {"m1", "m2"}


@pytest.mark.parametrize("mode", MODES)
def test_a_time_window_keeps_documents_created_inside_it(index: SpaceIndex, mode: Mode) -> None:
    assert found(index, mode, Filters(since_ms=20, until_ms=40)) == {"m1", "m2"}


@pytest.mark.parametrize("mode", MODES)
def test_an_id_allow_list_keeps_only_those_documents(index: SpaceIndex, mode: Mode) -> None:
    assert found(index, mode, Filters(ids=frozenset({"m1", "m4", "unknown"}))) == {"m1", "m4"}


@pytest.mark.parametrize("mode", MODES)
def test_an_empty_id_allow_list_finds_nothing(index: SpaceIndex, mode: Mode) -> None:
    assert found(index, mode, Filters(ids=frozenset())) == set()


@pytest.mark.parametrize("mode", MODES)
def test_filters_combine_as_a_conjunction(index: SpaceIndex, mode: Mode) -> None:
    filters = Filters(tags=("project:x",), any_tags=(("org:a", "org:b"),), ids=frozenset({"m2", "m3"}))
    assert found(index, mode, filters) == {"m3"}


def test_a_removed_document_leaves_the_id_allow_list(index: SpaceIndex) -> None:
    index.apply([(3, None)], seq=2)
    index.commit()
    assert found(index, "hybrid", Filters(ids=frozenset({"m3"}))) == set()


def test_repeated_filters_reuse_one_mask_until_the_next_change(index: SpaceIndex) -> None:
    from engram_index.engine.columns import MASKS_KEPT

    filters = Filters(any_tags=(("org:a", "org:b"),), none_tags=("project:x",))
    first = index.columns.mask(filters)
    assert first is not None and index.columns.mask(Filters(any_tags=(("org:a", "org:b"),),
                                                            none_tags=("project:x",))) is first
    assert not first.flags.writeable  # shared by every search with these filters
    with pytest.raises(ValueError):
        first[0] = False
    assert {mode: found(index, mode, filters) for mode in MODES} == {mode: {"m0", "m1"} for mode in MODES}
    # A write changes what passes: the kept mask is not used again.
    index.apply([(4, Document(id="m4", author="x", text="shared words m4", tags=("org:a", "project:y"),
                              created_ms=50, vector=np.array([1, 0, 0, 0], "<f2").tobytes()))], seq=2)
    assert index.columns.mask(filters) is not first
    assert {mode: found(index, mode, filters) for mode in MODES} == {mode: {"m0", "m1", "m4"} for mode in MODES}
    index.apply([(0, None)], seq=3)
    assert {mode: found(index, mode, filters) for mode in MODES} == {mode: {"m1", "m4"} for mode in MODES}
    for i in range(MASKS_KEPT + 5):  # bounded: the oldest masks leave
        index.columns.mask(Filters(tags=(f"tag{i}",)))
    assert len(index.columns._masks) == MASKS_KEPT


def test_two_memories_are_of_one_source_only_when_both_name_the_same_non_empty_one() -> None:
    from engram_index.engine.columns import Columns

    columns = Columns()
    for ord_, source in enumerate(["x", "x", "y", None, None, "", ""]):
        columns.put(ord_, Document(f"d{ord_}", "did:plc:a", "text", source=source))
    earlier, later = np.array([0, 1, 3, 5, 0]), np.array([1, 2, 4, 6, 7])
    assert columns.same_source(earlier, later).tolist() == [True, False, False, False, False]
    assert columns.sourced == 3  # the live documents that name a source
    columns.put(2, Document("d2", "did:plc:a", "text", source="x"))  # a replaced document's source is its new one
    columns.remove(1)
    assert columns.source[1] == 0 and columns.same_source(np.array([1, 0]), np.array([2, 2])).tolist() == [False, True]
    columns.put(0, Document("d0", "did:plc:a", "text"))  # replaced by one without a source
    columns.put(6, Document("d6", "did:plc:a", "text", source="z"))
    assert columns.sourced == 2
