"""Every value that reaches a time, a SQLite integer or a lookup is checked where the request is parsed.

Times outside years 1-9999 in UTC, whole numbers past 64 bits, malformed query parameters and
fields of the wrong shape are 400s in the Kindgi envelope that name the field or parameter;
what the official SDK sends is still taken.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from kindgi.client import InvalidRequestError, Kindgi

from engram_index.admission import Admission
from tests.kindgi.server import Server, kindgi_server

SCOPE = {"tenantId": "acme", "userId": "u1"}
UNLIMITED = Admission(rate=1e9, burst=1e9, concurrent=64, queue_wait_s=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module, its per-key limits lifted (these tests are not about admission)."""
    with kindgi_server(tmp_path_factory.mktemp("strict") / "data", key_limits=UNLIMITED) as running:
        yield running


@pytest.fixture(scope="module")
def auth(server: Server) -> dict[str, str]:
    """A token of user u1 in acme."""
    return {"Authorization": f"Bearer {server.token(user='u1')}"}


@pytest.fixture(scope="module")
def fact_id(server: Server, auth: dict[str, str]) -> str:
    """A fact of u1's."""
    r = httpx.post(f"{server.url}/v1/memory/facts", headers=auth,
                   json={"type": "note", "scope": SCOPE, "content": {"text": "x"}})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _refused(answer: httpx.Response, code: str, **named: str) -> dict[str, object]:
    """The answer is a 400 of `code` in the envelope, its details naming what was wrong."""
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == code and error["requestId"] == answer.headers["x-request-id"], error
    for key, value in named.items():
        assert error["details"][key] == value, error
    return error  # type: ignore[no-any-return]


TIMES = ["observedAt", "validFrom", "validUntil", "retention.keepUntil"]
OUT_OF_RANGE = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"]


def _with_time(name: str, value: str) -> dict[str, object]:
    """A body carrying one time, at its place."""
    if name.startswith("retention."):
        return {"retention": {"keepUntil": value}}
    return {name: value}


@pytest.mark.parametrize("name", TIMES)
@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_a_fact_time_outside_years_1_to_9999_in_utc_is_a_400_naming_the_field(
        server: Server, auth: dict[str, str], fact_id: str, name: str, value: str) -> None:
    write = {"type": "note", "scope": SCOPE, "content": {"text": "x"}, **_with_time(name, value)}
    _refused(httpx.post(f"{server.url}/v1/memory/facts", headers=auth, json=write), "validation-failed", field=name)
    supersede = {"content": {"text": "y"}, **_with_time(name, value)}
    _refused(httpx.post(f"{server.url}/v1/memory/facts/{fact_id}/supersede", headers=auth, json=supersede),
             "validation-failed", field=name)


def test_the_first_and_last_instants_that_can_be_written_back_are_taken_and_read_by_the_sdk(server: Server) -> None:
    client = server.client(user="u1")
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="edges",
                                    observedAt="0001-01-01T14:00:00+14:00", validUntil="9999-12-31T09:59:59-14:00")
    assert fact.observed_at is not None and fact.observed_at.year == 1
    assert fact.valid_until is not None and fact.valid_until.year == 9999
    assert client.memory.get_fact(fact.id).valid_until == fact.valid_until


@pytest.mark.parametrize("value", ["99999999999999999999", str(2**63), "²", "٣", " 1", "+1", "-1", "0", "1.0"])
def test_a_version_that_is_not_a_revision_number_within_64_bits_is_a_400_naming_the_parameter(
        server: Server, auth: dict[str, str], fact_id: str, value: str) -> None:
    for method, name in (("GET", "version"), ("DELETE", "expectVersion")):
        answer = httpx.request(method, f"{server.url}/v1/memory/facts/{fact_id}", headers=auth, params={name: value})
        code = "validation-failed" if value in ("99999999999999999999", str(2**63), "0") else "bad-input"
        _refused(answer, code, parameter=name)


def test_an_expect_version_past_64_bits_in_a_body_is_a_400_naming_the_field(
        server: Server, auth: dict[str, str], fact_id: str) -> None:
    for route in ("verify", "supersede"):
        body = b'{"expectVersion": 18446744073709551615, "content": 1}' if route == "supersede" else \
            b'{"expectVersion": 18446744073709551615}'
        answer = httpx.post(f"{server.url}/v1/memory/facts/{fact_id}/{route}", headers=auth, content=body)
        _refused(answer, "validation-failed", field="expectVersion")


def _cursor(value: object) -> str:
    """A cursor as the lists encode them, around any JSON value."""
    return base64.urlsafe_b64encode(orjson.dumps(value)).decode().rstrip("=")


@pytest.mark.parametrize("path", ["/v1/memory/facts", "/v1/memory/erasures"])
@pytest.mark.parametrize("name, value, code", [
    ("limit", "abc", "bad-input"), ("limit", "0", "validation-failed"), ("limit", "-1", "bad-input"),
    ("limit", "1e3", "bad-input"), ("limit", "²", "bad-input"),
    ("cursor", "abc", "bad-input"), ("cursor", _cursor({"t": 2**64 - 1, "id": "x"}), "bad-input"),
    ("cursor", _cursor({"t": True, "id": "x"}), "bad-input"), ("cursor", _cursor([1, 2]), "bad-input"),
    ("cursor", "é", "bad-input"),
])
def test_a_bad_limit_or_cursor_is_a_400_naming_the_parameter(
        server: Server, path: str, name: str, value: str, code: str) -> None:
    admin = {"Authorization": f"Bearer {server.token(admin=True)}"}
    _refused(httpx.get(f"{server.url}{path}", headers=admin, params={name: value}), code, parameter=name)


def test_a_limit_past_the_most_is_the_most_however_long(server: Server, auth: dict[str, str]) -> None:
    for value in ("101", "9" * 5000):
        assert httpx.get(f"{server.url}/v1/memory/facts", headers=auth, params={"limit": value}).status_code == 200


@pytest.mark.parametrize("name, value, code", [
    ("inherit", "yes", "bad-input"), ("inherit", "1", "bad-input"), ("type", "t" * 257, "validation-failed"),
    ("scopeId", "s" * 257, "validation-failed"), ("asOf", "yesterday", "bad-input"),
    ("asOf", "0001-01-01T00:00:00+14:00", "validation-failed"), ("scope", "[1", "bad-input"),
    ("scope", '{"x": ' + "[" * 300 + "]" * 300 + "}", "bad-input"),
])
def test_a_bad_list_filter_is_a_400_naming_the_parameter(
        server: Server, auth: dict[str, str], name: str, value: str, code: str) -> None:
    params = {name: value, **({"scopeKind": "project"} if name == "scopeId" else {})}
    _refused(httpx.get(f"{server.url}/v1/memory/facts", headers=auth, params=params), code, parameter=name)


def test_an_as_of_outside_years_1_to_9999_on_a_fact_is_a_400_naming_the_parameter(
        server: Server, auth: dict[str, str], fact_id: str) -> None:
    answer = httpx.get(f"{server.url}/v1/memory/facts/{fact_id}", headers=auth,
                       params={"asOf": "9999-12-31T23:59:59-14:00"})
    _refused(answer, "validation-failed", parameter="asOf")


def test_every_query_parameter_the_sdk_sends_is_taken(server: Server, fact_id: str) -> None:
    client: Kindgi = server.client(user="u1")
    page = client.memory.list_facts(limit=500, type="note", scope=orjson.dumps({"userId": "u1"}).decode(),
                                    scope_kind="tenant", inherit=True, as_of="2999-01-01T00:00:00+02:00")
    assert fact_id in [f.id for f in page.data]
    assert client.memory.list_facts(limit=1, inherit=False).has_more in (True, False)
    assert client.memory.get_fact(fact_id, version=1).version == 1


@pytest.mark.parametrize("body, name", [
    (b'{"type": "note", "scope": {"tenantId": "acme", "userId": "u1"}}', "content"),
    (b'{"type": "note", "scope": {"tenantId": "acme", "userId": "u1"}, "content": null}', "content"),
])
def test_a_write_without_content_or_with_null_content_is_a_400_naming_content(
        server: Server, auth: dict[str, str], body: bytes, name: str) -> None:
    _refused(httpx.post(f"{server.url}/v1/memory/facts", headers=auth, content=body), "bad-input", field=name)


def test_null_content_in_a_supersede_is_a_400_naming_content(server: Server, auth: dict[str, str], fact_id: str) -> None:
    answer = httpx.post(f"{server.url}/v1/memory/facts/{fact_id}/supersede", headers=auth, json={"content": None})
    _refused(answer, "bad-input", field="content")


GOOD_SOURCE = {"kind": "http-api", "uri": "https://example.com/a", "freshness": {"ttlSeconds": 60},
               "refresh": {"strategy": "on-read", "priority": 2}}


@pytest.mark.parametrize("source, name", [
    ({**GOOD_SOURCE, "kind": ["http-api"]}, "source.kind"),
    ({**GOOD_SOURCE, "kind": "carrier-pigeon"}, "source.kind"),
    ({k: v for k, v in GOOD_SOURCE.items() if k != "freshness"}, "source.freshness"),
    ({**GOOD_SOURCE, "freshness": {"ttlSeconds": 2**63}}, "source.freshness.ttlSeconds"),
    ({**GOOD_SOURCE, "freshness": {"ttlSeconds": -1}}, "source.freshness.ttlSeconds"),
    ({**GOOD_SOURCE, "freshness": {"lastVerifiedAt": "9999-12-31T23:59:59-14:00"}},
     "source.freshness.lastVerifiedAt"),
    ({**GOOD_SOURCE, "refresh": {"strategy": {}}}, "source.refresh.strategy"),
    ({**GOOD_SOURCE, "refresh": {"strategy": "manual", "priority": "high"}}, "source.refresh.priority"),
    ({**GOOD_SOURCE, "uri": 5}, "source.uri"),
])
def test_a_source_not_shaped_as_the_fact_schema_says_is_a_400_naming_its_field(
        server: Server, auth: dict[str, str], source: dict[str, object], name: str) -> None:
    body = {"type": "note", "scope": SCOPE, "content": "x", "source": source}
    answer = httpx.post(f"{server.url}/v1/memory/facts", headers=auth, json=body)
    assert answer.status_code == 400 and answer.json()["error"]["details"]["field"] == name, answer.text


def test_a_source_and_generated_by_of_the_schema_come_back_as_the_sdk_reads_them(server: Server) -> None:
    client = server.client(user="u1")
    source = {**GOOD_SOURCE, "freshness": {"ttlSeconds": 0, "lastVerifiedAt": "2024-05-01T10:00:00"}}
    fact = client.memory.write_fact(type="note", scope=SCOPE, content="sourced", source=source,
                                    generatedBy={"runId": "run-1", "stepId": "s"})
    assert fact.source is not None and fact.source.kind == "http-api"
    assert fact.source.freshness.last_verified_at is not None and fact.source.freshness.last_verified_at.tzinfo
    assert fact.generated_by is not None and fact.generated_by.run_id == "run-1"
    with pytest.raises(InvalidRequestError) as err:
        client.memory.write_fact(type="note", scope=SCOPE, content="x", generatedBy={"stepId": "s"})
    assert err.value.status == 400


def test_a_resume_whose_force_is_not_a_boolean_is_a_400_naming_it(server: Server) -> None:
    admin = {"Authorization": f"Bearer {server.token(admin=True)}"}
    answer = httpx.post(f"{server.url}/v1/memory/erasures/e1/resume", headers=admin, json={"force": "yes"})
    _refused(answer, "bad-input", field="force")


@pytest.mark.parametrize("path, allow", [
    ("/v1/memory/facts", "GET, OPTIONS, POST"), ("/v1/memory/facts/x", "DELETE, GET, OPTIONS"),
    ("/v1/memory/retrieve", "OPTIONS, POST"), ("/v1/memory/erasures/export", "GET, OPTIONS"),
])
def test_head_on_a_memory_route_is_405_with_allow_never_a_read(server: Server, auth: dict[str, str], path: str,
                                                                allow: str) -> None:
    answer = httpx.head(f"{server.url}{path}", headers=auth)
    assert answer.status_code == 405 and answer.headers["allow"] == allow
    assert httpx.head(f"{server.url}/v1/memory/nothing", headers=auth).status_code == 404


def test_a_served_data_directory_is_unharmed_by_the_refusals(tmp_path: Path) -> None:
    with kindgi_server(tmp_path / "data", key_limits=UNLIMITED) as running:
        auth = {"Authorization": f"Bearer {running.token(user='u1')}"}
        body = {"type": "note", "scope": SCOPE, "content": {"text": "x"}, "observedAt": OUT_OF_RANGE[0]}
        assert httpx.post(f"{running.url}/v1/memory/facts", headers=auth, json=body).status_code == 400
        assert running.client(user="u1").memory.list_facts().data == []
