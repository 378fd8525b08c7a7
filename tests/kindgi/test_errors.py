"""The error envelope, request ids, tokens (401s), limits (413), unknown routes, read-only workers (501)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from kindgi.client import AuthError, InvalidRequestError, Kindgi, ServerError

from tests.limits import roomy_app
from engram_index.cli import main
from engram_index.engram.auth import InsecureOpen
from engram_index.kindgi.wire import MAX_BODY_BYTES
from engram_index.testkit.serve import serving
from tests.kindgi.server import DID, Server, kindgi_server

SCOPE = {"tenantId": "acme", "projectId": "web"}


def _envelope(answer: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert answer.status_code == status and answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert error["code"] == code and isinstance(error["message"], str) and error["message"]
    assert error["requestId"] == answer.headers["x-request-id"]
    return error  # type: ignore[no-any-return]


def test_a_request_without_a_token_is_401_auth_missing(server: Server) -> None:
    for headers in ({}, {"Authorization": "Basic YWxpY2U6cHc="}, {"Authorization": "Bearer"},
                    {"Authorization": "Bearer kg_unknown_token"}):
        _envelope(httpx.get(f"{server.url}/v1/memory/facts", headers=headers), 401, "auth-missing")
    with pytest.raises(AuthError) as err:
        Kindgi(base_url=server.url, token="kg_nope_nope").memory.list_facts()
    assert err.value.status == 401 and err.value.server_code == "auth-missing"


def test_an_expired_token_is_401_auth_expired_and_a_revoked_one_401_auth_revoked(server: Server) -> None:
    expired = Kindgi(base_url=server.url, token=server.token(user="alice", expires_ms=int(time.time() * 1000) - 1))
    with pytest.raises(AuthError) as err:
        expired.memory.retrieve(mode="list")
    assert err.value.server_code == "auth-expired" and err.value.reason == "token-expired"
    token = server.token(user="alice", projects=["web"])
    client = Kindgi(base_url=server.url, token=token)
    client.memory.list_facts()
    key_id = token.split("_")[1]
    server.keys().revoke(key_id)  # while the service runs: the next request is refused
    with pytest.raises(AuthError) as revoked:
        client.memory.list_facts()
    assert revoked.value.status == 401 and revoked.value.server_code == "auth-revoked"


def test_the_cli_mints_a_token_as_the_last_word_and_revokes_it_while_serving(server: Server) -> None:
    runner = CliRunner()
    made = runner.invoke(main, ["keys", "create", "kindgi", "--data", str(server.data), "--tenant", "acme",
                                "--service", "importer", "--project", "web", *server.store_args()])
    assert made.exit_code == 0, made.output
    token = made.output.split()[-1]
    client = Kindgi(base_url=server.url, token=token)
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="from the cli")
    assert fact.attributed_to is not None and fact.attributed_to.id == "importer"
    assert runner.invoke(main, ["keys", "revoke", token.split("_")[1], "--data", str(server.data),
                                *server.store_args()]).exit_code == 0
    with pytest.raises(AuthError):
        client.memory.get_fact(fact.id)


def test_the_request_id_is_echoed_or_minted_and_equals_the_errors(server: Server) -> None:
    token = server.token(user="alice", projects=["web"])
    auth = {"Authorization": f"Bearer {token}"}
    ok = httpx.get(f"{server.url}/v1/memory/facts", headers={**auth, "X-Request-Id": "trace-42"})
    assert ok.status_code == 200 and ok.headers["x-request-id"] == "trace-42"
    minted = httpx.get(f"{server.url}/v1/memory/facts/nope", headers=auth)
    error = _envelope(minted, 404, "fact-not-found")
    assert str(error["requestId"]).startswith("req-") and error["details"] == {"factId": "nope"}
    echoed = httpx.get(f"{server.url}/v1/memory/facts/nope", headers={**auth, "X-Request-Id": "trace-43"})
    assert _envelope(echoed, 404, "fact-not-found")["requestId"] == "trace-43"


def test_a_body_over_the_limit_is_413_request_too_large_with_max_bytes(server: Server) -> None:
    client = server.client(user="alice", projects=["web"])
    with pytest.raises(InvalidRequestError) as err:
        client.memory.write_fact(type="note", scope=SCOPE, content="x" * (MAX_BODY_BYTES + 1))
    assert err.value.status == 413 and err.value.server_code == "request-too-large"
    assert err.value.details == {"maxBytes": MAX_BODY_BYTES}
    assert client.memory.write_fact(type="note", scope=SCOPE, content="x" * (MAX_BODY_BYTES - 200)).size


@pytest.mark.parametrize("method, path, body, status, code", [
    ("POST", "/v1/memory/facts", b"not json", 400, "bad-input"),
    ("POST", "/v1/memory/facts", b"[1, 2]", 400, "bad-input"),
    ("POST", "/v1/memory/facts", b'{"type": 5, "scope": {"tenantId": "acme"}, "content": 1}', 400, "bad-input"),
    ("POST", "/v1/memory/facts", b'{"type": "n", "scope": [], "content": 1}', 400, "bad-input"),
    ("POST", "/v1/memory/facts", b'{"type": "n", "scope": {"tenantId": 7}, "content": 1}', 400, "bad-input"),
    ("POST", "/v1/memory/facts", b'{"type": "n", "scope": {"tenantId": "acme", "projectId": "web"}}', 400, "bad-input"),
    ("POST", "/v1/memory/facts", b'{"type": "n", "scope": {"tenantId": "acme", "participantId": "p"}, "content": 1}',
     400, "validation-failed"),
    ("POST", "/v1/memory/facts", b'{"type": "n", "scope": {"tenantId": "acme", "projectId": "web"}, "content": 1,'
     b' "subjects": [{"kind": "robot", "id": "r"}]}', 400, "bad-input"),
    ("POST", "/v1/memory/facts", b'{"type": "n", "scope": {"tenantId": "acme", "projectId": "web"}, "content": 1,'
     b' "subjects": ' + b"[" + b",".join([b'{"kind": "user", "id": "u"}'] * 21) + b"]}", 400, "validation-failed"),
    ("POST", "/v1/memory/facts", b'{"type": "n", "scope": {"tenantId": "acme", "projectId": "web"}, "content": 1,'
     b' "colour": "red"}', 400, "unknown-field"),
    ("POST", "/v1/memory/facts", b'{"type": "n", "scope": {"tenantId": "acme", "projectId": "web"}, "content": 1,'
     b' "validFrom": "soon"}', 400, "bad-input"),
    ("GET", "/v1/memory/facts?asOf=yesterday", b"", 400, "bad-input"),
    ("GET", "/v1/memory/facts?cursor=%%%", b"", 400, "bad-input"),
    ("GET", "/v1/memory/facts?scope=notjson", b"", 400, "bad-input"),
    ("GET", "/v1/memory/facts?scopeKind=org", b"", 400, "scope-invalid"),
    ("GET", "/v1/memory/facts/x?version=zero", b"", 400, "bad-input"),
    ("DELETE", "/v1/memory/facts/x?expectVersion=-1", b"", 400, "bad-input"),
    ("POST", "/v1/memory/facts/x/verify", b'{"expectVersion": "2"}', 404, "fact-not-found"),
    ("POST", "/v1/memory/facts/x/supersede", b'{"expectVersion": 1}', 400, "bad-input"),
    ("GET", "/v1/memory/nothing-here", b"", 404, "not-found"),
    ("PUT", "/v1/memory/retrieve", b"{}", 405, "method-not-allowed"),
    ("GET", "/v1/memory/erasures/not-a-uuid", b"", 403, "permission-denied"),
])
def test_bad_input_gets_the_envelope_with_its_status_never_a_500(server: Server, method: str, path: str,
                                                                   body: bytes, status: int, code: str) -> None:
    token = server.token(user="alice", projects=["web"])
    answer = httpx.request(method, f"{server.url}{path}", content=body,
                           headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    _envelope(answer, status, code)


def test_the_garden_face_keeps_its_own_envelope(server: Server) -> None:
    answer = httpx.get(f"{server.url}/xrpc/garden.engram.noSuchMethod")
    assert answer.status_code == 404 and answer.json()["error"] == "MethodNotImplemented"


def test_a_read_only_worker_answers_501_memory_operation_unsupported(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with kindgi_server(data) as server:
        token = server.token(user="alice", projects=["web"])
    app = roomy_app(data, DID, authenticator=InsecureOpen(), read_only=True)
    with serving(app) as url:
        client = Kindgi(base_url=url, token=token)
        for call in (lambda: client.memory.retrieve(mode="list"), lambda: client.memory.list_facts(),
                     lambda: client.memory.write_fact(type="n", scope=SCOPE, content="x")):
            with pytest.raises(ServerError) as err:
                call()
            assert err.value.status == 501 and err.value.server_code == "memory-operation-unsupported"


def test_an_embedder_that_is_down_is_503_and_one_that_answers_garbage_is_500_never_plain_text(tmp_path: Path) -> None:
    from engram_index.embed.ollama import OllamaEmbedder
    from tests.embed.fake_provider import FakeProvider

    provider = FakeProvider(16)
    try:
        embedder = OllamaEmbedder("nomic-embed-text", 16, provider.url, retries=1, backoff=0.01)
        with kindgi_server(tmp_path / "data", embedder) as server:
            token = server.token(user="alice", projects=["web"])
            headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "k-down"}
            body = {"type": "note", "scope": SCOPE, "content": "needs a vector"}
            provider.reset()
            provider.plan += ["503", "503"]
            down = httpx.post(f"{server.url}/v1/memory/facts", json=body, headers=headers)
            _envelope(down, 503, "service-unavailable")
            provider.plan += ["malformed"]
            broken = httpx.post(f"{server.url}/v1/memory/facts", json=body, headers=headers)
            _envelope(broken, 500, "internal-server-error")
            client = Kindgi(base_url=server.url, token=token)
            assert client.memory.list_facts().data == []  # nothing was written by either
            assert httpx.post(f"{server.url}/v1/memory/facts", json=body, headers=headers).status_code == 201
    finally:
        provider.close()
