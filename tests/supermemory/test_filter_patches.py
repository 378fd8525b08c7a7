"""A filter compiled before a write of documents is brought up to date by testing again only the documents
the write named (in the writing process, and in one that learns of the write from the store's log), and
always passes what a filter compiled afresh would."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engram_index.collections import Collections
from engram_index.embed.hashing import HashingEmbedder
from engram_index.keys import KeyStore
from engram_index.supermemory import documents, search
from engram_index.supermemory import filters as v5filters
from engram_index.supermemory.face import Face

TEAM_A = {"field": "team", "operator": "eq", "value": "a"}
EXPRS: list[dict[str, Any]] = [
    TEAM_A,
    {"field": "team", "operator": "eq", "value": "b"},
    {"operator": "or", "operands": [{"field": "team", "operator": "eq", "value": "c"},
                                    {"field": "rank", "operator": "gte", "value": 3}]},
    {"field": "rank", "operator": "lt", "value": 100},  # every document but the unranked
]


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many documents' metadata compiled filters test from now on (one count per call)."""
    tested = [0]
    compile_ = v5filters.compile_filter

    def counting(expr: Any) -> Callable[[Any], bool]:
        test = compile_(expr)

        def run(md: Any) -> bool:
            tested[0] += 1
            return bool(test(md))
        return run

    monkeypatch.setattr(v5filters, "compile_filter", counting)
    return tested


@pytest.fixture
def reader(face: Face, tmp_path: Path) -> Iterator[Face]:
    """A read-only face over the `face` fixture's data directory (as a `--workers` reader is)."""
    readers = Collections(tmp_path, read_only=True, lock=False)
    opened = Face(readers, KeyStore(tmp_path), HashingEmbedder(), read_only=True)
    try:
        yield opened
    finally:
        opened.close()
        readers.close()


def _done(face: Face, ns: str) -> None:
    """Every document as processed (no pipeline runs here; a change of metadata waits for it)."""
    face.store.execute([("UPDATE sm_documents SET status='done' WHERE ns=?", (ns,))])


def test_a_filter_compiled_before_a_write_tests_again_only_the_documents_the_write_named(
        face: Face, monkeypatch: pytest.MonkeyPatch) -> None:
    documents.batch(face, "n", {"documents": [{"content": f"doc {i}", "metadata": {"team": "ab"[i % 2]}}
                                              for i in range(40)]})
    tested = _counted(monkeypatch)
    before = search.doc_filter(face, "n", TEAM_A)
    assert tested[0] == 40 and len(before[1] or ()) == 20
    added, _ = documents.add(face, "n", {"content": "one more", "metadata": {"team": "a"}}, None)
    after = search.doc_filter(face, "n", TEAM_A)
    assert tested[0] == 41 and after[1] == (before[1] or set()) | {added}
    _done(face, "n")
    documents.patch(face, "n", added, {"metadata": {"team": "b"}})
    documents.remove(face, "n", sorted(before[1] or ())[0])
    assert search.doc_filter(face, "n", TEAM_A)[1] == set(sorted(before[1] or ())[1:])
    assert tested[0] == 42  # the patched document (the removed one is found gone: nothing to test)
    face.changed("n")  # a write that does not say which documents it changed: compiled afresh
    search.doc_filter(face, "n", TEAM_A)
    assert tested[0] == 42 + 40


def test_a_reader_brings_a_filter_up_to_date_with_the_documents_the_stores_log_names(
        face: Face, reader: Face, monkeypatch: pytest.MonkeyPatch) -> None:
    documents.batch(face, "n", {"documents": [{"content": f"doc {i}", "metadata": {"team": "ab"[i % 2]}}
                                              for i in range(40)]})
    tested = _counted(monkeypatch)
    before = search.doc_filter(reader, "n", TEAM_A)
    assert tested[0] == 40
    added, _ = documents.add(face, "n", {"content": "one more", "metadata": {"team": "a"}}, None)
    _done(face, "n")
    documents.patch(face, "n", sorted(before[1] or ())[0], {"metadata": {"team": "b"}})
    after = search.doc_filter(reader, "n", TEAM_A)
    assert tested[0] == 42 and after[1] == ((before[1] or set()) - {sorted(before[1] or ())[0]}) | {added}
    assert after == search._doc_filter(face.metadata("n"), v5filters.compile_filter(TEAM_A))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("asker", ["writer", "reader"])
def test_a_filter_brought_up_to_date_passes_what_one_compiled_afresh_passes(
        face: Face, reader: Face, seed: int, asker: str) -> None:
    rng = random.Random(seed)
    asked = face if asker == "writer" else reader
    ids: list[str] = []

    def metadata() -> dict[str, Any]:
        md: dict[str, Any] = {"team": rng.choice("abc")}
        if rng.random() < 0.8:
            md["rank"] = rng.randrange(6)
        return md

    for step in range(60):
        op = rng.random()
        if op < 0.35 or not ids:
            doc, _ = documents.add(face, "n", {"content": f"doc {step}", "metadata": metadata()}, None)
            ids.append(doc)
        elif op < 0.5:
            made = documents.batch(face, "n", {"documents": [{"content": f"b {step} {i}", "metadata": metadata()}
                                                             for i in range(rng.randrange(1, 5))]})
            ids += [r["id"] for r in made["results"]]
        elif op < 0.75:
            _done(face, "n")
            documents.patch(face, "n", rng.choice(ids), {"metadata": metadata()})
        elif op < 0.9:
            gone = ids.pop(rng.randrange(len(ids)))
            documents.remove(face, "n", gone)
        else:
            face.changed("n", [rng.choice(ids)] if ids else [])  # a write that changed nothing of it
        for expr in rng.sample(EXPRS, rng.randrange(1, len(EXPRS) + 1)):
            fresh = search._doc_filter(face.metadata("n"), v5filters.compile_filter(expr))
            assert search.doc_filter(asked, "n", expr) == fresh, (step, expr)


def test_filtered_lists_and_profiles_test_the_documents_once_while_they_stand(
        face: Face, monkeypatch: pytest.MonkeyPatch) -> None:
    from engram_index.supermemory import memories

    documents.batch(face, "n", {"documents": [{"content": f"doc {i}", "metadata": {"team": "ab"[i % 2]}}
                                              for i in range(40)]})
    tested = _counted(monkeypatch)
    for _ in range(3):
        assert memories.list_items(face, "n", "documents", {}, {"filter": TEAM_A})["pagination"]["totalItems"] == 20
        memories.profile(face, "n", {"filter": TEAM_A})
        search.doc_filter(face, "n", TEAM_A)
    assert tested[0] == 40


def test_metadata_reads_back_exactly_even_where_a_stored_row_is_not_strict_json(face: Face) -> None:
    edges = [-2 ** 63, 2 ** 63 - 1, 0.1, 1e308, "x"]  # what a metadata value may be, at its bounds
    ids = [documents.add(face, "n", {"content": f"doc {i}", "metadata": {"v": value}}, None)[0]
           for i, value in enumerate(edges)]
    face.store.execute([("UPDATE sm_documents SET metadata=? WHERE ns='n' AND id=?", ('{"v": NaN}', ids[4]))])
    face.changed("n")  # every document read afresh
    read = face.metadata("n")
    assert [read[d]["v"] for d in ids[:4]] == edges[:4] and read[ids[4]]["v"] != read[ids[4]]["v"]  # NaN
    assert search.doc_filter(face, "n", {"field": "v", "operator": "eq", "value": 2 ** 63 - 1})[1] == {ids[1]}
