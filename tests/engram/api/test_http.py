"""searchMemories over real HTTP: a uvicorn server on a loopback port, called with httpx."""

import json
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from engram_index.engram.api.lexicon import Lexicons
from engram_index.engram.api.limits import SpaceLimits
from tests.limits import roomy_app
from engram_index.engram.auth import InsecureOpen
from engram_index.engine.types import Document, ModelIdentity
from engram_index.engram.records import encode_query_vector
from engram_index.collections import Collections
from engram_index.store.sqlite import StoredDocument

from .server import serving, wait_until_loaded

SPACE = "at://did:plc:http234http234http234http2/space/garden.engram.space/s"
BARE = "at://did:plc:http234http234http234http2/space/garden.engram.space/nomodel"
MODEL = ModelIdentity("m", "sha256:00", 4)
DID = "did:web:index.example"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("data")
    spaces = Collections(data)
    spaces.ensure_collection(SPACE, MODEL)
    spaces.ensure_collection(BARE)
    vecs = np.eye(4, dtype="<f2")
    texts = ["deploy the HTTPServer on friday", "pasta with tomatoes", "東京の天気は晴れ", "résumé of the meeting"]
    spaces.write(SPACE, [
        StoredDocument(Document(id=f"{SPACE}/did:plc:a/garden.engram.memory/r{i}", author="did:plc:a",
                                text=t, tags=("t",), created_ms=1_700_000_000_000 + i, vector=vecs[i].tobytes(),
                                metadata={"cid": "bafyreiexample"}))
        for i, t in enumerate(texts)
    ] + [StoredDocument(Document(id=f"{SPACE}/did:plc:a/garden.engram.memory/novector", author="did:plc:a",
                                 text="zucchini notes, never embedded", created_ms=1_700_000_000_100,
                                 metadata={"cid": "bafyreiexample"}))])
    spaces.close()
    # Generous admission: these tests fire requests faster than the default per-space rate.
    limits = SpaceLimits(rate=1e6, burst=1e6)
    with serving(roomy_app(data, DID, authenticator=InsecureOpen(), limits=limits)) as url:
        wait_until_loaded(url, SPACE)
        yield url


LEXICONS = Lexicons.bundled()


def search(url: str, **params: object) -> httpx.Response:
    r = httpx.get(f"{url}/xrpc/garden.engram.searchMemories", params={"space": SPACE, **params})
    if r.status_code == 200:
        # Every successful response of the suite is checked against the lexicon's output schema.
        assert LEXICONS.output_errors("garden.engram.searchMemories", r.json()) == []
    return r


def vec(i: int) -> str:
    return encode_query_vector(np.eye(4, dtype=np.float32)[i])


def test_describe_service_health_and_did_document_answer(base_url: str) -> None:
    assert httpx.get(f"{base_url}/xrpc/garden.engram.describeService").json()["did"] == DID
    assert httpx.get(f"{base_url}/xrpc/_health").status_code == 200
    assert httpx.get(f"{base_url}/.well-known/did.json").json()["id"] == DID


def test_q_alone_runs_a_keyword_search_without_similarity(base_url: str) -> None:
    body = search(base_url, q="http server").json()
    assert body["mode"] == "keyword"
    top = body["memories"][0]
    assert top["text"].startswith("deploy") and "similarity" not in top
    assert top["match"]["keyword"]["rank"] == 1


def test_vector_and_q_run_a_hybrid_search_with_the_full_match(base_url: str) -> None:
    body = search(base_url, q="tomatoes", vector=vec(1), model="m", modelDigest="sha256:00").json()
    assert body["mode"] == "hybrid"
    top = body["memories"][0]
    assert top["similarity"] == 1000 and top["match"]["fusion"] == "convex"
    assert top["createdAt"].endswith("Z") and top["tags"] == ["t"]


def test_a_hybrid_result_without_a_vector_has_no_similarity_and_no_vector_match(base_url: str) -> None:
    body = search(base_url, q="zucchini", vector=vec(0), model="m", modelDigest="sha256:00").json()
    found = {m["uri"].rsplit("/", 1)[1]: m for m in body["memories"]}
    orphan = found["novector"]
    assert "similarity" not in orphan and "vector" not in orphan["match"]
    assert orphan["match"]["keyword"]["rank"] == 1
    assert found["r0"]["match"]["vector"]["rank"] == 1 and found["r0"]["similarity"] == 1000


def test_snippet_highlights_are_utf8_byte_ranges(base_url: str) -> None:
    top = search(base_url, q="résumé").json()["memories"][0]
    snip = top["match"]["snippet"]
    h = snip["highlights"][0]
    assert snip["text"].encode()[h["byteStart"]:h["byteEnd"]].decode() == "résumé"


def test_responses_are_compact_utf8_json_with_text_as_is(base_url: str) -> None:
    r = search(base_url, q="東京")
    assert r.headers["content-type"] == "application/json"
    assert r.content == json.dumps(r.json(), ensure_ascii=False, separators=(",", ":")).encode()
    assert "東京".encode() in r.content


def test_vector_alone_runs_a_vector_search_without_match(base_url: str) -> None:
    body = search(base_url, vector=vec(2), model="m", modelDigest="sha256:00").json()
    assert body["mode"] == "vector" and "match" not in body["memories"][0]


@pytest.mark.parametrize(
    "params, status, error",
    [
        ({"limit": 0, "q": "x"}, 400, "InvalidRequest"),
        ({"limit": 51, "q": "x"}, 400, "InvalidRequest"),
        ({"limit": "ten", "q": "x"}, 400, "InvalidRequest"),
        ({"q": "x" * 4001}, 400, "InvalidRequest"),
        ({"q": "é" * 2001}, 400, "InvalidRequest"),
        ({"space": "not a uri", "q": "x"}, 400, "InvalidRequest"),
        ({"q": "x", "mode": ["keyword", "vector"]}, 400, "InvalidRequest"),
        ({"tags": [f"t{i}" for i in range(17)], "q": "x"}, 400, "InvalidRequest"),
        ({"vector": "A" * 43001, "model": "m", "modelDigest": "sha256:00"}, 400, "InvalidRequest"),
        ({"vector": "!!!", "model": "m", "modelDigest": "sha256:00"}, 400, "InvalidRequest"),
        ({"vector": vec(0)}, 400, "InvalidRequest"),
        ({"vector": vec(0), "model": "other", "modelDigest": "sha256:00"}, 400, "ModelMismatch"),
        ({"vector": encode_query_vector(np.ones(5, np.float32)), "model": "m", "modelDigest": "sha256:00"}, 400, "ModelMismatch"),
        ({"q": "x", "mode": "vector"}, 400, "ModelNotHosted"),
        ({"q": "x", "mode": "sideways"}, 400, "InvalidRequest"),
        ({"author": "not-a-did", "q": "x"}, 400, "InvalidRequest"),
        ({"since": "yesterday", "q": "x"}, 400, "InvalidRequest"),
        ({}, 400, "InvalidRequest"),
        ({"space": "at://did:plc:nope/space/garden.engram.space/x", "q": "x"}, 400, "UnknownSpace"),
        ({"space": BARE, "vector": vec(0), "model": "m", "modelDigest": "sha256:00"}, 400, "NoModel"),
        # A space without a model: there is nothing to embed q with, here or at the client.
        ({"space": BARE, "q": "x", "mode": "vector"}, 400, "NoModel"),
        ({"space": BARE, "q": "x", "mode": "hybrid"}, 400, "NoModel"),
    ],
)
def test_bad_requests_get_the_named_xrpc_error(base_url: str, params: dict, status: int, error: str) -> None:
    r = search(base_url, **params)
    assert r.status_code == status, r.text
    assert r.json()["error"] == error and r.json()["message"]


def test_a_missing_space_parameter_is_invalid(base_url: str) -> None:
    r = httpx.get(f"{base_url}/xrpc/garden.engram.searchMemories", params={"q": "x"})
    assert r.status_code == 400 and r.json()["error"] == "InvalidRequest"


def test_the_lexicon_limits_themselves_are_accepted(base_url: str) -> None:
    ok = search(base_url, q="x" * 4000, tags=[f"t{i}" for i in range(16)], limit=50)
    assert ok.status_code == 200 and search(base_url, q="x", limit=1).status_code == 200


def test_odd_unicode_in_q_is_searched_not_crashed_on(base_url: str) -> None:
    for q in ["🙂🙂", "e\u0301", "\u200b", "東京", "a\x00b", "ﷺ"]:
        r = search(base_url, q=q)
        assert r.status_code == 200, (q, r.text)
