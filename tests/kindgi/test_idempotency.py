"""Idempotency-Key: replay, body mismatch, in flight, per caller, across a restart, after a crash."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kindgi.client import ConflictError, Kindgi

from engram_index.embed.ollama import OllamaEmbedder
from engram_index.keys import KeyStore
from tests.embed.fake_provider import FakeProvider
from tests.kindgi.server import Server, kindgi_server
from tests.limits import ServeProcess
from tests.limits import PATIENCE_S

pytestmark = pytest.mark.long(13)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

SCOPE = {"tenantId": "acme", "projectId": "web"}
FACT = {"type": "note", "scope": SCOPE, "content": "idempotent words"}


def _post(url: str, token: str, key: str, body: dict[str, object], path: str = "/v1/memory/facts") -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key})


def test_a_repeat_replays_the_first_answer_byte_identical_and_runs_nothing_again(server: Server) -> None:
    token = server.token(user="alice", projects=["web"])
    first = _post(server.url, token, "k-1", FACT)
    again = _post(server.url, token, "k-1", FACT)
    assert first.status_code == again.status_code == 201
    assert again.content == first.content and again.headers["content-type"] == first.headers["content-type"]
    assert again.headers["x-idempotent-replay"] == "true" and "x-idempotent-replay" not in first.headers
    client = Kindgi(base_url=server.url, token=token)
    assert [f.id for f in client.memory.list_facts().data] == [first.json()["id"]]
    sdk = client.memory.write_fact(FACT, idempotency_key="k-1")
    assert sdk.id == first.json()["id"]


def test_every_changing_route_and_retrieve_honour_the_key(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact(FACT)
    one = client.memory.supersede_fact(fact.id, content="next", idempotency_key="s")
    assert client.memory.supersede_fact(fact.id, content="next", idempotency_key="s").version == one.version == 2
    assert client.memory.verify_fact(fact.id, idempotency_key="v").version == 3
    assert client.memory.verify_fact(fact.id, idempotency_key="v").version == 3
    assert client.memory.retrieve(mode="list", idempotency_key="r").results[0].fact.version == 3
    client.memory.supersede_fact(fact.id, content="later")
    assert client.memory.retrieve(mode="list", idempotency_key="r").results[0].fact.version == 3  # the kept answer
    token = server.token(user="alice", projects=["web"])
    deleted = httpx.delete(f"{server.url}/v1/memory/facts/{fact.id}",
                           headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "d"})
    replay = httpx.delete(f"{server.url}/v1/memory/facts/{fact.id}",
                          headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "d"})
    assert deleted.status_code == replay.status_code == 200 and replay.content == deleted.content


def test_another_body_under_the_same_key_is_409_idempotency_key_body_mismatch(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    client.memory.write_fact(FACT, idempotency_key="k-2")
    with pytest.raises(ConflictError) as err:
        client.memory.write_fact({**FACT, "content": "other words"}, idempotency_key="k-2")
    assert err.value.status == 409 and err.value.server_code == "idempotency-key-body-mismatch"


def test_a_retrieve_under_a_key_is_checked_against_the_key_before_its_own_body(server: Server) -> None:
    # A retrieve's body is checked (and its query's embedding started) before its key is looked up, but
    # what the key says comes first: another body is 409, the first body is replayed, as for any route.
    token = server.token(user="alice", projects=["web"])
    Kindgi(base_url=server.url, token=token).memory.write_fact(FACT)
    path = "/v1/memory/retrieve"
    first = _post(server.url, token, "r-1", {"mode": "both", "query": "idempotent words"}, path)
    assert first.status_code == 200 and first.json()["results"]
    for refused in ({"mode": "bogus", "query": "words"}, {"mode": "both"}, {"mode": "both", "query": "x", "limit": 0}):
        other = _post(server.url, token, "r-1", refused, path)
        assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency-key-body-mismatch"
        assert _post(server.url, token, "r-2", refused, path).status_code == 400  # without the key: its own error
    replay = _post(server.url, token, "r-1", {"mode": "both", "query": "idempotent words"}, path)
    assert replay.content == first.content and replay.headers["x-idempotent-replay"] == "true"


def test_the_same_key_from_another_caller_is_their_own_request(server: Server) -> None:
    alice = server.client(user="alice", projects=["web"])
    bob = server.client(user="bob", projects=["web"])
    mine = alice.memory.write_fact(FACT, idempotency_key="shared")
    theirs = bob.memory.write_fact({**FACT, "content": "bob's words"}, idempotency_key="shared")
    assert theirs.id != mine.id and theirs.attributed_to.id == "bob"  # type: ignore[union-attr]


def test_an_error_answer_is_not_kept_so_a_retry_runs_again(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    fact = client.memory.write_fact({**FACT, "retention": {"legalHold": True}})
    token = server.token(user="alice", projects=["web"])
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "del"}
    refused = httpx.delete(f"{server.url}/v1/memory/facts/{fact.id}", headers=headers)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "legal-hold"
    client.memory.supersede_fact(fact.id, content="released", retention={"legalHold": False})
    assert httpx.delete(f"{server.url}/v1/memory/facts/{fact.id}", headers=headers).status_code == 200


def test_kept_answers_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with kindgi_server(data) as server:
        token = server.token(user="alice", projects=["web"])
        first = _post(server.url, token, "k-3", FACT)
        found = _post(server.url, token, "r-3", {"mode": "list"}, "/v1/memory/retrieve")
    with kindgi_server(data) as again:
        replayed = _post(again.url, token, "r-3", {"mode": "list"}, "/v1/memory/retrieve")
        assert replayed.content == found.content and replayed.headers["x-idempotent-replay"] == "true"
        replay = _post(again.url, token, "k-3", FACT)
        assert replay.status_code == 201 and replay.content == first.content
        assert replay.headers["x-idempotent-replay"] == "true"
        mismatch = _post(again.url, token, "k-3", {**FACT, "content": "else"})
        assert mismatch.json()["error"]["code"] == "idempotency-key-body-mismatch"


@pytest.fixture
def slow_provider() -> Iterator[FakeProvider]:
    provider = FakeProvider(16)
    yield provider
    provider.close()


def _embed_started(provider: FakeProvider) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not any(r["path"] == "/api/embed" for r in provider.posts()):
        assert time.monotonic() < deadline, "the first request never reached the embedder"
        time.sleep(0.01)


def test_a_repeat_while_the_first_runs_is_409_in_flight_with_retry_after(tmp_path: Path,
                                                                         slow_provider: FakeProvider) -> None:
    embedder = OllamaEmbedder("nomic-embed-text", 16, slow_provider.url)
    with kindgi_server(tmp_path / "data", embedder) as server:
        token = server.token(user="alice", projects=["web"])
        slow_provider.reset()
        slow_provider.plan.append("slow")
        answers: list[httpx.Response] = []
        first = threading.Thread(target=lambda: answers.append(_post(server.url, token, "k-4", FACT)))
        first.start()
        _embed_started(slow_provider)
        repeat = _post(server.url, token, "k-4", FACT)
        assert repeat.status_code == 409 and repeat.json()["error"]["code"] == "idempotency-key-in-flight"
        assert repeat.headers["retry-after"] == "5"
        other = _post(server.url, token, "k-4", {**FACT, "content": "other"})
        assert other.json()["error"]["code"] == "idempotency-key-body-mismatch"
        first.join(30)
        assert answers[0].status_code == 201
        after = _post(server.url, token, "k-4", FACT)
        assert after.status_code == 201 and after.content == answers[0].content


def test_a_request_killed_mid_way_frees_its_key(tmp_path: Path, slow_provider: FakeProvider) -> None:
    data = tmp_path / "data"
    token, _ = KeyStore(data).create("kindgi", {"tenant": "acme", "user": "alice", "projects": ["web"]})
    server = ServeProcess(data, "--embedder", f"ollama:nomic-embed-text:16@{slow_provider.url}")
    server.start()
    try:
        slow_provider.reset()
        slow_provider.plan.append("slow")
        threading.Thread(target=lambda: _try_post(server.url, token), daemon=True).start()
        _embed_started(slow_provider)
        server.kill()
        server.start()
        retry = _post(server.url, token, "k-5", FACT)
        assert retry.status_code == 201 and "x-idempotent-replay" not in retry.headers
        listed = httpx.get(f"{server.url}/v1/memory/facts", headers={"Authorization": f"Bearer {token}"}).json()
        assert [f["id"] for f in listed["data"]] == [retry.json()["id"]]
    finally:
        server.kill()


def _try_post(url: str, token: str) -> None:
    try:
        _post(url, token, "k-5", FACT)
    except httpx.TransportError:
        pass  # the server was killed under it


class _Died(Exception):
    """The process dying right after a commit (the answer is never sent; the key dies with it)."""


def test_an_erasure_cut_off_right_after_it_is_recorded_replays_on_retry_instead_of_running_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    with kindgi_server(data) as served:
        app, url = served.app, served.url
        admin = served.token(admin=True)
        store = app.state.kindgi.erasures.store
        real = store.execute
        died: list[bool] = []

        def dies_after_recording(statements: list[tuple[str, tuple[object, ...]]]) -> None:
            real(statements)
            if not died and any(sql.startswith("INSERT INTO kindgi_erasures") for sql, _ in statements):
                died.append(True)
                raise _Died()

        monkeypatch.setattr(store, "execute", dies_after_recording)
        selector = {"conversationId": "conv-1"}
        cut = _post(url, admin, "e-1", selector, "/v1/memory/erasures")
        assert died and cut.status_code == 500  # standing for an answer that never left
        retry = _post(url, admin, "e-1", selector, "/v1/memory/erasures")
        assert retry.status_code == 202 and retry.headers.get("x-idempotent-replay") == "true"
        ledger = Kindgi(base_url=url, token=admin, max_retries=0).memory.export_erasures().data
        assert [str(e.id) for e in ledger] == [retry.json()["id"]]  # recorded once, not once per attempt


def test_an_erasure_resume_cut_off_right_after_it_completes_replays_on_retry_instead_of_running_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    with kindgi_server(data) as server:
        app, url = server.app, server.url
        admin = server.token(admin=True)
        sdk = Kindgi(base_url=url, token=admin, max_retries=0)
        fact = server.client(user="alice", projects=["web"]).memory.write_fact(FACT)
        erasures = app.state.kindgi.erasures
        collections = erasures.facts.collections
        real_compact = collections.compact
        failed: list[str] = []

        def fails_once(name: str) -> None:  # the first run fails, so that a resume has work to do
            if not failed:
                failed.append(name)
                raise RuntimeError("cut short")
            real_compact(name)

        monkeypatch.setattr(collections, "compact", fails_once)
        eid = str(sdk.memory.create_erasure({"factId": fact.id}).id)
        deadline = time.monotonic() + PATIENCE_S
        while sdk.memory.get_erasure(eid).status != "failed":
            assert time.monotonic() < deadline, "the first run did not fail"
            time.sleep(0.05)
        store = erasures.store
        real = store.execute
        dead: set[int] = set()

        def dies_after_completing(statements: list[tuple[str, tuple[object, ...]]]) -> None:
            if threading.get_ident() in dead:
                raise _Died()  # a dead process writes nothing more
            real(statements)
            completed = store.query("SELECT status FROM kindgi_erasures WHERE id=?", (eid,)) == [("completed",)]
            if not dead and completed:  # the commit that completed the erasure, whatever else it held
                dead.add(threading.get_ident())
                raise _Died()

        monkeypatch.setattr(store, "execute", dies_after_completing)
        path = f"/v1/memory/erasures/{eid}/resume"
        cut = _post(url, admin, "resume-1", {}, path)
        assert dead and cut.status_code == 500  # standing for an answer that never left
        monkeypatch.setattr(store, "execute", real)  # the process is back
        shown = httpx.get(f"{url}/v1/memory/erasures/{eid}", headers={"Authorization": f"Bearer {admin}"})
        assert shown.json()["status"] == "completed"  # the resumed run had committed
        retry = _post(url, admin, "resume-1", {}, path)
        assert retry.status_code == 200 and retry.headers.get("x-idempotent-replay") == "true"
        assert retry.headers["content-type"] == "application/json" and retry.json() == shown.json()
        again = _post(url, admin, "resume-1", {}, path)
        assert again.content == retry.content and again.headers.get("x-idempotent-replay") == "true"
        assert str(sdk.memory.resume_erasure(eid).id) == eid  # what the SDK reads from a resume
