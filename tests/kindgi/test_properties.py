"""Property tests of every memory route: requests drawn from the official SDK's own schema of the route.

The route table, each body's JSON Schema, each query parameter's type and each answer's model come
from the `kindgi` SDK (`client.memory`): bodies and query strings are drawn valid, at their
boundaries and wrong (see tests/reliability/schemagen.py) and sent to a real server in this
process, its per-key limits lifted. Whatever is sent, the answer is never a 5xx (but the 501 the
spec gives replaying erasures), an error is Kindgi's envelope with `X-Request-Id` equal to its
`requestId`, and a 2xx validates against the SDK's model of the route's answer.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pydantic
import pytest
from hypothesis import strategies as st
from kindgi.client import _models, _resources

from engram_index.admission import Admission
from tests.kindgi.server import Server, kindgi_server
from tests.reliability import schemagen
from tests.reliability.faces_kindgi import fact_errors, kindgi_envelope_errors
from tests.reliability.fuzzkit import Call

UNLIMITED = Admission(rate=1e9, burst=1e9, concurrent=64, queue_wait_s=30)
EXAMPLES = 30
# Values that let a drawn request reach the handlers' work (the caller's tenant, a user it is).
HINTS: dict[str, list[Any]] = {
    "tenantId": ["acme"], "userId": ["u1"], "type": ["note", "preference"], "query": ["tea", "rivers"],
    "mode": ["list", "keyword", "both"], "embeddingModel": ["hashing-64"], "runId": ["run-1"],
    "id": ["u1", "ext-1"], "conversationId": ["conv-1"], "projectId": ["web"], "orgId": ["eng"],
    "threadId": ["t1"], "sessionId": ["s1"], "participantId": ["p1"], "contentHash": ["sha256:0f"],
    "scope": [{"tenantId": "acme", "userId": "u1"}, {"tenantId": "acme", "projectId": "web"},
              {"tenantId": "acme", "projectId": "web", "threadId": "t1", "participantId": "p1"}],
    "subjects": [[{"kind": "user", "id": "u1"}], [{"kind": "external", "id": "ext-1"}], []],
}
Schema = dict[str, Any]
QUERY_HINTS: dict[str, Schema] = {
    "limit": {"type": "integer", "minimum": 1, "maximum": 150},
    "version": {"type": "integer", "minimum": 1, "maximum": 3},
    "expectVersion": {"type": "integer", "minimum": 1, "maximum": 3},
    "scope": {"type": "string", "examples": ['{"userId": "u1"}', '{"tenantId": "acme"}', "{}"]},
    "scopeId": {"type": "string", "examples": ["web"]},
    "asOf": {"type": "string", "format": "date-time"},
    "type": {"type": "string", "examples": ["note"]},
}


@dataclass(frozen=True)
class Route:
    """One SDK operation: its method and path, its body's schema, its query parameters' schemas, its answer."""

    name: str
    method: str
    path: str
    body: Schema | None
    query: dict[str, Schema]
    answer: type[pydantic.BaseModel]


def _camel(name: str) -> str:
    """scope_kind → scopeKind."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _model_of(hint: Any) -> type[pydantic.BaseModel] | None:
    """The pydantic model in a `Model | Mapping | None` hint."""
    for arm in typing.get_args(hint) or (hint,):
        if isinstance(arm, type) and issubclass(arm, pydantic.BaseModel):
            return arm
    return None


def _query_schema(name: str, hint: Any) -> Schema:
    """A query parameter's schema from its SDK type (`int | None`, `Literal[...] | None`, ...)."""
    if name in QUERY_HINTS:
        return QUERY_HINTS[name]
    arms = [a for a in typing.get_args(hint) or (hint,) if a is not type(None)]
    literal = [a for a in arms if typing.get_origin(a) is typing.Literal]
    if literal:
        return {"enum": list(typing.get_args(literal[0]))}
    if bool in arms:
        return {"type": "boolean"}
    if int in arms:
        return {"type": "integer"}
    return {"type": "string"}


def _hinted(schema: Any) -> Any:
    """A schema with HINTS as the examples of the string properties they name."""
    if isinstance(schema, list):
        return [_hinted(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _hinted(v) for k, v in schema.items()}
    for name, sub in out.get("properties", {}).items():
        if name in HINTS:
            out["properties"][name] = _with_examples(sub, HINTS[name])
        elif name == "content" and not sub.get("type"):  # `Any` in the SDK: valid as text or an object
            out["properties"][name] = {"anyOf": [
                {"type": "string", "examples": ["tea by the river", "x" * 3000]},
                {"type": "object", "properties": {"text": {"type": "string", "examples": ["tea"]},
                                                  "n": {"type": "integer"}}}]}
    return out


def _with_examples(schema: Schema, examples: list[Any]) -> Schema:
    """A schema (or the arms of an anyOf but null) given the examples its valid values are drawn from."""
    if "anyOf" in schema:
        return {**schema, "anyOf": [s if s.get("type") == "null" else _with_examples(s, examples)
                                    for s in schema["anyOf"]]}
    return {**schema, "examples": examples}


def sdk_routes() -> list[Route]:
    """Every memory operation of the SDK, with its schemas taken from the SDK's own models and signatures."""
    out = []
    for name, op in _resources._OPERATIONS.items():
        if not name.startswith("memory."):
            continue
        method_name = "".join(f"_{c.lower()}" if c.isupper() else c for c in name.split(".")[1])
        fn = getattr(_resources.MemoryResource, method_name)
        hints = typing.get_type_hints(fn)
        body_model = _model_of(hints["body"]) if "body" in hints else None
        skip = {"self", "body", "timeout", "fields", "idempotency_key"}
        path_names = {_camel(p) for p in inspect.signature(fn).parameters if f"{{{_camel(p)}}}" in op.path}
        query = {_camel(p): _query_schema(_camel(p), hints[p]) for p in inspect.signature(fn).parameters
                 if p not in skip and _camel(p) not in path_names}
        body = _hinted(body_model.model_json_schema(by_alias=True)) if body_model is not None else None
        out.append(Route(name, op.method, op.path, body, query, hints["return"]))
    return out


ROUTES = sdk_routes()


@dataclass
class World:
    """The served data directory: tokens, and ids that exist in it."""

    server: Server
    tokens: dict[str, str]
    ids: dict[str, list[str]]
    cursor: str
    http: httpx.Client  # one client for every request: a new one costs ~100 ms (its TLS context)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A server with a few facts of user u1 and one erasure, its per-key limits lifted."""
    with kindgi_server(tmp_path_factory.mktemp("props") / "data", key_limits=UNLIMITED) as server:
        tokens = {"u1": server.token(user="u1", projects=["web"], orgs=["eng"]), "admin": server.token(admin=True)}
        auth = {"Authorization": f"Bearer {tokens['u1']}"}
        facts = []
        for i, scope in enumerate([{"tenantId": "acme", "userId": "u1"}, {"tenantId": "acme", "projectId": "web"}] * 2):
            r = httpx.post(f"{server.url}/v1/memory/facts", headers=auth,
                           json={"type": "note", "scope": scope, "content": f"tea and rivers {i}"})
            assert r.status_code == 201, r.text
            facts.append(r.json()["id"])
        admin = {"Authorization": f"Bearer {tokens['admin']}"}
        erased = httpx.post(f"{server.url}/v1/memory/erasures", headers=admin, json={"factId": facts[-1]})
        assert erased.status_code == 202, erased.text
        cursor = httpx.get(f"{server.url}/v1/memory/facts", headers=auth, params={"limit": 1}).json()["nextCursor"]
        with httpx.Client(timeout=30) as http:
            yield World(server, tokens, {"factId": facts, "erasureId": [erased.json()["id"]]}, cursor, http)


ODD_IDS = ["x", "00000000-0000-0000-0000-000000000000", "%2e%2e", "a" * 300, "%ED%A0%80", "%00", "null", "1"]


@st.composite
def requests(draw: st.DrawFn, route: Route, world: World) -> Call:
    """One request of a route: its path ids real or odd, its query string and body drawn from its schemas."""
    path = route.path
    for name, ids in world.ids.items():
        if f"{{{name}}}" in path:
            path = path.replace(f"{{{name}}}", draw(st.sampled_from(ids) | st.sampled_from(ODD_IDS)))
    params = []
    for name in draw(st.lists(st.sampled_from(sorted(route.query)), unique=True)) if route.query else []:
        drawn = schemagen.query_value(route.query[name])
        if name == "cursor":  # one the list issued, as well as forged ones
            drawn = st.just(world.cursor) | drawn
        params.append((name, draw(drawn, label=name)))
    if route.query and draw(st.integers(0, 6)) == 0:
        params.append(("bogus", "1"))
    body = draw(schemagen.body(route.body)) if route.body is not None else None
    who = draw(st.sampled_from(["u1", "u1", "admin"]))
    headers = [("authorization", f"Bearer {world.tokens[who]}")]
    if body is not None:
        headers.append(("content-type", "application/json"))
    return Call(route.method, path, tuple(params), body, tuple(headers), check=route.name)


def problems(route: Route, call: Call, answer: httpx.Response) -> list[str]:
    """How an answer breaks the face's rules."""
    if answer.status_code >= 500 and not (answer.status_code == 501 and route.name == "memory.replayErasures"):
        return [f"status {answer.status_code}"]
    try:
        body = answer.json()
    except ValueError:
        return ["the answer is not JSON"]
    if answer.status_code >= 400:
        found = kindgi_envelope_errors(call, answer.status_code, body)
        if body.get("error", {}).get("requestId") != answer.headers.get("x-request-id"):
            found.append("X-Request-Id is not the error's requestId")
        return found
    try:
        route.answer.model_validate(body)
    except pydantic.ValidationError as exc:
        return [f"the SDK's {route.answer.__name__} refuses it: {str(exc)[:300]}"]
    facts = body.get("data") or [r.get("fact") for r in body.get("results", [])] or ([body] if "version" in body else [])
    return [p for f in facts if isinstance(f, dict) and "version" in f for p in fact_errors(f)]


def _send(world: World, call: Call) -> httpx.Response:
    """Send a call (its query string built by hand: it may carry bytes no client library would encode)."""
    query = schemagen.query_string(list(call.params))
    url = world.server.url + call.path + (f"?{query}" if query else "")
    return world.http.request(call.method, url, content=call.body, headers=dict(call.headers))


@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_no_request_drawn_from_a_routes_schema_gets_a_5xx_or_leaves_the_envelope_or_the_sdks_model(
        world: World, route: Route) -> None:
    schemagen.check_drawn(lambda data: data.draw(requests(route, world), label="request"),
                          lambda call: _send(world, call), lambda call, answer: problems(route, call, answer),
                          EXAMPLES)


def test_every_memory_route_of_the_app_has_a_generator(world: World) -> None:
    served = {(m, r.path) for r in world.server.app.routes
              if getattr(r, "path", "").startswith("/v1/memory") for m in (r.methods or ())}
    drawn = {(r.method, r.path) for r in ROUTES}
    assert served and served <= drawn, f"routes with no generator: {sorted(served - drawn)}"


def test_the_generators_reach_the_handlers_and_their_boundaries(world: World) -> None:
    """The drawn values are not all refused at the door: valid bodies of each kind are taken."""
    write = next(r for r in ROUTES if r.name == "memory.writeFact")
    assert write.body is not None and "observedAt" in write.body["properties"]
    body = {"type": "note", "scope": {"tenantId": "acme", "userId": "u1"}, "content": {"k": [1, 2**63 - 1]},
            "observedAt": schemagen.TIMES_IN_RANGE[0], "validUntil": schemagen.TIMES_IN_RANGE[1]}
    call = Call("POST", write.path, (), json.dumps(body).encode(),
                (("authorization", f"Bearer {world.tokens['u1']}"), ("content-type", "application/json")))
    answer = _send(world, call)
    assert answer.status_code == 201 and not problems(write, call, answer), answer.text
    assert _models.Fact.model_validate(answer.json()).observed_at is not None


# A valid body of each route with a body, whose every property the sweep sets to each of its boundaries.
BASES: dict[str, dict[str, Any]] = {
    "memory.writeFact": {"type": "note", "scope": {"tenantId": "acme", "userId": "u1"}, "content": {"text": "tea"},
                         "retention": {"keepDays": 3, "keepUntil": "2999-01-01T00:00:00Z"}, "contentHash": "sha256:0f",
                         "subjects": [{"kind": "user", "id": "u1"}], "validFrom": "2020-01-01T00:00:00Z",
                         "validUntil": "2999-01-01T00:00:00Z", "observedAt": "2024-01-01T00:00:00+02:00"},
    "memory.supersedeFact": {"content": {"text": "tea again"}, "retention": {"keepDays": 3},
                             "subjects": [{"kind": "external", "id": "ext-1"}], "observedAt": "2024-01-01T00:00:00Z"},
    "memory.verifyFact": {},
    "memory.retrieve": {"mode": "keyword", "query": "tea", "type": "note", "scope": {"tenantId": "acme"}, "limit": 5},
    "memory.createErasure": {"conversationId": "conv-1"},
    "memory.resumeErasure": {"force": False},
    "memory.replayErasures": {},
}


@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_every_property_and_query_parameter_at_each_of_its_boundaries_gets_no_5xx(world: World, route: Route) -> None:
    path = route.path
    for name, ids in world.ids.items():
        path = path.replace(f"{{{name}}}", ids[0])
    auth = ("authorization", f"Bearer {world.tokens['admin' if 'rasure' in route.name else 'u1']}")
    calls = [Call(route.method, path, ((name, edge),), None, (auth,), check=route.name)
             for name in route.query for edge in schemagen.QUERY_EDGES]
    if route.body is not None:
        calls += [Call(route.method, path, (), schemagen.encode(body), (auth, ("content-type", "application/json")),
                       check=f"{route.name} {where}") for where, body in schemagen.sweep(route.body, BASES[route.name])]
    assert calls or route.name in ("memory.exportErasures", "memory.listFactRevisions", "memory.getErasure")
    found = []
    for call in calls:
        answer = _send(world, call)
        found += [f"{call} -> {answer.status_code} {answer.text[:200]}: {p}" for p in problems(route, call, answer)]
    assert not found, "\n".join(found[:10])
