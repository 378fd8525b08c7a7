"""Isolation over v5 namespaces as a property: a key's namespace never reveals another namespace's data.

Four namespaces of random documents whose texts overlap, each with a secret word of its own and a
caller id every namespace shares; one key per namespace reaching only it. Hypothesis draws calls
(search in every mode with every include flag, lists of every type, document and memory gets with
ids from any namespace, memory counts, calls into another namespace) with one namespace's key.
No answer holds another namespace's secret word or ids unless the caller sent them, every id an
answer holds is its namespace's, counts are the namespace's own, and another namespace is a 403.
Bounded: V5_ISOLATION_EXAMPLES calls (default 200).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram_index.embed.hashing import HashingEmbedder
from engram_index.keys import KeyStore
from tests.supermemory.conftest import running

from .faces_v5 import add_documents

EXAMPLES = int(os.environ.get("V5_ISOLATION_EXAMPLES", "200"))
NAMESPACES = ["iso_a", "iso_b", "iso_c", "iso_d"]
VOCAB = ["river", "stone", "cloud", "ember", "maple", "quartz", "delta", "lumen", "bike", "garden"]


@dataclass
class Namespace:
    name: str
    secret: str
    key: str = ""
    docs: int = 0
    ids: set[str] = field(default_factory=set)  # every document, chunk and memory id it holds


def build(seed: int) -> tuple[list[Namespace], list[tuple[str, str, str, dict[str, Any]]]]:
    """Random documents in each namespace, texts overlapping, a secret word each; one caller id in all."""
    rng = random.Random(seed)
    spaces = [Namespace(name, f"secret{n}word") for n, name in enumerate(NAMESPACES)]
    docs = []
    for space in spaces:
        for i in range(rng.randint(3, 6)):
            words = " ".join(rng.sample(VOCAB, 4))
            text = f"The {words} notes. I like {space.secret} with {rng.choice(VOCAB)}." if i % 2 == 0 else \
                f"My {words} is {rng.choice(VOCAB)}."
            doc_id = "shared" if i == 0 else f"{space.name}-{i}"
            docs.append((space.name, doc_id, text, {"kind": rng.choice(["x", "y"]), "owner": space.name}))
            space.docs += 1
    return spaces, docs


def ids_in(value: object) -> Iterator[str]:
    """Every string under a key named id or documentId."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("id", "documentId") and isinstance(item, str):
                yield item
            else:
                yield from ids_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from ids_in(item)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Namespace]]]:
    data = tmp_path_factory.mktemp("iso5")
    spaces, docs = build(int(os.environ.get("ISOLATION_SEED", "18")))
    with running(data, HashingEmbedder(64)) as server:
        add_documents(server.url, server.key, docs)
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}) as client:
            for space in spaces:
                space.key, _ = KeyStore(data).create("supermemory", {"namespaces": [space.name]})
                for kind in ("documents", "chunks", "memories"):
                    r = client.post(f"/ns/{space.name}/list/{kind}", params={"limit": "100"},
                                    json={"include": {"forgotten": True}} if kind == "memories" else {})
                    assert r.status_code == 200, r.text
                    space.ids |= set(ids_in(r.json()))
        yield server.url, spaces


@st.composite
def calls(draw: st.DrawFn, spaces: list[Namespace]) -> tuple[int, str, str, list[tuple[str, str]], Any]:
    """A call with one namespace's key, with values drawn from every namespace."""
    n = draw(st.integers(0, len(spaces) - 1))
    other = spaces[draw(st.integers(0, len(spaces) - 1))]
    target = other.name if draw(st.integers(0, 5)) == 0 else spaces[n].name  # now and then, another namespace
    any_id = draw(st.sampled_from(sorted(other.ids) + ["shared"]))
    words = VOCAB + [s.secret for s in spaces]
    kind = draw(st.sampled_from(["search", "search", "search", "list", "document", "memory", "counts"]))
    if kind == "search":
        body: dict[str, Any] = {
            "query": " ".join(draw(st.lists(st.sampled_from(words), min_size=1, max_size=3))),
            "searchMode": draw(st.sampled_from(["hybrid", "memories", "chunks"])), "threshold": 0,
            "limit": draw(st.integers(1, 100)),
            "include": {"documents": draw(st.booleans()), "related": draw(st.booleans()),
                        "forgotten": draw(st.booleans())}}
        if draw(st.booleans()):
            body["filter"] = {"field": "owner", "operator": "eq", "value": other.name}
        return n, "POST", f"/ns/{target}/search", [], body
    if kind == "list":
        of = draw(st.sampled_from(["documents", "chunks", "memories"]))
        return n, "POST", f"/ns/{target}/list/{of}", [("limit", "100")], {"include": {"forgotten": True}} \
            if of == "memories" else {}
    if kind == "document":
        return n, "GET", f"/ns/{target}/document/{any_id}", [("include", "chunks,memories")], None
    if kind == "memory":
        return n, "GET", f"/ns/{target}/memories/{any_id}", [("include", "related,documents")], None
    return n, "POST", f"/ns/{target}/list/documents/memory-counts", [], {"ids": [any_id, "shared"]}


def test_no_answer_with_a_namespaces_key_reveals_another_namespaces_data(world: tuple[str, list[Namespace]]) -> None:
    url, spaces = world
    client = httpx.Client(base_url=url, timeout=30)
    tried: set[str] = set()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(calls(spaces))
    def run(call: tuple[int, str, str, list[tuple[str, str]], Any]) -> None:
        n, method, path, params, body = call
        own = spaces[n]
        r = client.request(method, path, params=params, json=body, headers={"Authorization": f"Bearer {own.key}"})
        assert r.status_code < 500, r.text
        tried.add(f"{path.split('/')[3]}:{r.status_code}")
        if not path.startswith(f"/ns/{own.name}/"):
            assert r.status_code == 403, (path, r.text)
        text = r.text
        sent = [path, *(v for _, v in params), *(str(v) for v in (body or {}).values())]
        for value in sorted(sent, key=len, reverse=True):  # what the caller sent may be echoed
            text = text.replace(value, "")
        for other in spaces:
            if other is not own:
                assert other.secret not in text, f"{other.secret} leaked into {method} {path} of {own.name}"
                assert f"{other.name}-" not in text, f"{other.name}'s ids leaked into {path} of {own.name}"
        if r.status_code != 200:
            return
        answer = r.json()
        stray = set(ids_in(answer)) - own.ids - {"shared"}  # "shared" is also the caller id of one of its own
        assert not stray, f"{sorted(stray)[:3]} are not in {own.name} ({path})"
        if path.endswith("/list/documents"):
            assert answer["pagination"]["totalItems"] == own.docs == len(answer["documents"])
        if own.secret in r.text:
            tried.add("own secret seen")
        if answer.get("results"):
            tried.add("search found")

    try:
        run()
    finally:
        client.close()
    # The calls reached every route and both answers where both exist (found, not found, forbidden).
    assert {"search:200", "search:403", "list:200", "document:200", "document:404", "memories:200",
            "memories:404", "own secret seen", "search found"} <= tried, tried
