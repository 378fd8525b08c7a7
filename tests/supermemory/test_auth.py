"""Keys: a missing, unknown, expired or revoked key is 401; a key outside its namespaces is 403."""

from __future__ import annotations

import time

import httpx
import pytest
import supermemory

from tests.supermemory.conftest import Server, add_done


def test_a_missing_key_is_unauthorized_in_the_error_body(server: Server, ns: str) -> None:
    response = httpx.post(f"{server.url}/ns/{ns}/search", json={"query": "x"})
    assert response.status_code == 401 and response.json()["error"] == "missing API key"
    response = httpx.get(f"{server.url}/ns", headers={"Authorization": "Basic abc"})
    assert response.status_code == 401


def test_an_unknown_key_is_unauthorized(server: Server, ns: str) -> None:
    with pytest.raises(supermemory.AuthenticationError) as err:
        server.client("sm_000000000000_forged").search(ns, query="x")
    assert err.value.body == {"error": "invalid API key"}


def test_a_kindgi_token_is_not_a_supermemory_key(server: Server, ns: str) -> None:
    token, _ = server.keys().create("kindgi", {"tenant": "t"})
    with pytest.raises(supermemory.AuthenticationError):
        server.client(token).search(ns, query="x")


def test_a_revoked_key_stops_working_at_its_next_request(server: Server, ns: str) -> None:
    token, key_id = server.mint()
    client = server.client(token)
    client.search(ns, query="x")
    server.keys().revoke(key_id)
    with pytest.raises(supermemory.AuthenticationError) as err:
        client.search(ns, query="x")
    assert err.value.body["error"] == "API key revoked"


def test_an_expired_key_is_unauthorized(server: Server, ns: str) -> None:
    token, _ = server.mint(expires_ms=int(time.time() * 1000) - 1)
    with pytest.raises(supermemory.AuthenticationError) as err:
        server.client(token).namespaces.list()
    assert err.value.body["error"] == "API key expired"


def test_a_key_outside_its_namespaces_is_forbidden(server: Server, ns: str) -> None:
    token, _ = server.mint([ns])
    scoped = server.client(token)
    add_done(scoped, ns, "Scoped keys write where they reach.")
    other = ns + "_other"
    for call in (lambda: scoped.add(other, content="x"), lambda: scoped.search(other, query="x"),
                 lambda: scoped.documents.get(other, "d"), lambda: scoped.namespaces.get(other),
                 lambda: scoped.list(other, "memories"), lambda: scoped.memories.forget(other, ids=["m"])):
        with pytest.raises(supermemory.PermissionDeniedError) as err:
            call()
        assert err.value.body["error"] == "namespace access denied"


def test_namespace_lists_and_the_organization_show_only_what_the_key_reaches(server: Server, ns: str) -> None:
    add_done(server.client(), ns + "_hidden", "Hidden from the scoped key.")
    add_done(server.client(), ns, "Visible to the scoped key.")
    token, _ = server.mint([ns])
    scoped = server.client(token)
    assert [n.namespace for n in scoped.namespaces.list(limit=100).namespaces] == [ns]
    assert scoped.organization.get().namespace_count == 1
    with pytest.raises(supermemory.PermissionDeniedError) as err:
        scoped.organization.update(organizational_context="mine now")
    assert err.value.body["error"] == "admin access required"
    with pytest.raises(supermemory.PermissionDeniedError):
        scoped.namespaces.delete(ns, move_to=ns + "_hidden")


def test_a_bad_namespace_name_is_a_400_after_the_key_is_checked(server: Server) -> None:
    response = httpx.post(f"{server.url}/ns/bad.name/search", json={"query": "x"})
    assert response.status_code == 401
    with pytest.raises(supermemory.BadRequestError):
        server.client().search("bad.name", query="x")
    with pytest.raises(supermemory.BadRequestError):
        server.client().search("x" * 101, query="x")
