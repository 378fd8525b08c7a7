"""listMemories, getMemory, getSpaceStatus and getMemoryGraph over real HTTP (a uvicorn server)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from engram_index.engram.api.lexicon import Lexicons
from tests.limits import roomy_app
from engram_index.engram.auth import InsecureOpen
from engram_index.engine.types import Document, ModelIdentity
from engram_index.collections import Collections
from engram_index.store.sqlite import StoredDocument

from .server import serving, wait_until_loaded

AUTHORITY = "did:plc:query234query234query234qu"
SPACE = f"at://{AUTHORITY}/space/garden.engram.space/s"
BARE = f"at://{AUTHORITY}/space/garden.engram.space/nomodel"
UNKNOWN = f"at://{AUTHORITY}/space/garden.engram.space/unindexed"
AUTHORS = ["did:plc:alice", "did:plc:bob", "did:plc:carol"]
TAGS = ["red", "blue", "green"]
DIMS = 8
MODEL = ModelIdentity("m", "sha256:00", DIMS)
LEXICONS = Lexicons.bundled()
N = 60


def uri(author: str, i: int, space: str = SPACE) -> str:
    return f"{space}/{author}/garden.engram.memory/r{i:03d}"


def make_docs() -> tuple[list[StoredDocument], list[str]]:
    """The space's memories (timestamps tied in threes, some skipped), and the URIs to delete."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((N, DIMS)).astype(np.float16)
    vectors[1] = vectors[0]  # an identical pair: similarity 1000
    vectors[3] = (vectors[2].astype(np.float32) + 0.05).astype(np.float16)  # a near-duplicate
    docs = []
    for i in range(N):
        author = AUTHORS[i % 3]
        tags = tuple(t for k, t in enumerate(TAGS) if (i >> k) & 1)
        vector: bytes | None = vectors[i].tobytes()
        skip = None
        if i % 11 == 5:
            vector, skip = None, "model mismatch" if i != 49 else "bad vector"
        elif i == 20:
            vector = vectors[i][:4].tobytes()  # the wrong size: stored, but the index refuses it
        doc = Document(id=uri(author, i), author=author, text=f"memory {i}", tags=tags,
                       source="https://example.com" if i % 4 == 0 else None,
                       created_ms=1_700_000_000_000 + 1000 * (i // 3), indexed_ms=1_700_000_100_000,
                       metadata={"cid": "bafyreiexample"}, vector=vector)
        docs.append(StoredDocument(doc, skip_reason=skip))
    return docs, [uri(AUTHORS[i % 3], i) for i in (10, 16, 27)]


DOCS, DELETED = make_docs()
LIVE = sorted((s.document for s in DOCS if s.document.id not in DELETED),
              key=lambda d: (d.created_ms, d.id), reverse=True)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("data")
    spaces = Collections(data)
    spaces.ensure_collection(SPACE, MODEL)
    spaces.ensure_collection(BARE)
    spaces.write(SPACE, DOCS)
    spaces.write(SPACE, [], deletes=DELETED)
    spaces.write(BARE, [StoredDocument(Document(id=uri(AUTHORS[0], 0, BARE), author=AUTHORS[0], text="bare",
                                                created_ms=1))])
    spaces.close()
    with serving(roomy_app(data, "did:web:index.example", authenticator=InsecureOpen())) as base:
        wait_until_loaded(base, SPACE)
        yield base


def call(base: str, name: str, **params: Any) -> httpx.Response:
    params.setdefault("space", SPACE)
    r = httpx.get(f"{base}/xrpc/garden.engram.{name}", params=params)
    if r.status_code == 200:
        # Every successful response is checked against the lexicon's output schema.
        assert LEXICONS.output_errors(f"garden.engram.{name}", r.json()) == []
    return r


def walk(base: str, **params: Any) -> tuple[list[str], int]:
    """Every page of listMemories: the URIs in order, and the number of pages."""
    uris: list[str] = []
    cursor = None
    pages = 0
    while True:
        body = call(base, "listMemories", **params, **({"cursor": cursor} if cursor else {})).json()
        pages += 1
        uris += [m["uri"] for m in body["memories"]]
        cursor = body.get("cursor")
        if cursor is None:
            return uris, pages
        assert body["memories"], "a page with a cursor has memories"
        assert pages < 200


# -- listMemories ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 7, 19, 25, 57, 100])
def test_pages_walk_every_live_memory_exactly_once_newest_first(url: str, limit: int) -> None:
    uris, pages = walk(url, limit=limit)
    assert uris == [d.id for d in LIVE]
    assert pages == -(-len(LIVE) // limit)  # a full last page carries no cursor either


def test_the_default_page_is_25_newest_memories_with_full_views(url: str) -> None:
    body = call(url, "listMemories").json()
    assert [m["uri"] for m in body["memories"]] == [d.id for d in LIVE[:25]] and "cursor" in body
    first = body["memories"][0]
    assert first["createdAt"].endswith("Z") and first["cid"] == "bafyreiexample" and "similarity" not in first


@pytest.mark.parametrize(
    "filters",
    [
        {"author": AUTHORS[1]},
        {"tags": ["red"]},
        {"tags": ["red", "blue"]},
        {"tags": ["blue", "green", "blue"]},
        {"author": AUTHORS[2], "tags": ["green"]},
        {"tags": ["purple"]},
        {"author": "did:plc:nobody"},
    ],
)
def test_filtered_pages_walk_every_matching_memory_exactly_once(url: str, filters: dict[str, Any]) -> None:
    want = [d.id for d in LIVE
            if d.author == filters.get("author", d.author) and set(filters.get("tags", ())) <= set(d.tags)]
    assert walk(url, limit=4, **filters)[0] == want
    assert walk(url, limit=100, **filters)[0] == want


def enc(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    ["", "!!!", "a b", "Zm9v", enc(b"[1.5,\"x\"]"), enc(b"[true,\"x\"]"), enc(b"[1]"), enc(b"{}"),
     enc(b"[99999999999999999999,\"x\"]"), enc(b"\xff\xfe"), "A" * 5000],
)
def test_a_cursor_this_service_did_not_make_is_an_invalid_request(url: str, cursor: str) -> None:
    r = call(url, "listMemories", cursor=cursor)
    assert r.status_code == 400 and r.json()["error"] == "InvalidRequest", r.text


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 101}, {"limit": "x"}, {"author": "bob"},
                                    {"tags": [f"t{i}" for i in range(17)]}])
def test_list_parameters_outside_the_lexicon_are_invalid(url: str, params: dict[str, Any]) -> None:
    r = call(url, "listMemories", **params)
    assert r.status_code == 400 and r.json()["error"] == "InvalidRequest"


def test_sixteen_tags_are_accepted(url: str) -> None:
    r = call(url, "listMemories", tags=[f"t{i}" for i in range(16)])
    assert r.status_code == 200 and r.json() == {"memories": []}


# -- getMemory ------------------------------------------------------------------------------


def test_get_memory_returns_the_same_view_as_the_listing(url: str) -> None:
    listed = call(url, "listMemories", limit=100).json()["memories"]
    for view in listed[:5] + listed[-3:]:
        r = call(url, "getMemory", uri=view["uri"])
        assert r.status_code == 200 and r.json() == {"memory": view}


@pytest.mark.parametrize("missing", [DELETED[0], uri(AUTHORS[0], 999), uri(AUTHORS[0], 0, BARE)])
def test_an_absent_deleted_or_other_space_memory_is_not_found(url: str, missing: str) -> None:
    r = call(url, "getMemory", uri=missing)
    assert r.status_code == 404 and r.json()["error"] == "MemoryNotFound" and r.json()["message"]


def test_get_memory_needs_a_uri(url: str) -> None:
    r = call(url, "getMemory")
    assert r.status_code == 400 and r.json()["error"] == "InvalidRequest"


def test_get_memory_of_a_uri_that_names_no_memory_is_memory_not_found_as_the_reference_answers(url: str) -> None:
    r = call(url, "getMemory", uri="not a uri")
    assert r.status_code == 404 and r.json()["error"] == "MemoryNotFound"


# -- getSpaceStatus ---------------------------------------------------------------------------


def test_status_counts_live_memories_and_groups_skipped_vectors_by_author_and_reason(url: str) -> None:
    body = call(url, "getSpaceStatus").json()
    assert body["memories"] == len(LIVE)
    assert body["config"] == body["active"] == {"model": "m", "modelDigest": "sha256:00", "dims": DIMS}
    assert "building" not in body and "buildingMemories" not in body  # no model change under way
    skipped: dict[tuple[str, str], int] = {}
    for s in DOCS:
        if s.skip_reason and s.document.id not in DELETED:
            key = (s.document.author, s.skip_reason)
            skipped[key] = skipped.get(key, 0) + 1
    # The stored vector of the wrong size, which the index left out, is reported with them.
    skipped[(AUTHORS[20 % 3], f"vector has 4 components, the space's model has {DIMS}")] = 1
    assert {(e["author"], e["reason"]): e["count"] for e in body["skipped"]} == skipped
    assert len(body["skipped"]) == len(skipped) and len({a for a, _ in skipped}) > 1


def test_a_space_without_a_model_has_no_config_and_nothing_skipped(url: str) -> None:
    body = call(url, "getSpaceStatus", space=BARE).json()
    assert body == {"memories": 1, "skipped": []}


# -- getMemoryGraph -----------------------------------------------------------------------------


def expected_graph(limit: int, neighbors: int, min_sim: float) -> tuple[list[str], dict[frozenset[str], int]]:
    """The graph computed independently, in float64."""
    nodes = [d for d in LIVE if d.vector is not None and len(d.vector) == 2 * DIMS][:limit]
    vecs = np.stack([np.frombuffer(d.vector or b"", "<f2").astype(np.float64) for d in nodes])
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    sims = vecs @ vecs.T
    edges: dict[frozenset[str], int] = {}
    for i in range(len(nodes)):
        others = [j for j in range(len(nodes)) if j != i and sims[i, j] >= min_sim - 1e-9]
        for j in sorted(others, key=lambda j: (-sims[i, j], j))[:neighbors]:
            edges[frozenset((nodes[i].id, nodes[j].id))] = max(0, min(1000, round(sims[i, j] * 1000)))
    return [d.id for d in nodes], edges


def graph(url: str, **params: Any) -> tuple[list[str], dict[frozenset[str], int]]:
    r = call(url, "getMemoryGraph", **params)
    assert r.status_code == 200, r.text
    body = r.json()
    nodes = [n["uri"] for n in body["nodes"]]
    # The published lexicon: a and b are positions in nodes, a always the smaller.
    assert all(0 <= e["a"] < e["b"] < len(nodes) for e in body["edges"]), "edges join two different nodes"
    pairs = [frozenset((nodes[e["a"]], nodes[e["b"]])) for e in body["edges"]]
    assert len(pairs) == len(set(pairs)), "each unordered pair comes once"
    return nodes, {frozenset((nodes[e["a"]], nodes[e["b"]])): e["similarity"] for e in body["edges"]}


@pytest.mark.parametrize(
    "params, expect",
    [
        ({}, (200, 3, 0.4)),
        ({"limit": 12}, (12, 3, 0.4)),
        ({"neighbors": 1}, (200, 1, 0.4)),
        ({"neighbors": 8, "minSimilarity": "0.05"}, (200, 8, 0.05)),
        ({"minSimilarity": ".7"}, (200, 3, 0.7)),
        ({"limit": 500, "neighbors": 2, "minSimilarity": "1"}, (500, 2, 1.0)),
    ],
)
def test_the_graph_links_each_recent_node_to_its_nearest_nodes_above_the_threshold(
    url: str, params: dict[str, Any], expect: tuple[int, int, float]
) -> None:
    nodes, edges = graph(url, **params)
    want_nodes, want_edges = expected_graph(*expect)
    assert nodes == want_nodes
    assert edges.keys() == want_edges.keys() and edges
    assert all(abs(edges[k] - want_edges[k]) <= 1 for k in edges)
    assert all(s >= expect[2] * 1000 - 1 for s in edges.values())


def test_the_graph_holds_only_memories_with_usable_vectors_and_identical_ones_score_1000(url: str) -> None:
    nodes, edges = graph(url, minSimilarity="1.0")
    skipped = {s.document.id for s in DOCS if s.skip_reason} | {uri(AUTHORS[2], 20)}
    assert not skipped & set(nodes) and len(nodes) == len(LIVE) - len(skipped - set(DELETED))
    assert edges == {frozenset((uri(AUTHORS[0], 0), uri(AUTHORS[1], 1))): 1000}


def test_each_node_chooses_at_most_neighbors_edges(url: str) -> None:
    for neighbors in (1, 2, 3):
        nodes, edges = graph(url, neighbors=neighbors, minSimilarity="0.01")
        # Every node chose at most `neighbors`, so there are at most that many edges per node.
        assert len(edges) <= neighbors * len(nodes)
        degrees = {n: sum(n in k for k in edges) for n in nodes}
        assert min(degrees.values()) >= 1


@pytest.mark.parametrize(
    "params",
    [{"minSimilarity": v} for v in ["0", "0.0", "1.5", "1.01", "-0.1", "abc", "1e-1", " 0.4", "nan", "inf", "0.4.",
                                    "", "+0.5", "0,5", "0." + "1" * 40]]
    + [{"limit": 0}, {"limit": 501}, {"neighbors": 0}, {"neighbors": 9}],
)
def test_graph_parameters_outside_their_bounds_are_invalid(url: str, params: dict[str, Any]) -> None:
    r = call(url, "getMemoryGraph", **params)
    assert r.status_code == 400 and r.json()["error"] == "InvalidRequest", r.text


def test_a_space_without_a_model_has_no_graph(url: str) -> None:
    r = call(url, "getMemoryGraph", space=BARE)
    assert r.status_code == 400 and r.json()["error"] == "NoModel"


# -- every query ----------------------------------------------------------------------------------

QUERIES = {"listMemories": {}, "getMemory": {"uri": uri(AUTHORS[0], 0)}, "getSpaceStatus": {},
           "getMemoryGraph": {}}


@pytest.mark.parametrize("name", QUERIES)
def test_an_unindexed_space_is_unknown(url: str, name: str) -> None:
    r = call(url, name, space=UNKNOWN, **QUERIES[name])
    assert r.status_code == 400 and r.json()["error"] == "UnknownSpace"


@pytest.mark.parametrize("name", QUERIES)
@pytest.mark.parametrize("space", ["not a uri", f"at://{AUTHORITY}/space/garden.engram.space", "at://x/space/a.b/c",
                                   f"{SPACE}/extra"])
def test_a_malformed_space_is_an_invalid_request(url: str, name: str, space: str) -> None:
    r = call(url, name, space=space, **QUERIES[name])
    assert r.status_code == 400 and r.json()["error"] == "InvalidRequest"
