"""Isolation as properties: over random spaces, nothing one space answers reveals another's data.

Six spaces under two authorities (two share a key, texts and vectors overlap between spaces,
each has a secret word of its own), one served instance; hypothesis draws calls in one space
with values from any space (words, tags, authors, vectors, URIs, cursors). Every URI an answer
holds is the space's; no answer holds another space's URIs or secret words unless the caller
sent them; counts are the space's own. Bounded: ISOLATION_EXAMPLES calls (default 300).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.limits import roomy_app
from engram_index.collections import Collections
from engram_index.engine.types import Document, ModelIdentity
from engram_index.engram.api.limits import SpaceLimits
from engram_index.engram.auth import InsecureOpen
from engram_index.engram.records import encode_query_vector
from engram_index.store.sqlite import StoredDocument
from engram_index.testkit.serve import serving

EXAMPLES = int(os.environ.get("ISOLATION_EXAMPLES", "300"))
AUTHORITIES = ["did:plc:iso2iso2iso2iso2iso2iso2", "did:plc:iso3iso3iso3iso3iso3iso3"]
KEYS = ["a", "b", "c", "a"]  # a key used under both authorities
VOCAB = ["river", "stone", "cloud", "ember", "maple", "quartz", "delta", "lumen"]
TAGS = ["t1", "t2", "t3"]
AUTHORS = ["did:plc:alice", "did:plc:bob", "did:plc:carol"]
MODEL = ModelIdentity("m", "sha256:00", 8)


@dataclass
class Space:
    uri: str
    secret: str
    docs: dict[str, Document]


def build(seed: int) -> list[Space]:
    """Random spaces whose texts, tags, authors and vectors overlap, each with a secret word."""
    rng = random.Random(seed)
    shared_vectors = [np.random.default_rng(i).standard_normal(8).astype("<f2").tobytes() for i in range(5)]
    shared_texts = [" ".join(rng.sample(VOCAB, 3)) for _ in range(5)]
    out = []
    for n in range(6):
        uri = f"at://{AUTHORITIES[n % 2]}/space/garden.engram.space/{KEYS[n % 4]}{n // 4}"
        secret = f"secret{n}word"
        docs = {}
        for i in range(rng.randint(15, 60)):
            words = rng.choice(shared_texts) if rng.random() < 0.3 else " ".join(rng.sample(VOCAB, 3))
            text = f"{words} {secret}" if rng.random() < 0.3 else words
            vec = (rng.choice(shared_vectors) if rng.random() < 0.3
                   else np.random.default_rng(seed * 1000 + n * 100 + i).standard_normal(8).astype("<f2").tobytes())
            author = rng.choice(AUTHORS)
            doc_id = f"{uri}/{author}/garden.engram.memory/k{i}"
            docs[doc_id] = Document(id=doc_id, author=author, text=text, tags=tuple(rng.sample(TAGS, rng.randint(0, 2))),
                                    created_ms=1_700_000_000_000 + rng.randint(0, 10**6), vector=vec,
                                    metadata={"cid": "bafyreiexample"})
        out.append(Space(uri, secret, docs))
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Space]]]:
    data = tmp_path_factory.mktemp("iso")
    spaces = build(int(os.environ.get("ISOLATION_SEED", "18")))
    store = Collections(data)
    try:
        for s in spaces:
            store.ensure_collection(s.uri, MODEL)
            store.write(s.uri, [StoredDocument(d) for d in s.docs.values()])
    finally:
        store.close()
    app = roomy_app(data, "did:web:index.example", authenticator=InsecureOpen(), limits=SpaceLimits(1e6, 1e6))
    with serving(app) as url:
        for s in spaces:
            for _ in range(200):
                if httpx.get(f"{url}/xrpc/garden.engram.searchMemories",
                             params={"space": s.uri, "q": "x", "mode": "keyword"}).status_code != 503:
                    break
        yield url, spaces


def uris_in(value: object) -> Iterator[str]:
    """Every string under a key named uri, a or b (memories, nodes, edges)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("uri", "a", "b") and isinstance(item, str):
                yield item
            else:
                yield from uris_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from uris_in(item)


@st.composite
def calls(draw: st.DrawFn, spaces: list[Space]) -> tuple[int, str, list[tuple[str, str]]]:
    """A call in one space, with values drawn from every space."""
    n = draw(st.integers(0, len(spaces) - 1))
    other = spaces[draw(st.integers(0, len(spaces) - 1))]
    any_doc = draw(st.sampled_from(sorted(other.docs)))
    words = VOCAB + [s.secret for s in spaces]
    method = draw(st.sampled_from(["searchMemories", "listMemories", "getMemory", "getSpaceStatus", "getMemoryGraph"]))
    params = [("space", spaces[n].uri)]
    if method == "searchMemories":
        mode = draw(st.sampled_from(["keyword", "vector", "hybrid"]))
        params += [("mode", mode), ("limit", str(draw(st.integers(1, 50))))]
        if mode != "vector":
            params.append(("q", " ".join(draw(st.lists(st.sampled_from(words), min_size=1, max_size=3)))))
        if mode != "keyword":
            vec = np.frombuffer(other.docs[any_doc].vector or b"", "<f2").astype(np.float32)
            params += [("vector", encode_query_vector(vec)), ("model", MODEL.model), ("modelDigest", MODEL.digest)]
    elif method == "listMemories":
        params.append(("limit", str(draw(st.integers(1, 100)))))
    elif method == "getMemory":
        params.append(("uri", any_doc))
    elif method == "getMemoryGraph":
        params += [("limit", str(draw(st.integers(1, 100)))), ("minSimilarity", "0.01")]
    if method in ("searchMemories", "listMemories"):
        if draw(st.booleans()):
            params.append(("author", draw(st.sampled_from(AUTHORS))))
        params += [("tags", t) for t in draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True))]
    return n, method, params


def test_no_answer_in_one_space_reveals_another_spaces_data(world: tuple[str, list[Space]]) -> None:
    url, spaces = world
    client = httpx.Client(timeout=30)
    tried: set[str] = set()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(calls(spaces))
    def run(call: tuple[int, str, list[tuple[str, str]]]) -> None:
        n, method, params = call
        own = spaces[n]
        r = client.get(f"{url}/xrpc/garden.engram.{method}", params=params)
        assert r.status_code < 500, r.text
        tried.add(f"{method}:{r.status_code}")
        text = r.text
        for _, value in params:  # what the caller sent may be echoed; it reveals nothing new
            text = text.replace(value, "")
        for other in spaces:
            if other is not own:
                assert other.uri + "/" not in text, f"{other.uri} leaked into {method} of {own.uri}"
                assert other.secret not in text, f"{other.secret} leaked into {method} of {own.uri}"
        if r.status_code != 200:
            return
        body = r.json()
        for uri in uris_in(body):
            assert uri in own.docs, f"{uri} is not in {own.uri}"
        if method == "getSpaceStatus":
            assert body["memories"] == len(own.docs)
        if method == "listMemories" and len(params) == 2:
            assert len(body["memories"]) == min(int(params[1][1]), len(own.docs))
        if method == "getMemory":
            assert body["memory"]["uri"] in own.docs

    try:
        run()
    finally:
        client.close()
    # The calls reached every method and both answers (a found memory, a missing one).
    assert {"getMemory:200", "getMemory:404", "searchMemories:200", "listMemories:200",
            "getSpaceStatus:200", "getMemoryGraph:200"} <= tried
