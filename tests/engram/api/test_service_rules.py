"""Rules every query obeys: members only, no space leaks, rate and size limits, no tracebacks."""

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from starlette.requests import Request

from engram_index.engram.api.limits import SpaceLimits, TokenBucket
from tests.limits import roomy_app
from engram_index.engram.auth import Caller, InsecureOpen
from engram_index.engine.types import Document, ModelIdentity
from engram_index.errors import AuthError
from engram_index.collections import Collections
from engram_index.store.sqlite import StoredDocument

from .server import serving

SPACE = "at://did:plc:rules234rules234rules234ru/space/garden.engram.space/s"
OTHER = "at://did:plc:rules234rules234rules234ru/space/garden.engram.space/unindexed"
QUERIES = ["searchMemories", "listMemories", "getMemory", "getSpaceStatus", "getMemoryGraph"]


class RefuseAll:
    """An authenticator that lets nobody in."""

    async def authenticate(self, request: Request, space: str) -> Caller:
        raise AuthError("no credential")


class Explodes:
    """An authenticator with a bug."""

    async def authenticate(self, request: Request, space: str) -> Caller:
        raise RuntimeError("secret internal detail")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data")
    spaces = Collections(path)
    spaces.ensure_collection(SPACE, ModelIdentity("m", "d", 4))
    spaces.write(SPACE, [StoredDocument(Document(id=f"{SPACE}/did:plc:a/garden.engram.memory/x", author="did:plc:a",
                                                  text="hello world", created_ms=1))])
    spaces.close()
    return path


@pytest.fixture
def refusing(data: Path) -> Iterator[str]:
    with serving(roomy_app(data, "did:web:x", authenticator=RefuseAll())) as url:
        yield url


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("space", [SPACE, OTHER])
def test_every_query_but_describe_refuses_an_unauthenticated_caller_alike_for_any_space(
    refusing: str, query: str, space: str
) -> None:
    r = httpx.get(f"{refusing}/xrpc/garden.engram.{query}", params={"space": space, "q": "x", "uri": f"{space}/x"})
    assert r.status_code == 401 and r.json()["error"] == "AuthRequired"


def test_describe_service_needs_no_credential(refusing: str) -> None:
    assert httpx.get(f"{refusing}/xrpc/garden.engram.describeService").status_code == 200


def test_an_unexpected_error_is_a_500_with_a_request_id_and_no_traceback(
    data: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serving(roomy_app(data, "did:web:x", authenticator=Explodes())) as url:
        with caplog.at_level(logging.ERROR, logger="engram_index.engram.api"):
            r = httpx.get(f"{url}/xrpc/garden.engram.searchMemories", params={"space": SPACE, "q": "x"})
    body = r.json()
    assert r.status_code == 500 and body["error"] == "InternalServerError"
    assert "secret" not in r.text and "Traceback" not in r.text
    request_id = body["message"].split("request id ")[1].rstrip(")")
    assert any(request_id in rec.getMessage() for rec in caplog.records)


def test_a_query_string_longer_than_any_valid_one_is_413(data: Path) -> None:
    import http.client
    import json
    from urllib.parse import urlencode, urlsplit

    with serving(roomy_app(data, "did:web:x", authenticator=InsecureOpen())) as url:
        # httpx refuses to build so long a URL; the standard library's client sends it as is.
        conn = http.client.HTTPConnection(urlsplit(url).netloc, timeout=10)
        conn.request("GET", "/xrpc/garden.engram.searchMemories?" + urlencode({"space": SPACE, "q": "x" * 100_000}))
        response = conn.getresponse()
        status, body = response.status, json.loads(response.read())
        conn.close()
    assert status == 413 and body["error"] == "PayloadTooLarge"


def test_searches_beyond_the_spaces_token_bucket_get_rate_limit_exceeded(data: Path) -> None:
    limits = SpaceLimits(rate=0.1, burst=2)
    with serving(roomy_app(data, "did:web:x", authenticator=InsecureOpen(), limits=limits)) as url:
        codes = []
        for _ in range(4):
            r = httpx.get(f"{url}/xrpc/garden.engram.searchMemories", params={"space": SPACE, "q": "hello"})
            codes.append((r.status_code, r.json().get("error")))
    statuses = [c for c, _ in codes if c != 503]  # the first call may find the index loading
    assert 429 in statuses and ("RateLimitExceeded" in [e for _, e in codes])


def test_a_valid_vector_of_16000_dimensions_arriving_in_pieces_reaches_the_app(data: Path) -> None:
    import socket
    import time
    from urllib.parse import urlencode, urlsplit

    from engram_index.engram.records import encode_query_vector

    vector = encode_query_vector(np.ones(16000, np.float32))  # 42,667 characters: within the lexicon
    target = "/xrpc/garden.engram.searchMemories?" + urlencode(
        {"space": SPACE, "vector": vector, "model": "m", "modelDigest": "d"})
    head = f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    with serving(roomy_app(data, "did:web:x", authenticator=InsecureOpen())) as url:
        netloc = urlsplit(url).netloc.split(":")
        with socket.create_connection((netloc[0], int(netloc[1])), timeout=10) as sock:
            for start in range(0, len(head), 4096):  # in pieces, as a slow network delivers it
                sock.sendall(head[start : start + 4096])
                time.sleep(0.001)
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
    status_line, _, rest = reply.partition(b"\r\n")
    assert b" 400 " in status_line and b'"ModelMismatch"' in rest  # answered by the app, as JSON


def test_a_token_bucket_refills_at_its_rate() -> None:
    bucket = TokenBucket(rate=1000.0, burst=1)
    assert bucket.take() and not bucket.take()
    import time

    time.sleep(0.01)
    assert bucket.take()


LOOP = "the event loop's thread"


def _thread_kind() -> str:
    """The running thread's name, or LOOP on a thread running an event loop."""
    import asyncio
    import threading

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return threading.current_thread().name
    return LOOP


class Overlaps:
    """SpaceIndex.search recorded: the kind of thread each search ran on, and the most that ran at once
    (each held `hold_s`, long enough for concurrent requests' searches to overlap)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, hold_s: float = 0.02) -> None:
        import threading
        import time

        from engram_index.engine.search import SpaceIndex

        self.seen: list[str] = []
        self.most = 0
        self._running = 0
        lock = threading.Lock()
        search = SpaceIndex.search

        def recording(index: SpaceIndex, req: object) -> object:
            with lock:
                self.seen.append(_thread_kind())
                self._running += 1
                self.most = max(self.most, self._running)
            try:
                time.sleep(hold_s)
                return search(index, req)  # type: ignore[arg-type]
            finally:
                with lock:
                    self._running -= 1

        monkeypatch.setattr(SpaceIndex, "search", recording)

    def clear(self) -> None:
        """Forget what was recorded so far."""
        self.seen.clear()
        self.most = 0


def test_at_most_the_given_number_of_searches_run_at_once_on_the_search_pool(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time
    from concurrent.futures import ThreadPoolExecutor

    searches = Overlaps(monkeypatch)
    limits = SpaceLimits(rate=1e6, burst=1e6, concurrent=16)
    with serving(roomy_app(data, "did:web:x", authenticator=InsecureOpen(), limits=limits, search_threads=2)) as url:
        get = lambda _: httpx.get(f"{url}/xrpc/garden.engram.searchMemories", params={"space": SPACE, "q": "hello"})
        while get(0).status_code == 503:  # the index loads in the background
            time.sleep(0.05)
        searches.clear()
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda i: get(i).status_code, range(16)))
    assert statuses == [200] * 16
    # The pool keeps spare threads for overrunning searches, so which thread ran a search varies (and a
    # search that found its process answering nothing else may run on the event loop's); how many ran
    # at once does not.
    assert 1 <= searches.most <= 2 and all(name.startswith("search") or name == LOOP for name in searches.seen)


def test_a_lone_search_runs_on_the_event_loops_thread_once_its_space_was_searched_quickly(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from tests.limits import PATIENCE_S

    from engram_index import search_pool
    from engram_index.engine.search import SpaceIndex

    monkeypatch.setattr(search_pool, "INLINE_MAX_S", 3600.0)  # every search counts as quick: nothing timed
    where: list[str] = []
    search = SpaceIndex.search

    def recording(self: SpaceIndex, req: object) -> object:
        where.append(_thread_kind())
        return search(self, req)  # type: ignore[arg-type]

    monkeypatch.setattr(SpaceIndex, "search", recording)
    with serving(roomy_app(data, "did:web:x", authenticator=InsecureOpen())) as url:
        get = lambda: httpx.get(f"{url}/xrpc/garden.engram.searchMemories", params={"space": SPACE, "q": "hello"})
        while get().status_code == 503:  # the index loads in the background
            time.sleep(0.05)
        # (A request of another test's server in this process, still being answered, would make this one
        # not alone: the searches go on until one is, within the patience.)
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            where.clear()
            assert get().status_code == 200
            if where == [LOOP]:
                break
            time.sleep(0.05)
    assert where == [LOOP]


def test_searches_that_overlap_run_on_the_event_loops_thread_when_the_servers_processes_fill_its_cores(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time
    from concurrent.futures import ThreadPoolExecutor

    from engram_index import search_pool

    monkeypatch.setattr(search_pool, "INLINE_MAX_S", 3600.0)  # every search counts as quick: nothing timed
    searches = Overlaps(monkeypatch)
    limits = SpaceLimits(rate=1e6, burst=1e6, concurrent=16)
    app = roomy_app(data, "did:web:x", authenticator=InsecureOpen(), limits=limits,
                    processes=search_pool.usable_cores())
    depth = search_pool.loop_depth_for(search_pool.usable_cores())  # as many clients: never more in flight
    with serving(app) as url:
        get = lambda _: httpx.get(f"{url}/xrpc/garden.engram.searchMemories", params={"space": SPACE, "q": "hello", "limit": 1})
        while get(0).status_code == 503:  # the index loads in the background
            time.sleep(0.05)
        searches.clear()
        with ThreadPoolExecutor(depth) as pool:
            statuses = list(pool.map(lambda i: get(i).status_code, range(16)))
    assert statuses == [200] * 16
    # Every core has a serving process's loop: a pool thread would add no core, only the hop's cost. (Each
    # answer is full: a short one's whyFewer counts on the pool, and a search meanwhile would go there too.)
    assert searches.seen == [LOOP] * 16 and searches.most == 1


@pytest.mark.parametrize("beyond", [False, True])
def test_a_process_with_more_requests_in_flight_than_its_loop_depth_searches_on_the_pool(
    data: Path, monkeypatch: pytest.MonkeyPatch, beyond: bool
) -> None:
    import time

    from engram_index import search_pool
    from engram_index.engram.api import search as api_search

    monkeypatch.setattr(search_pool, "INLINE_MAX_S", 3600.0)  # every search counts as quick: nothing timed
    cores = search_pool.usable_cores()
    depth = search_pool.loop_depth_for(cores)
    # The process's count as this request's search would see it: at its depth, or one past it.
    monkeypatch.setattr(api_search, "requests_in_flight", lambda: depth + beyond)
    searches = Overlaps(monkeypatch, hold_s=0.0)
    app = roomy_app(data, "did:web:x", authenticator=InsecureOpen(), processes=cores)
    with serving(app) as url:
        get = lambda: httpx.get(f"{url}/xrpc/garden.engram.searchMemories",
                                params={"space": SPACE, "q": "hello", "limit": 1})
        while get().status_code == 503:  # the index loads in the background
            time.sleep(0.05)
        searches.clear()
        assert [get().status_code for _ in range(3)] == [200] * 3
    if beyond:
        assert len(searches.seen) == 3 and all(name.startswith("search") for name in searches.seen)
    else:
        assert searches.seen == [LOOP] * 3
