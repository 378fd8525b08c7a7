"""Erasures by fact, by subject and by conversation: 202, then gone from every read and the indexes."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from kindgi.client import AuthError, Kindgi, NotFoundError, ServerError

from tests.kindgi.server import Server, kindgi_server
from tests.limits import PATIENCE_S

SCOPE = {"tenantId": "acme", "projectId": "web"}


def _finished(admin: Kindgi, erasure_id: str) -> object:
    deadline = time.monotonic() + PATIENCE_S
    while True:
        erasure = admin.memory.get_erasure(erasure_id)
        if erasure.status in ("completed", "failed"):
            return erasure
        assert time.monotonic() < deadline, "the erasure did not finish"
        time.sleep(0.05)


def _index_bytes(data: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (data / "spaces").rglob("*") if p.is_file())


def _gone(client: Kindgi, fact_id: str, word: str) -> None:
    with pytest.raises(NotFoundError):
        client.memory.get_fact(fact_id)
    with pytest.raises(NotFoundError):
        client.memory.list_fact_revisions(fact_id)
    assert fact_id not in {f.id for f in client.memory.list_facts().data}
    for mode in ("list", "keyword", "semantic", "both"):
        query = None if mode == "list" else word
        assert fact_id not in {r.fact.id for r in client.memory.retrieve(mode=mode, query=query).results}


def test_erasing_a_fact_answers_202_and_then_every_revision_is_gone(server: Server) -> None:
    writer = server.client(user="alice", projects=["web"])
    admin = server.client(admin=True)
    fact = writer.memory.write_fact(type="note", scope=SCOPE, content="quokkasecret one")
    writer.memory.supersede_fact(fact.id, content="quokkasecret two")
    other = writer.memory.write_fact(type="note", scope=SCOPE, content="kept words")
    assert writer.memory.retrieve(mode="keyword", query="quokkasecret").results  # committed to a segment
    assert b"quokkasecret" in _index_bytes(server.data)
    started = admin.memory.create_erasure({"factId": fact.id})
    assert started.selector_kind == "fact" and started.status in ("pending", "running", "completed")
    assert started.warnings and started.warnings[0].code == "erasure-unmatchable" and started.matchable is False
    done = _finished(admin, str(started.id))
    assert done.status == "completed" and done.selector is None  # type: ignore[attr-defined]
    assert done.counts == {"facts": 1, "revisions": 2}  # type: ignore[attr-defined]
    _gone(writer, fact.id, "quokkasecret")
    assert writer.memory.get_fact(other.id).content == "kept words"
    assert b"quokkasecret" not in _index_bytes(server.data)  # no keyword segment keeps the words


def _data_bytes(data: Path) -> bytes:
    return b"".join(p.read_bytes() for p in data.rglob("*") if p.is_file())


def _no_byte_left(data: Path, *words: bytes) -> None:
    """No file of the data directory holds any of these words (the files that do are named)."""
    left = _data_bytes(data)
    for word in words:
        assert word not in left, (word, [str(p) for p in data.rglob("*") if p.is_file() and word in p.read_bytes()])


def _hold_the_erasures_compaction(monkeypatch: pytest.MonkeyPatch, collections: Any) -> tuple[threading.Event,
                                                                                             threading.Event]:
    """Hold an erasure's own run at its compaction (its deletion committed): (reached, release)."""
    reached, release = threading.Event(), threading.Event()
    real_compact = collections.compact

    def compact(name: str) -> None:
        if threading.current_thread().name == "erasure":
            reached.set()
            release.wait(30)
        real_compact(name)

    monkeypatch.setattr(collections, "compact", compact)
    return reached, release


def test_an_erased_fact_leaves_no_byte_of_its_words_anywhere_in_the_data_directory(server: Server) -> None:
    writer = server.client(user="alice", projects=["web"])
    admin = server.client(admin=True)
    fact = writer.memory.write_fact(type="note", scope=SCOPE, content="wombatsecret lives at 12 Elm Road")
    writer.memory.supersede_fact(fact.id, content="wombatsecret moved to 9 Oak Lane")
    for i in range(20):  # neighbours on the same pages, which stay in use after the erasure
        writer.memory.write_fact(type="note", scope=SCOPE, content=f"kept neighbour number {i}")
    assert writer.memory.retrieve(mode="keyword", query="wombatsecret").results
    assert b"wombatsecret" in _data_bytes(server.data)
    done = _finished(admin, str(admin.memory.create_erasure({"factId": fact.id}).id))
    assert done.status == "completed"  # type: ignore[attr-defined]
    # The record store, its write-ahead log, the indexes, the saved counts.
    _no_byte_left(server.data, b"wombatsecret", b"Elm Road", b"Oak Lane")
    assert len(writer.memory.list_facts().data) == 20


def test_erasing_a_subject_removes_the_facts_that_name_them(server: Server) -> None:
    writer = server.client(service="app", projects=["web"])
    admin = server.client(admin=True)
    named = writer.memory.write_fact(type="note", scope=SCOPE, content="wombatword about p1",
                                     subjects=[{"kind": "participant", "id": "p1"}])
    theirs = writer.memory.write_fact(type="note", content="wombatword of p1",
                                      scope={**SCOPE, "participantId": "p1"})
    external = writer.memory.write_fact(type="note", scope=SCOPE, content="about someone else",
                                        subjects=[{"kind": "external", "id": "p1"}])
    done = _finished(admin, str(admin.memory.create_erasure(subject={"kind": "participant", "id": "p1"}).id))
    assert done.counts["facts"] == 2  # type: ignore[attr-defined]
    _gone(writer, named.id, "wombatword")
    _gone(writer, theirs.id, "wombatword")
    assert writer.memory.get_fact(external.id).content == "about someone else"


def test_erasing_a_conversation_removes_its_facts(server: Server) -> None:
    writer = server.client(user="alice", projects=["web"])
    admin = server.client(admin=True)
    in_thread = writer.memory.write_fact(type="note", scope={**SCOPE, "threadId": "conv-9"}, content="numbatword")
    outside = writer.memory.write_fact(type="note", scope={**SCOPE, "threadId": "conv-8"}, content="numbatword")
    _finished(admin, str(admin.memory.create_erasure(conversationId="conv-9").id))
    _gone(writer, in_thread.id, "numbatword")
    assert writer.memory.get_fact(outside.id).version == 1


def test_erasures_are_listed_exported_and_stay_erased_after_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with kindgi_server(data) as server:
        writer = server.client(user="alice", projects=["web"])
        admin_token = server.token(admin=True)
        admin = Kindgi(base_url=server.url, token=admin_token)
        fact = writer.memory.write_fact(type="note", scope=SCOPE, content="bilbyword")
        eid = str(admin.memory.create_erasure(factId=fact.id).id)
        _finished(admin, eid)
        page = admin.memory.list_erasures()
        assert [str(e.id) for e in page.data] == [eid] and page.has_more is False
        ledger = admin.memory.export_erasures().data
        assert [(str(e.id), e.selector_kind, e.status) for e in ledger] == [(eid, "fact", "completed")]
        assert admin.memory.resume_erasure(eid).status == "completed"
        with pytest.raises(ServerError) as err:
            admin.memory.replay_erasures(erasures=[])
        assert err.value.status == 501 and err.value.server_code == "memory-operation-unsupported"
    with kindgi_server(data) as again:
        client = Kindgi(base_url=again.url, token=admin_token)
        _gone(client, fact.id, "bilbyword")
        assert client.memory.get_erasure(eid).status == "completed"


def test_erasures_need_a_tenant_admin_and_name_exactly_one_selector(server: Server) -> None:
    user = server.client(user="alice", projects=["web"])
    admin = server.client(admin=True)
    with pytest.raises(AuthError) as err:
        user.memory.create_erasure(factId="x")
    assert err.value.status == 403 and err.value.server_code == "permission-denied"
    with pytest.raises(AuthError):
        user.memory.list_erasures()
    with pytest.raises(NotFoundError):
        admin.memory.get_erasure("00000000-0000-4000-8000-000000000000")
    import httpx

    token = server.token(admin=True)
    for body, code in (({"factId": "a", "conversationId": "b"}, "bad-input"), ({"userId": "u"}, "unknown-field"),
                       ({"subject": {"kind": "user", "id": "u"}}, "bad-input"), ({}, "bad-input")):
        answer = httpx.post(f"{server.url}/v1/memory/erasures", json=body, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 400 and answer.json()["error"]["code"] == code


def test_an_erasure_cut_short_after_its_deletion_commits_still_leaves_no_byte_when_run_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    with kindgi_server(data) as server:
        app, url = server.app, server.url
        token = server.token(user="alice", projects=["web"])
        writer = Kindgi(base_url=url, token=token, max_retries=0)
        admin = server.client(admin=True)
        # Written under a key, so that its kept answer (with its words) is in the store too.
        fact = writer.memory.write_fact(type="note", scope=SCOPE, content="numbatsecret lives at 4 Ash Row",
                                        idempotency_key="w-1")
        for i in range(20):
            writer.memory.write_fact(type="note", scope=SCOPE, content=f"kept neighbour number {i}")
        assert writer.memory.retrieve(mode="keyword", query="numbatsecret").results
        collections = app.state.kindgi.erasures.facts.collections
        real = collections.compact
        cut: list[str] = []

        def dies_once(name: str) -> None:  # the process dying after the deletion commit, before the rest
            if not cut:
                cut.append(name)
                raise RuntimeError("cut short")
            real(name)

        monkeypatch.setattr(collections, "compact", dies_once)
        erasure = str(admin.memory.create_erasure({"factId": fact.id}).id)
        assert _finished(admin, erasure).status == "failed" and cut  # type: ignore[attr-defined]
        assert admin.memory.resume_erasure(erasure).status == "completed"
        _no_byte_left(data, b"numbatsecret", b"Ash Row")
        again = httpx.post(f"{url}/v1/memory/facts", headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "w-1"},
                           json={"type": "note", "scope": SCOPE, "content": "numbatsecret lives at 4 Ash Row"})
        assert again.headers.get("x-idempotent-replay") != "true"  # the erased answer is not kept


def test_replaying_an_erased_facts_write_key_is_withheld_and_writes_nothing(server: Server) -> None:
    token = server.token(user="alice", projects=["web"])
    admin = server.client(admin=True)
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "write-once-1",
               "Content-Type": "application/json"}
    body = b'{"type": "note", "scope": {"tenantId": "acme", "projectId": "web"}, "content": "numbatsecret"}'
    first = httpx.post(f"{server.url}/v1/memory/facts", content=body, headers=headers)
    assert first.status_code == 201
    done = _finished(admin, str(admin.memory.create_erasure({"factId": first.json()["id"]}).id))
    assert done.status == "completed"  # type: ignore[attr-defined]
    again = httpx.post(f"{server.url}/v1/memory/facts", content=body, headers=headers)
    assert again.status_code == 409, again.text  # a retry must not bring the erased fact back
    error = again.json()["error"]
    assert error["code"] == "idempotency-key-replay-withheld"
    assert error["details"]["status"] == 201 and error["details"]["at"].endswith("Z")
    assert b"numbatsecret" not in again.content
    writer = Kindgi(base_url=server.url, token=token)
    assert "numbatsecret" not in {f.content for f in writer.memory.list_facts().data}


def test_a_keyed_retrieve_that_read_a_fact_before_its_erasure_keeps_no_byte_of_it_when_kept_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    query = {"mode": "keyword", "query": "quollsecret"}
    with kindgi_server(data) as server:
        app, url = server.app, server.url
        token = server.token(user="alice", projects=["web"])
        headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "read-1"}
        writer = Kindgi(base_url=url, token=token, max_retries=0)
        admin = server.client(admin=True)
        fact = writer.memory.write_fact(type="note", scope=SCOPE, content="quollsecret sleeps at 7 Fern Way")
        for i in range(20):
            writer.memory.write_fact(type="note", scope=SCOPE, content=f"kept neighbour number {i}")
        retriever = app.state.kindgi.retriever
        real = retriever.answer
        read, release = threading.Event(), threading.Event()

        def held(*args: Any, **kwargs: Any) -> Any:  # the answer is formed; keeping it waits for the erasure
            results = real(*args, **kwargs)
            read.set()
            release.wait(30)
            return results

        monkeypatch.setattr(retriever, "answer", held)
        answers: list[httpx.Response] = []
        reader = threading.Thread(target=lambda: answers.append(
            httpx.post(f"{url}/v1/memory/retrieve", json=query, headers=headers, timeout=60)))
        reader.start()
        assert read.wait(30), "the retrieve never read"
        done = _finished(admin, str(admin.memory.create_erasure({"factId": fact.id}).id))
        assert done.status == "completed"  # type: ignore[attr-defined]  # its withhold step has run
        store = app.state.kindgi.idempotency.store
        write = store.execute
        writing, written = threading.Event(), threading.Event()

        def held_writer(statements: Any) -> None:  # the write-behind holds its batch until told
            if threading.current_thread().name == "idempotency" and not written.is_set():
                writing.set()
                written.wait(30)
            write(statements)

        monkeypatch.setattr(store, "execute", held_writer)
        release.set()
        reader.join(30)
        assert answers[0].status_code == 200 and b"quollsecret" in answers[0].content  # read before the erasure
        assert writing.wait(30), "the answer was never kept behind"
        replay = httpx.post(f"{url}/v1/memory/retrieve", json=query, headers=headers)  # from memory, unwritten
        assert replay.status_code == 409 and replay.json()["error"]["code"] == "idempotency-key-replay-withheld"
        written.set()
    # Stopped: every answer kept behind has been written.
    _no_byte_left(data, b"quollsecret", b"Fern Way")
    with kindgi_server(data) as again:
        replay = httpx.post(f"{again.url}/v1/memory/retrieve", json=query, headers=headers)
        assert replay.status_code == 409 and replay.json()["error"]["code"] == "idempotency-key-replay-withheld"


def test_a_resume_racing_the_erasures_own_run_answers_completed_only_when_no_byte_is_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    with kindgi_server(data) as server:
        app = server.app
        writer = server.client(user="alice", projects=["web"])
        admin = server.client(admin=True)
        fact = writer.memory.write_fact(type="note", scope=SCOPE, content="dunnartsecret nests by 3 Reed Bank")
        for i in range(20):
            writer.memory.write_fact(type="note", scope=SCOPE, content=f"kept neighbour number {i}")
        assert writer.memory.retrieve(mode="keyword", query="dunnartsecret").results  # in a keyword segment
        erasures = app.state.kindgi.erasures
        facts = erasures.facts
        real_run, real_lock = erasures._run, facts.tenant_lock
        own_go, resume_read, resume_go = (threading.Event() for _ in range(3))
        # The erasure's own run holds after its deletion has committed.
        own_compacts, own_done = _hold_the_erasures_compaction(monkeypatch, facts.collections)

        def run(*args: Any, **kwargs: Any) -> Any:  # the erasure's own run starts only when told
            if threading.current_thread().name == "erasure":
                own_go.wait(30)
            return real_run(*args, **kwargs)

        def tenant_lock(tenant: str) -> Any:  # the resume's run waits once it has read the erasure
            if threading.current_thread().name != "erasure":
                resume_read.set()
                resume_go.wait(30)
            return real_lock(tenant)

        monkeypatch.setattr(erasures, "_run", run)
        monkeypatch.setattr(facts, "tenant_lock", tenant_lock)
        eid = str(admin.memory.create_erasure({"factId": fact.id}).id)
        answers: list[Any] = []
        resumer = threading.Thread(target=lambda: answers.append(admin.memory.resume_erasure(eid)))
        resumer.start()
        assert resume_read.wait(30), "the resume never ran the erasure"
        own_go.set()
        own_compacts.wait(3)  # reached unless the resume's run keeps the erasure to itself
        resume_go.set()
        resumer.join(30)
        try:
            assert answers and answers[0].status == "completed"
            # Completed means nothing of the fact is left.
            _no_byte_left(data, b"dunnartsecret", b"Reed Bank")
        finally:
            own_done.set()
        assert _finished(admin, eid).status == "completed"  # type: ignore[attr-defined]


def test_a_resume_of_a_running_erasure_answers_once_it_ends_and_keeps_no_answer_naming_the_fact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A running erasure's view names its fact in its selector; kept for the resume's key after the
    # run withheld the answers naming the fact, it would outlive the erasure (which keeps no id).
    data = tmp_path / "data"
    with kindgi_server(data) as server:
        app = server.app
        writer = server.client(user="alice", projects=["web"])
        admin = server.client(admin=True)
        fact = writer.memory.write_fact(type="note", scope=SCOPE, content="quollsecret dens under 9 Ash Row")
        erasures = app.state.kindgi.erasures
        compacting, go = _hold_the_erasures_compaction(monkeypatch, erasures.facts.collections)  # running
        eid = str(admin.memory.create_erasure({"factId": fact.id}).id)
        assert compacting.wait(30)
        assert admin.memory.get_erasure(eid).status == "running"  # type: ignore[attr-defined]
        answers: list[Any] = []
        resumer = threading.Thread(target=lambda: answers.append(admin.memory.resume_erasure(eid)))
        resumer.start()
        resumer.join(1.0)
        go.set()
        resumer.join(30)
        assert answers and answers[0].status == "completed"
        assert _finished(admin, eid).status == "completed"  # type: ignore[attr-defined]
    with sqlite3.connect(data / "records.sqlite") as db:
        kept = db.execute("SELECT count(*) FROM kindgi_idempotency WHERE instr(body, ?) > 0", (fact.id,)).fetchone()[0]
    assert kept == 0


def test_an_erasure_of_many_facts_withholds_all_their_kept_answers_in_one_pass_over_them(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    # Kept answers are many (every keyed request's, for a day) and large: each pass over them reads all.
    token = server.token(user="alice", projects=["web"])
    admin = server.client(admin=True)
    bodies = [orjson.dumps({"type": "note", "scope": {**SCOPE, "threadId": "conv-7"}, "content": f"wombatword {i}"})
              for i in range(5)]
    for i, body in enumerate(bodies):
        assert httpx.post(f"{server.url}/v1/memory/facts", content=body, headers={
            "Authorization": f"Bearer {token}", "Idempotency-Key": f"conv-7-{i}",
            "Content-Type": "application/json"}).status_code == 201
    store = server.app.state.kindgi.facts.store
    passes: list[str] = []
    execute = store.execute

    def counted(statements: Any, *args: Any, **kwargs: Any) -> Any:
        passes.extend(sql for sql, _ in statements if sql.startswith("UPDATE kindgi_idempotency"))
        return execute(statements, *args, **kwargs)

    monkeypatch.setattr(store, "execute", counted)
    assert _finished(admin, str(admin.memory.create_erasure(conversationId="conv-7").id)).status == "completed"  # type: ignore[attr-defined]
    assert len(passes) == 1, passes
    for i, body in enumerate(bodies):
        again = httpx.post(f"{server.url}/v1/memory/facts", content=body, headers={
            "Authorization": f"Bearer {token}", "Idempotency-Key": f"conv-7-{i}", "Content-Type": "application/json"})
        assert again.status_code == 409 and b"wombatword" not in again.content, again.text
