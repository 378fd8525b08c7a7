"""Keyword compaction: many segments become one, nothing is lost, crashes mid-swap are repaired."""

import threading
from pathlib import Path

import numpy as np

from engram_index.engine.keyword import KeywordIndex, document_terms, staging_path
from engram_index.engine.termcounts import TermCounts
from engram_index.engine.types import Document, ModelIdentity, SearchRequest
from engram_index.collections import Collections
from engram_index.store.sqlite import StoredDocument
from tests.limits import PATIENCE_S

URI = "at://did:plc:compact/space/garden.engram.space/s"


def put(i: int, word: str = "") -> StoredDocument:
    return StoredDocument(Document(id=f"m{i}", author="did:plc:a", text=f"note number{i} {word}", created_ms=i))


def found(spaces: Collections, q: str) -> list[str]:
    req = SearchRequest(mode="keyword", q=q, limit=100_000, explain=False)
    return [h.document.id for h in spaces.search(URI, req).hits]


def many_segments(tmp_path: Path) -> Collections:
    spaces = Collections(tmp_path, commit_interval=3600)
    spaces.ensure_collection(URI, ModelIdentity("m", "d", 4))
    spaces.index(URI)
    for batch in range(8):
        spaces.write(URI, [put(batch * 10 + i, "common") for i in range(10)])
        spaces.commit()
    return spaces


def test_compaction_leaves_one_segment_and_every_document(tmp_path: Path) -> None:
    spaces = many_segments(tmp_path)
    try:
        index = spaces.index(URI)
        assert index.keyword.segments() > 4
        before = sorted(found(spaces, "common"))
        assert spaces.maintain() == [URI]
        assert spaces.index(URI).keyword.segments() == 1
        assert sorted(found(spaces, "common")) == before and len(before) == 80
        assert found(spaces, "number42") == ["m42"]
        assert not staging_path(index.keyword.path).exists()
    finally:
        spaces.close()


def test_writes_during_compaction_are_kept(tmp_path: Path) -> None:
    spaces = many_segments(tmp_path)
    try:
        done = threading.Event()

        def writer() -> None:
            i = 1000
            while not done.is_set():
                spaces.write(URI, [put(i, "during")], deletes=[f"m{i - 1000}"])
                i += 1
            spaces.commit()

        thread = threading.Thread(target=writer)
        thread.start()
        spaces.compact(URI)
        done.set()
        thread.join()
        spaces.commit()
        store_ids = {d.id for d in spaces.store.documents(spaces.info(URI).id, range(100_000)).values()}
        assert set(found(spaces, "note")) == store_ids
        assert spaces.index(URI).keyword.num_docs() == len(store_ids)
        assert_counts_match_records(spaces)
        spaces._indexes[URI].keyword._writer = None  # a crash: nothing saved since the compaction
        spaces._indexes.clear()
        spaces.close()
        again = Collections(tmp_path)
        assert_counts_match_records(again)  # saved at the snapshot, the rest counted again
        spaces = again
    finally:
        spaces.close()


def assert_counts_match_records(spaces: Collections) -> None:
    """The term counts behind BM25 equal counts built afresh from the records."""
    info = spaces.info(URI)
    records = spaces.store.documents(info.id, range(info.next_ord))
    fresh = TermCounts()
    fresh.put_many((o, document_terms(d)) for o, d in records.items())
    counts = spaces.index(URI).keyword.counts
    ords = np.arange(info.next_ord)
    assert len(counts) == len(fresh) == len(records)
    for terms in (["note"], ["during", "common", "number5", "~number1005"]):
        assert counts.bm25(terms, ords).tolist() == fresh.bm25(terms, ords).tolist()


def test_the_compacted_index_survives_reopening(tmp_path: Path) -> None:
    spaces = many_segments(tmp_path)
    spaces.maintain()
    spaces.close()
    again = Collections(tmp_path)
    try:
        assert again.index(URI).keyword.segments() == 1
        assert found(again, "number7") == ["m7"]
    finally:
        again.close()


def test_a_crash_between_the_two_renames_is_completed_on_open(tmp_path: Path) -> None:
    path = tmp_path / "keyword"
    staged = KeywordIndex(staging_path(path))
    staged.upsert(0, Document(id="x", author="did:plc:a", text="survivor"))
    staged.commit(7)
    staged.close()
    reopened = KeywordIndex(path)
    assert reopened.committed_seq == 7 and reopened.num_docs() == 1
    assert not staging_path(path).exists()


def test_a_half_built_copy_is_thrown_away_on_open(tmp_path: Path) -> None:
    path = tmp_path / "keyword"
    live = KeywordIndex(path)
    live.upsert(0, Document(id="x", author="did:plc:a", text="kept"))
    live.commit(3)
    live.close()
    staging_path(path).mkdir()
    (staging_path(path) / "junk").write_text("partial")
    reopened = KeywordIndex(path)
    assert reopened.committed_seq == 3 and not staging_path(path).exists()


def test_a_write_becomes_searchable_by_keyword_without_an_explicit_commit(tmp_path: Path) -> None:
    import time

    spaces = Collections(tmp_path)  # the default committer interval
    try:
        spaces.ensure_collection(URI)
        spaces.index(URI)
        spaces.write(URI, [put(1, "freshly")])
        deadline = time.monotonic() + PATIENCE_S  # the committer runs every 0.25 s
        while not found(spaces, "freshly") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert found(spaces, "freshly") == ["m1"]
    finally:
        spaces.close()


def test_a_second_process_on_the_same_data_directory_is_refused_at_once(tmp_path: Path) -> None:
    import pytest

    from engram_index.errors import StorageError

    first = Collections(tmp_path)
    try:
        with pytest.raises(StorageError, match="in use"):
            Collections(tmp_path)
    finally:
        first.close()
    Collections(tmp_path).close()  # free again once the first has closed


def test_a_compaction_pass_that_waited_for_another_does_not_compact_again(tmp_path: Path) -> None:
    spaces = many_segments(tmp_path)
    try:
        runs: list[str] = []
        compact_locked = spaces._compact_locked

        def counting(uri: str) -> None:
            runs.append(uri)
            compact_locked(uri)

        spaces._compact_locked = counting  # type: ignore[method-assign]
        result: list[list[str]] = []
        with spaces._compaction_lock:  # another pass is compacting: the background one must wait
            waiting = threading.Thread(target=lambda: result.append(spaces.maintain()))
            waiting.start()
            waiting.join(0.5)
            assert waiting.is_alive()
            counting(URI)
        waiting.join()
        assert result == [[]] and runs == [URI]
        assert spaces.index(URI).keyword.segments() == 1
    finally:
        spaces.close()
