"""A collection's load: a restart with nothing to replay builds what a load from every change builds."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engram_index.collection_loading import load_index
from engram_index.collections import Collections
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document, ModelIdentity, SearchRequest, SearchResult
from engram_index.store.base import RecordStore, StoredDocument
from engram_index.store.opening import open_store

URI = "at://did:plc:abc/space/garden.engram.space/load"
DIMS = 8


def vector(seed: int) -> bytes:
    """A usable float16 vector of DIMS components."""
    return np.random.default_rng(seed).standard_normal(DIMS).astype("<f2").tobytes()


def doc(i: int, text: str, **kw: object) -> StoredDocument:
    """A record of author a or b, with a vector unless told otherwise."""
    fields: dict[str, object] = {"author": f"did:plc:{'ab'[i % 2]}", "created_ms": 1_000 + i, "vector": vector(i)}
    fields.update(kw)
    return StoredDocument(Document(id=f"d{i}", text=text, **fields))  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path, store_url: str | None) -> Iterator[RecordStore]:
    """A store holding one collection written, rewritten and deleted from, some vectors unusable."""
    opened = open_store(tmp_path, store_url)
    sid = opened.ensure_collection(URI, ModelIdentity("m", "d", DIMS)).id
    opened.write(sid, [doc(i, f"memory {i} about apples and pears", tags=(f"t{i % 3}", "all"),
                           source=f"src{i % 4}" if i % 5 else None) for i in range(40)])
    opened.write(sid, [doc(3, "rewritten about plums", tags=("t9",), vector=None),
                       doc(7, "a vector of the wrong size", vector=bytes(2 * (DIMS - 2))),
                       doc(11, "a vector of zeros", vector=bytes(2 * DIMS)),
                       doc(40, "new after the first write", tags=("late",))],
                 deletes=["d5", "d6", "d20"])
    opened.write(sid, [doc(6, "back again under a new ordinal", author="did:plc:c")], deletes=["d0"])
    yield opened
    opened.close()


def loaded(store: RecordStore, data: Path, progress: list[tuple[int, int]] | None = None) -> SpaceIndex:
    """The collection's index as a writer's start loads it."""
    index, _ = load_index(store, data, store.collection(URI), read_only=False, locked=True,
                          stopping=threading.Event(),
                          progress=(lambda _uri, done, total: progress.append((done, total))) if progress is not None else None)
    return index


def state(index: SpaceIndex) -> dict[str, object]:
    """Everything a load builds besides the keyword index, in plain values to compare: every field of the
    columns (their arrays and lists up to the highest ordinal; the filter masks they keep aside), each
    ordinal's vector, the unusable vectors' report and the sequence."""
    cols, vecs = index.columns, index.vectors
    assert vecs is not None
    size = cols.size
    kept_aside = {"_masks", "_masks_lock", "_tag_cache"}
    return {
        "columns": {k: v[:size].tolist() if isinstance(v, np.ndarray) else v[:size] if k == "ids" else v
                    for k, v in vars(cols).items() if k not in kept_aside},
        "vectors": [None if (v := vecs.vector(o)) is None else v.tobytes() for o in range(max(size, vecs.size))],
        "unusable": index.unusable_vectors(), "seq": index.seq,
    }


def test_a_restart_with_nothing_to_replay_builds_the_columns_vectors_and_report_a_full_load_builds(
        store: RecordStore, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = loaded(store, data)  # the keyword index built from every change: a full load
    full = state(first)
    first.close()
    again = loaded(store, data)  # its keyword files current, its term counts saved
    try:
        assert state(again) == full
        assert full["unusable"] == [("did:plc:b", f"vector has {DIMS - 2} components, the space's model has {DIMS}", 1),
                                    ("did:plc:b", "vector is all zeros: it has no direction", 1)]
        for request in (SearchRequest(q="apples", mode="keyword", limit=50),
                        SearchRequest(q="plums", vector=np.ones(DIMS), mode="hybrid", limit=5),
                        SearchRequest(vector=np.arange(DIMS, dtype=np.float32), mode="vector", limit=7)):
            assert [(h.document.id, h.score) for h in again.search(request).hits] == \
                [(h.document.id, h.score) for h in first_search(store, tmp_path, request).hits]
    finally:
        again.close()


def first_search(store: RecordStore, tmp_path: Path, request: SearchRequest) -> SearchResult:
    """The same search on an index loaded from every change, in another directory."""
    index = loaded(store, tmp_path / "other")
    try:
        return index.search(request)
    finally:
        index.close()


def test_a_restart_reports_its_progress_up_to_every_live_record(store: RecordStore, tmp_path: Path) -> None:
    data = tmp_path / "data"
    loaded(store, data).close()
    progress: list[tuple[int, int]] = []
    loaded(store, data, progress).close()
    live = store.count(store.collection(URI).id)
    assert progress and progress[-1] == (live, live)
    assert [done for done, _ in progress] == sorted(done for done, _ in progress)


def test_a_restart_whose_term_counts_are_behind_its_keyword_files_counts_the_changes_since(
        store: RecordStore, tmp_path: Path) -> None:
    data = tmp_path / "data"
    loaded(store, data).close()
    counts = data / "spaces" / str(store.collection(URI).id) / "keyword" / "counts"
    shutil.copytree(counts, tmp_path / "counts-before")
    store.write(store.collection(URI).id, [doc(50, "plums and apples again"), doc(51, "more plums")], deletes=["d9"])
    loaded(store, data).close()  # the keyword files replayed up to the write, the counts saved after it
    # The counts as they were before the write: as a crash between the keyword's commit and the counts'
    # save leaves them.
    shutil.rmtree(counts)
    shutil.copytree(tmp_path / "counts-before", counts)
    again, reference = loaded(store, data), loaded(store, tmp_path / "fresh")
    try:
        request = SearchRequest(q="plums apples", mode="keyword", limit=20)
        assert [(h.document.id, h.score) for h in again.search(request).hits] == \
            [(h.document.id, h.score) for h in reference.search(request).hits]
        assert again.keyword.counts_seq == reference.keyword.counts_seq == store.collection(URI).seq
        assert state(again) == state(reference)
    finally:
        again.close()
        reference.close()


def test_a_worker_mapping_the_saved_vectors_reports_the_unusable_ones_as_the_writer_does(
        store: RecordStore, tmp_path: Path, store_url: str | None) -> None:
    # As `serve --workers` runs: the directory caught up and its vectors saved by a writer, then opened
    # read-only by workers that map those vectors instead of checking each record's again.
    data = tmp_path  # (the store's own directory: its SQLite records, or its PostgreSQL cache)
    writer = Collections(data, store=store_url)
    try:
        writer.catch_up()
        expected = writer.index(URI).unusable_vectors()
    finally:
        writer.close()
    assert expected  # (the fixture's two)
    worker = Collections(data, read_only=True, store=store_url)
    try:
        index = worker.index(URI)
        assert index.vectors is not None and index.vectors.mapped
        assert index.unusable_vectors() == expected
    finally:
        worker.close()
