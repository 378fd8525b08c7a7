"""A profile's static and dynamic sections: the newest recallable latest memories of each, whatever reads them."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from engram_index.supermemory import memories
from engram_index.supermemory.face import Face, stamp


def _fill(face: Face, rng: random.Random, n: int) -> list[dict[str, Any]]:
    """n memory rows of 6 documents in namespace `n`: static or not, latest or not, forgotten, expired or due
    later, many of them updated at one time (ties ordered by id)."""
    now = stamp()
    docs = [f"d{i}" for i in range(6)]
    face.store.execute([("INSERT INTO sm_documents(ns, id, metadata, status, created_ms, updated_ms)"
                         " VALUES ('n', ?, ?, 'done', 0, 0)", (d, json.dumps({"team": "c" if i == 0 else "a" if i % 2 else "b"})))
                        for i, d in enumerate(docs)])
    rows = [{"id": f"m{rng.randrange(16 ** 6):06x}{i}", "doc_id": rng.choice(docs), "is_static": rng.random() < 0.3,
             "is_latest": rng.random() < 0.9, "forgotten_ms": now - 5 if rng.random() < 0.1 else None,
             "forget_after_ms": rng.choice([None, None, now - 10, now + 10 ** 7]),
             "updated_ms": rng.choice(range(1000, 1000 + n // 3)), "memory": f"memory {i}"} for i in range(n)]
    face.store.execute([("INSERT INTO sm_memories(ns, id, doc_id, memory, is_static, is_latest, forgotten_ms,"
                         " forget_after_ms, created_ms, updated_ms) VALUES ('n', ?, ?, ?, ?, ?, ?, ?, 0, ?)",
                         (r["id"], r["doc_id"], r["memory"], int(r["is_static"]), int(r["is_latest"]),
                          r["forgotten_ms"], r["forget_after_ms"], r["updated_ms"])) for r in rows])
    face.changed("n")
    return rows


def _expected(rows: list[dict[str, Any]], static: bool, limit: int, docs: set[str] | None) -> list[str]:
    now = stamp()
    kept = [r for r in rows if r["is_latest"] and r["forgotten_ms"] is None and r["is_static"] == static
            and (r["forget_after_ms"] is None or r["forget_after_ms"] > now) and (docs is None or r["doc_id"] in docs)]
    kept.sort(key=lambda r: (-r["updated_ms"], r["id"]))
    return [r["memory"] for r in kept[:limit]]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("team", [None, "a", "c"])  # every document, half of them, one of six
def test_a_profiles_sections_are_the_newest_recallable_latest_memories_of_each_kind(
        face: Face, seed: int, team: str | None) -> None:
    rows = _fill(face, random.Random(seed), 1500)
    body: dict[str, Any] = {"filter": {"field": "team", "operator": "eq", "value": team}} if team else {}
    docs = None if team is None else {"d0"} if team == "c" else {"d1", "d3", "d5"}
    got = memories.profile(face, "n", body)["profile"]
    assert [f["memory"] for f in got["static"]] == _expected(rows, True, memories.STATIC_LIMIT, docs)
    assert [f["memory"] for f in got["dynamic"]] == _expected(rows, False, memories.DYNAMIC_LIMIT, docs)
    assert got["buckets"] == {}
