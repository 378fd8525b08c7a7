"""searchMemories with q alone: embedded here when this service runs the space's model, per seed 000."""

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path

import httpx
import numpy as np
import pytest

from engram_index.engram.api.embedding import QueryEmbedding
from engram_index.engram.api.limits import SpaceLimits
from tests.limits import PATIENCE_S, roomy_app, roomy_embedding
from engram_index.embed.base import EmbedderError
from engram_index.engram.auth import InsecureOpen
from engram_index.embed.hashing import HashingEmbedder
from engram_index.engine.types import Document, ModelIdentity
from engram_index.collections import Collections
from engram_index.store.sqlite import StoredDocument

from .server import serving, wait_until_loaded

AUTHORITY = "did:plc:embed234embed234embed234e"
SPACE = f"at://{AUTHORITY}/space/garden.engram.space/s"
FOREIGN = "at://did:plc:other234other234other234ot/space/garden.engram.space/s"
ALIEN_MODEL = f"at://{AUTHORITY}/space/garden.engram.space/alien"
DIMS = 64


class SlowHashing(HashingEmbedder):
    """The hashing embedder, slowed down so that concurrent calls pile up."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(0.5)
        return super().embed_queries(texts)


def seed_space(spaces: Collections, uri: str, model: ModelIdentity) -> None:
    spaces.ensure_collection(uri, model, query_prefix="query: ")
    embedder = HashingEmbedder(DIMS)
    texts = ["the deploy failed on friday", "grandma's tomato sauce", "kubernetes pods restart"]
    vecs = embedder.embed_documents(texts)
    spaces.write(uri, [
        StoredDocument(Document(id=f"{uri}/did:plc:a/garden.engram.memory/r{i}", author="did:plc:a", text=t,
                                created_ms=i, vector=vecs[i].astype("<f2").tobytes()))
        for i, t in enumerate(texts)
    ])


def make_data(path: Path) -> Path:
    spaces = Collections(path)
    identity = HashingEmbedder(DIMS).identity
    seed_space(spaces, SPACE, identity)
    seed_space(spaces, FOREIGN, identity)
    seed_space(spaces, ALIEN_MODEL, ModelIdentity("other-model", "sha256:00", DIMS))
    spaces.close()
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_data(tmp_path_factory.mktemp("data"))


def server(data: Path, embedding: QueryEmbedding) -> Iterator[str]:
    with serving(roomy_app(data, "did:web:x", authenticator=InsecureOpen(), embedding=embedding,
                           limits=SpaceLimits(rate=1e6, burst=1e6))) as url:
        wait_until_loaded(url, SPACE, FOREIGN, ALIEN_MODEL)
        yield url


@pytest.fixture(scope="module")
def url(data: Path) -> Iterator[str]:
    yield from server(data, roomy_embedding(HashingEmbedder(DIMS), authorities={AUTHORITY}))


def search(url: str, space: str = SPACE, **params: object) -> httpx.Response:
    return httpx.get(f"{url}/xrpc/garden.engram.searchMemories", params={"space": space, **params})


def test_q_alone_is_embedded_and_searched_hybrid(url: str) -> None:
    body = search(url, q="tomato sauce").json()
    assert body["mode"] == "hybrid"
    top = body["memories"][0]
    assert "tomato" in top["text"] and "similarity" in top and top["match"]["fusion"] == "convex"


def test_mode_vector_with_q_alone_ranks_by_the_embedded_q(url: str) -> None:
    body = search(url, q="kubernetes pods", mode="vector").json()
    assert body["mode"] == "vector" and "kubernetes" in body["memories"][0]["text"]


def test_mode_keyword_never_embeds(url: str) -> None:
    assert search(url, q="tomato", mode="keyword").json()["mode"] == "keyword"


@pytest.mark.parametrize(
    "space, q, error",
    [
        (FOREIGN, "tomato", "TextSearchNotAllowed"),  # an authority this service does not embed for
        (ALIEN_MODEL, "tomato", "ModelNotHosted"),  # a model this service does not run
        (SPACE, "tomato " * 200, "ModelNotHosted"),  # more than 1000 characters
    ],
)
def test_q_that_cannot_be_embedded_falls_back_to_keyword_unless_a_mode_was_asked(
    url: str, space: str, q: str, error: str
) -> None:
    assert search(url, space, q=q).json()["mode"] == "keyword"
    for mode in ("hybrid", "vector"):
        r = search(url, space, q=q, mode=mode)
        assert r.json()["error"] == error and r.status_code in (400, 403)


def test_too_many_queries_at_once_get_embedder_busy(tmp_path: Path) -> None:
    data = make_data(tmp_path)
    embedding = QueryEmbedding(SlowHashing(DIMS), concurrent=1, queue=0, burst=100, rate=100)
    for base in server(data, embedding):
        results: list[httpx.Response] = []
        threads = [threading.Thread(target=lambda: results.append(search(base, q="tomato"))) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        errors = sorted(r.json().get("error", "ok") for r in results)
        assert "EmbedderBusy" in errors and "ok" in errors
        assert all(r.status_code == 503 for r in results if r.json().get("error") == "EmbedderBusy")


def test_each_authority_has_an_embedding_rate_limit(tmp_path: Path) -> None:
    data = make_data(tmp_path)
    embedding = QueryEmbedding(HashingEmbedder(DIMS), rate=0.01, burst=1)
    for base in server(data, embedding):
        first, second = search(base, q="tomato"), search(base, q="sauce")
        assert first.status_code == 200 and second.status_code == 429
        assert second.json()["error"] == "RateLimitExceeded"


class Local(HashingEmbedder):
    """The hashing embedder as a local model is seen: one that tells when its pass begins (pass_start)."""

    TELLS_PASS = True


class Failing(HashingEmbedder):
    """An embedder whose query embeddings fail as a model that cannot run does."""

    TELLS_PASS = True

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbedderError("the model cannot run here")


@pytest.mark.parametrize("q", ["tomato sauce", "why did the deploy fail", "kubernetes", "nothing alike"])
def test_q_embedded_beside_the_keyword_pass_answers_as_q_embedded_before_the_search(tmp_path: Path, q: str) -> None:
    data = make_data(tmp_path)
    answers = []
    embeddings = [roomy_embedding(e, authorities={AUTHORITY}) for e in (HashingEmbedder(DIMS), Local(DIMS))]
    for embedding in embeddings:  # embedded first, then beside the search's keyword pass
        for base in server(data, embedding):
            answers.append([search(base, q=q, **({"mode": mode} if mode else {})).json()
                            for mode in ("", "hybrid", "vector")])
    assert embeddings[0]._threads is None and embeddings[1]._threads is not None  # (each embedded as said)
    assert answers[0] == answers[1]
    assert answers[0][0]["mode"] == "hybrid" and answers[0][2]["mode"] == "vector"


def test_an_embedding_that_fails_beside_the_search_answers_as_one_that_failed_before_it(tmp_path: Path) -> None:
    data = make_data(tmp_path)
    answers = []
    for embedder in (Failing(DIMS), NoPass(DIMS)):
        for base in server(data, roomy_embedding(embedder, authorities={AUTHORITY})):
            answers.append([(r.status_code, r.json()) for r in (search(base, q="tomato"), search(base, q="x", mode="vector"))])
    assert answers[0] == answers[1] and answers[0][0][0] >= 500


class NoPass(Failing):
    """The failing embedder, embedded before the search as a remote one is."""

    TELLS_PASS = False


def test_a_local_embedding_is_started_and_its_slot_freed_when_it_ends() -> None:
    async def run() -> None:
        embedding = QueryEmbedding(Local(DIMS), concurrent=1, queue=0)
        first = await embedding.start(AUTHORITY, "query: ", "tomato")
        assert isinstance(first, Future)
        np.testing.assert_array_equal(first.result(PATIENCE_S), Local(DIMS).embed_queries(["query: tomato"])[0])
        deadline = time.monotonic() + PATIENCE_S  # the slot comes back on the event loop, once the thread says so
        while embedding._slots is not None and embedding._slots.locked() and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        second = await embedding.start(AUTHORITY, "query: ", "sauce")  # one slot: free again, not EmbedderBusy
        assert isinstance(second, Future) and second.result(PATIENCE_S).shape == (DIMS,)
        held = await embedding.start(AUTHORITY, "query: ", "tomato")  # the cache holds it: no embedding
        assert isinstance(held, np.ndarray)
        remote = await QueryEmbedding(HashingEmbedder(DIMS)).start(AUTHORITY, "", "tomato")
        assert isinstance(remote, np.ndarray)  # an embedder that never tells its pass is embedded first

    asyncio.run(run())
