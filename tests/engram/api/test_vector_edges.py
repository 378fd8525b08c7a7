"""Vectors at the edges over real HTTP: large norms work, unusable ones are refused or reported, never fatal."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from click.testing import CliRunner

from tests.limits import roomy_app
from engram_index.cli import main
from engram_index.collections import Collections
from engram_index.engine.types import Document
from engram_index.engram.api.lexicon import Lexicons
from engram_index.engram.auth import InsecureOpen
from engram_index.engram.records import encode_query_vector
from engram_index.store.sqlite import StoredDocument

from .server import serving, wait_until_loaded

AUTHOR = "did:plc:edge234edge234edge234edge2"
SPACE = f"at://{AUTHOR}/space/garden.engram.space/edges"
DIMS = 384
LEXICONS = Lexicons.bundled()
NAMES = ["norm three hundred", "norm one", "norm forty"]


def norm_vectors() -> np.ndarray:
    """Three directions scaled to norms 300 (components ~15), 1 and 40, as float16."""
    rng = np.random.default_rng(300)
    directions = rng.standard_normal((3, DIMS))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return (directions * np.array([[300.0], [1.0], [40.0]])).astype("<f2")


def record(text: str, raw: bytes) -> dict:
    return {"text": text, "createdAt": "2026-03-01T10:00:00Z", "embedding": {
        "model": "m", "modelDigest": "sha256:00", "dims": DIMS, "encoding": "f16le",
        "vector": {"$bytes": base64.b64encode(raw).rstrip(b"=").decode()}}}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("data")
    lines = tmp_path_factory.mktemp("lines") / "norms.jsonl"
    lines.write_text("".join(json.dumps(record(n, v.tobytes())) + "\n" for n, v in zip(NAMES, norm_vectors())))
    result = CliRunner().invoke(main, ["import", SPACE, str(lines), "--data", str(data), "--model", "m",
                                       "--model-digest", "sha256:00", "--dims", str(DIMS)], catch_exceptions=False)
    assert "3 written" in result.output, result.output
    # Rows stored without the entry checks (as an older release could): each is left out of the
    # vector index and reported, and the space still loads.
    infinite = np.ones(DIMS, "<f2")
    infinite[7] = np.inf
    spaces = Collections(data)
    spaces.write(SPACE, [
        StoredDocument(Document(id=f"{SPACE}/{AUTHOR}/garden.engram.memory/{rkey}", author=AUTHOR, text=rkey,
                                created_ms=1_700_000_000_000, vector=raw, metadata={"cid": "bafyreiexample"}))
        for rkey, raw in [("infinite", infinite.tobytes()), ("zeros", bytes(2 * DIMS))]
    ])
    spaces.close()
    with serving(roomy_app(data, "did:web:index.example", authenticator=InsecureOpen())) as base:
        wait_until_loaded(base, SPACE)
        yield base


def call(base: str, name: str, **params: object) -> httpx.Response:
    r = httpx.get(f"{base}/xrpc/garden.engram.{name}", params={"space": SPACE, **params})
    if r.status_code == 200:
        assert LEXICONS.output_errors(f"garden.engram.{name}", r.json()) == []
    return r


def test_each_memory_of_norm_300_1_or_40_finds_itself_first_with_similarity_1000(url: str) -> None:
    for name, vector in zip(NAMES, norm_vectors()):
        r = call(url, "searchMemories", vector=encode_query_vector(vector), model="m", modelDigest="sha256:00")
        assert r.status_code == 200, r.text
        top = r.json()["memories"]
        assert top[0]["text"] == name and top[0]["similarity"] == 1000
        assert {m["text"] for m in top} == set(NAMES)  # the unusable rows have no vector to match


def test_stored_rows_with_unusable_vectors_are_reported_in_the_status_and_still_found_by_words(url: str) -> None:
    body = call(url, "getSpaceStatus").json()
    assert body["memories"] == 5
    assert sorted((e["author"], e["reason"], e["count"]) for e in body["skipped"]) == [
        (AUTHOR, "vector holds NaN or infinite values", 1),
        (AUTHOR, "vector is all zeros: it has no direction", 1),
    ]
    r = call(url, "searchMemories", q="zeros", mode="keyword")
    assert r.status_code == 200 and [m["text"] for m in r.json()["memories"]] == ["zeros"]
    graph = call(url, "getMemoryGraph")
    assert graph.status_code == 200, graph.text


@pytest.mark.parametrize(
    "values, message",
    [
        (np.zeros(DIMS), "vector is all zeros: it has no direction"),
        (np.full(DIMS, -0.0), "vector is all zeros: it has no direction"),
        (np.where(np.arange(DIMS) == 3, np.nan, 1.0), "vector holds NaN or infinite values"),
    ],
)
def test_a_query_vector_that_cannot_be_searched_with_is_an_invalid_request(
    url: str, values: np.ndarray, message: str
) -> None:
    r = call(url, "searchMemories", vector=encode_query_vector(values), model="m", modelDigest="sha256:00")
    assert r.status_code == 400
    assert r.json()["error"] == "InvalidRequest" and message in r.json()["message"]


def test_a_query_vector_of_norm_300_is_searched_like_its_unit_vector(url: str) -> None:
    vector = norm_vectors()[0]
    unit = (vector.astype(np.float64) / np.linalg.norm(vector.astype(np.float64))).astype(np.float32)
    first = call(url, "searchMemories", vector=encode_query_vector(vector), model="m", modelDigest="sha256:00")
    second = call(url, "searchMemories", vector=encode_query_vector(unit), model="m", modelDigest="sha256:00")
    assert [m["uri"] for m in first.json()["memories"]] == [m["uri"] for m in second.json()["memories"]]
