"""Filtered lists of documents, chunks and memories: the passing items in the list's order, paged, whichever
way their ids are gathered (through the documents that pass, or a walk of the namespace)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from engram_index.supermemory import memories
from engram_index.supermemory.face import Face, stamp
from tests.supermemory.test_query_plans import plans, walks_the_namespace

DOCS = 40


def _fill(face: Face, rng: random.Random) -> None:
    """DOCS documents (document i of team i % 8), each with chunks and memories at few distinct times."""
    now = stamp()
    face.store.execute([("INSERT INTO sm_documents(ns, id, metadata, status, created_ms, updated_ms)"
                         " VALUES ('n', ?, ?, 'done', ?, ?)", (f"d{i:02d}", json.dumps({"team": i % 8}),
                                                                rng.randrange(5), rng.randrange(5)))
                        for i in range(DOCS)])
    chunks, rows = [], []
    for i in range(DOCS):
        for p in range(rng.randrange(4)):
            chunks.append((f"d{i:02d}c{p}", f"d{i:02d}", p, rng.randrange(6)))
        for m in range(rng.randrange(6)):
            rows.append((f"m{rng.randrange(16 ** 6):06x}", f"d{i:02d}", rng.randrange(6), rng.randrange(6),
                         now - 1 if rng.random() < 0.15 else None, rng.choice([None, now - 5, now + 10 ** 7])))
    face.store.execute([("INSERT INTO sm_chunks(ns, id, doc_id, position, content, created_ms)"
                         " VALUES ('n', ?, ?, ?, 'text', ?)", c) for c in chunks])
    face.store.execute([("INSERT OR IGNORE INTO sm_memories(ns, id, doc_id, memory, created_ms, updated_ms,"
                         " forgotten_ms, forget_after_ms) VALUES ('n', ?, ?, 'memory', ?, ?, ?, ?)", r) for r in rows])
    face.changed("n")


def _ids(result: dict[str, Any], kind: str) -> list[str]:
    return [item["id"] for item in result[kind]]


SORTS = [("documents", "createdAt"), ("documents", "updatedAt"), ("chunks", "createdAt"), ("chunks", "position"),
         ("memories", "createdAt"), ("memories", "updatedAt")]


@pytest.mark.parametrize("kind, sort", SORTS)
@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("teams", [[3], [1, 2, 5, 6, 7]])  # few of the documents pass, or most of them
def test_a_filtered_list_pages_the_passing_items_in_the_lists_order(
        face: Face, kind: str, sort: str, order: str, teams: list[int]) -> None:
    _fill(face, random.Random(f"{kind}{sort}{order}{teams}"))
    flt = {"operator": "or", "operands": [{"field": "team", "operator": "eq", "value": t} for t in teams]}
    passing = {f"d{i:02d}" for i in range(DOCS) if i % 8 in teams}
    for forgotten in ([False, True] if kind == "memories" else [False]):
        body: dict[str, Any] = {"include": {"forgotten": True}} if forgotten else {}
        every = [item for page in (1, 2, 3) for item in memories.list_items(
            face, "n", kind, {"sort": sort, "order": order, "limit": 100, "page": page}, body)[kind]]
        # A chunk names its document; a document and a memory carry the document's metadata.
        wanted = [i["id"] for i in every
                  if (i["documentId"] in passing if kind == "chunks" else i["metadata"]["team"] in teams)]
        got: list[str] = []
        for page in (1, 2, 3, 4):
            answer = memories.list_items(face, "n", kind, {"sort": sort, "order": order, "limit": 7, "page": page},
                                         {**body, "filter": flt})
            assert answer["pagination"]["totalItems"] == len(wanted)
            got += _ids(answer, kind)
        assert got == wanted[:28]


@pytest.mark.parametrize("kind, sort", SORTS)
def test_a_list_filtered_to_few_documents_reads_their_items_through_the_document_index(
        face: Face, kind: str, sort: str) -> None:
    _fill(face, random.Random(1))
    flt = {"field": "team", "operator": "eq", "value": 3}
    face.metadata("n")  # what filters read of every document, once per change of them (kept meanwhile)
    found = plans(face, lambda: memories.list_items(face, "n", kind, {"sort": sort}, {"filter": flt}))
    for plan in found:
        if any(f"sm_{kind} " in step or step.endswith(f"sm_{kind}") for step in plan):
            assert not walks_the_namespace(plan), plan


@pytest.mark.parametrize("kind, sort", SORTS)
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_an_unfiltered_list_pages_every_item_in_the_lists_order(face: Face, kind: str, sort: str, order: str) -> None:
    _fill(face, random.Random(f"all{kind}{sort}{order}"))
    column = {"createdAt": "created_ms", "updatedAt": "created_ms" if kind == "chunks" else "updated_ms"}.get(sort)
    direction = order.upper()
    order_by = f"doc_id {direction}, position {direction}" if sort == "position" else f"{column} {direction}, id {direction}"
    live = " AND forgotten_ms IS NULL AND (forget_after_ms IS NULL OR forget_after_ms > ?)" if kind == "memories" else ""
    # The oracle: the one statement that orders them all.
    wanted = [r[0] for r in face.store.query(f"SELECT id FROM sm_{kind} WHERE ns='n'{live} ORDER BY {order_by}",
                                             (stamp(),) if live else ())]
    got: list[str] = []
    for page in range(1, len(wanted) // 7 + 2):
        answer = memories.list_items(face, "n", kind, {"sort": sort, "order": order, "limit": 7, "page": page}, {})
        assert answer["pagination"]["totalItems"] == len(wanted)
        got += _ids(answer, kind)
    assert got == wanted
