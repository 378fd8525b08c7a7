"""Property tests of every v5 route: bodies, forms and query strings drawn from each route's schema.

Each route's request schema below is the v5 API's (../shared/spec/supermemory-v5.md; the server's
closed schemas in supermemory/models.py say the same) in JSON Schema; each answer is checked against
the official `supermemory` SDK's model of the route. Requests are drawn valid, at their boundaries and
wrong (tests/reliability/schemagen.py), and every property of a valid body is swept through its
boundaries, against a real server in this process with its per-key limits lifted. Whatever is sent:
no 5xx, every error one of the spec's two bodies, every 2xx filled as the SDK's model requires.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import strategies as st
from supermemory.content_management.types.post_ns_by_namespace_list_documents_memory_counts_response import (
    PostNsByNamespaceListDocumentsMemoryCountsResponse as MemoryCounts,
)
from supermemory.core.unchecked_base_model import construct_type
from supermemory.types import Document

from engram_index.admission import Admission
from engram_index.embed.hashing import HashingEmbedder
from tests.reliability import schemagen
from tests.reliability.faces_v5 import v5_envelope_errors, v5_output_errors
from tests.reliability.fuzzkit import Call
from tests.supermemory.conftest import Server, add_done, running
from tests.supermemory.test_required_fields import missing

UNLIMITED = Admission(rate=1e9, burst=1e9, concurrent=64, queue_wait_s=30)
EXAMPLES = 15
Schema = dict[str, Any]


def s(lo: int = 0, hi: int | None = None, examples: list[Any] | None = None, **more: Any) -> Schema:
    """A string schema."""
    out: Schema = {"type": "string", "minLength": lo, **more}
    if hi is not None:
        out["maxLength"] = hi
    if examples:
        out["examples"] = examples
    return out


def obj(required: tuple[str, ...] = (), **props: Schema) -> Schema:
    """A closed object schema."""
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


def arr(item: Schema, lo: int = 0, hi: int | None = None) -> Schema:
    """An array schema."""
    return {"type": "array", "items": item, "minItems": lo, **({"maxItems": hi} if hi is not None else {})}


INT = {"type": "integer"}
BOOL = {"type": "boolean"}
DATE = s(1, 64, format="date-time")
META_VALUE = {"anyOf": [s(0, 50, ["blue", "x"]), {"type": "number"}, BOOL, arr(s(0, 20, ["a"]), 0, 3)]}
METADATA = {"type": "object", "properties": {"kind": META_VALUE, "n": META_VALUE, "tags": META_VALUE},
            "examples": [{"kind": "note", "n": 3, "tags": ["a", "b"]}, {}]}
OPERATORS = ["eq", "neq", "gt", "gte", "lt", "lte", "contains", "notContains", "arrayContains", "arrayNotContains"]
PREDICATE = obj(("field", "operator", "value"), field=s(1, 128, ["kind", "n", "tags"]), operator={"enum": OPERATORS},
                value={"anyOf": [s(0, 20, ["note", "a"]), {"type": "number"}, BOOL]}, caseSensitive=BOOL)
FILTER = {"anyOf": [PREDICATE, obj(("operator", "operands"), operator={"enum": ["and", "or"]},
                                   operands=arr(PREDICATE, 1, 200))]}
TASK = {"taskType": {"enum": ["memory", "superrag"]}, "dreaming": {"enum": ["dynamic", "instant"]}}
DOC_FIELDS = {"content": s(1, 2_000_000, ["Alice moved to Lisbon in March.", "x"]), "id": s(1, 255, ["p1", "p2"]),
              "supportingContext": s(0, 1500), "metadata": METADATA, "group": METADATA, "date": DATE}
SLUG = s(1, 64, ["work", "home"])
PAGES = {"page": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
         "limit": {"type": "integer", "minimum": 1, "maximum": 100}}
FILE_FIELDS = {"supportingContext": s(0, 1500), "metadata": s(0, 100, ['{"kind": "note"}', "{", "[]"]),
               "group": s(0, 100, ['{"team": "a"}']), "date": DATE, **TASK,
               "fileType": {"enum": ["text", "pdf", "image", "video", "audio"]}, "mimeType": s(3, 255, ["text/plain"])}


@dataclass(frozen=True)
class Route:
    """One v5 route: its schemas, a valid body, its SDK answer model and the fuzzer's name for it."""

    method: str
    path: str
    check: str
    model: Any = None
    body: Schema | None = None
    base: dict[str, Any] = field(default_factory=dict)
    query: dict[str, Schema] = field(default_factory=dict)
    multipart: bool = False


NS = "/ns/{namespace}"
ROUTES = [
    Route("GET", "/ns", "nslist", query={**PAGES, "q": s(0, 100, ["n"])}),
    Route("GET", "/namespaces", "nslist", query={**PAGES, "q": s(0, 100, ["n"])}),
    Route("GET", "/organization", "org"),
    Route("PATCH", "/organization", "orgpatch", body=obj(("organizationalContext",),
                                                         organizationalContext=s(1, 10000, ["A co-op."])),
          base={"organizationalContext": "A gardening co-op."}),
    Route("POST", "/feedback", "feedback", body=obj(
        ("type", "title", "description"), type={"enum": ["bug", "feature_request", "docs", "other"]},
        title=s(1, 200, ["t"]), description=s(1, 10000, ["d"]), endpoint=s(0, 500), requestId=s(0, 200),
        expected=s(0, 10000), actual=s(0, 10000), client=s(0, 200), contactEmail=s(0, 320)),
          base={"type": "bug", "title": "t", "description": "d"}),
    Route("POST", f"{NS}/document/batch", "batch", body=obj(("documents",), documents=arr(
        obj(("content",), **DOC_FIELDS), 1, 600), **TASK),
          base={"documents": [{"content": "Bob likes tea.", "id": "b1", "metadata": {"n": 1}, "date": "2024-01-01"}]}),
    Route("POST", f"{NS}/document/file", "upload", body=obj(("file",), **FILE_FIELDS), multipart=True),
    Route("POST", f"{NS}/document/file/{{id}}", "replace", body=obj(("file",), **FILE_FIELDS), multipart=True),
    Route("PATCH", f"{NS}/document/file/{{id}}", "patchfile", body=obj((), **FILE_FIELDS), multipart=True),
    Route("GET", f"{NS}/document/{{id}}", "document", Document,
          query={"include": {"enum": ["chunks", "memories", "chunks,memories"]}}),
    Route("PATCH", f"{NS}/document/{{id}}", "patch", body=obj((), **{k: v for k, v in DOC_FIELDS.items() if k != "id"},
                                                              **TASK), base={"metadata": {"n": 2}, "date": "2024-01-01"}),
    Route("POST", f"{NS}/document", "add", body=obj(("content",), **DOC_FIELDS, **TASK),
          base={"content": "Carol rides a green bike.", "metadata": {"kind": "note"}, "date": "2024-01-01T00:00:00Z"}),
    Route("DELETE", f"{NS}/document", "delete", body=obj(("ids",), ids=arr(s(1, 255, ["nope"]), 1, 100)),
          base={"ids": ["nope"]}),
    Route("POST", f"{NS}/search", "search", body=obj(
        ("query",), query=s(1, 10000, ["bike", "Lisbon"]), searchMode={"enum": ["hybrid", "memories", "chunks"]},
        limit={"type": "integer", "minimum": 1, "maximum": 100}, threshold={"type": "number", "minimum": 0, "maximum": 1},
        rerank={"enum": ["none", "order", "aggregate"]}, rewriteQuery=BOOL, filter=FILTER,
        include=obj((), documents=BOOL, related=BOOL, forgotten=BOOL)),
          base={"query": "bike", "limit": 5, "threshold": 0, "filter": {"field": "kind", "operator": "eq", "value": "note"},
                "include": {"documents": True}}),
    Route("GET", f"{NS}/profile/buckets", "buckets"),
    Route("PUT", f"{NS}/profile/buckets", "buckets", body=obj(("buckets",), buckets={
        "type": "object", "properties": {"work": s(0, 2000), "home": s(0, 2000)}, "examples": [{"work": "Jobs."}]}),
          base={"buckets": {"work": "Jobs and colleagues."}}),
    Route("DELETE", f"{NS}/profile/buckets", "buckets", body=obj(("buckets",), buckets=arr(SLUG, 1, 50)),
          base={"buckets": ["home"]}),
    Route("POST", f"{NS}/profile", "profile", body=obj((), filter=FILTER, buckets=arr(SLUG, 0, 50)),
          base={"filter": {"field": "kind", "operator": "eq", "value": "note"}}),
    Route("POST", f"{NS}/list/documents/memory-counts", "counts", MemoryCounts,
          body=obj(("ids",), ids=arr(s(1, 255, ["p1"]), 1, 100)), base={"ids": ["p1"]}),
    Route("POST", f"{NS}/list/{{type}}", "list", body=obj((), filter=FILTER, include=obj(
        (), forgotten=BOOL, content=BOOL, memoryCount=BOOL)),
          base={"filter": {"operator": "and", "operands": [{"field": "n", "operator": "gte", "value": 1}]}},
          query={**PAGES, "sort": {"enum": ["createdAt", "updatedAt", "position"]}, "order": {"enum": ["asc", "desc"]}}),
    Route("DELETE", f"{NS}/memories/semantic", "forgetsemantic", body=obj(("query", "dryRun"), query=s(1, 2000, ["bike"]),
                                                                       dryRun=BOOL), base={"query": "bike", "dryRun": True}),
    Route("GET", f"{NS}/memories/{{id}}", "memory", query={
        "include": {"enum": ["related", "documents", "related,documents"]}, "relatedLimit": PAGES["limit"]}),
    Route("DELETE", f"{NS}/memories", "forget", body=obj(("ids",), ids=arr(s(1, 255, ["nope"]), 1, 500)),
          base={"ids": ["nope"]}),
    Route("GET", NS, "namespace"),
    Route("PATCH", NS, "nspatch", body=obj(("supportingContext",), supportingContext=s(0, 1500, ["Notes."])),
          base={"supportingContext": "Notes of a team."}),
    Route("DELETE", NS, "nsdelete", query={"moveTo": s(1, 100, ["n9"])}),
]


@dataclass
class World:
    """The served data: the key, ids that exist, one HTTP client."""

    server: Server
    http: httpx.Client
    ids: dict[str, list[str]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A server with processed documents in namespace n1 (and n2 to delete), its per-key limits lifted."""
    with running(tmp_path_factory.mktemp("props"), HashingEmbedder(64), key_limits=UNLIMITED) as server:
        client = server.client()
        for i, text in enumerate(["Alice moved to Lisbon in March.", "My bike is green and I ride it to work."]):
            add_done(client, "n1", text, id=f"p{i + 1}", metadata={"kind": "note", "n": i, "tags": ["a"]})
        add_done(client, "n2", "A namespace to delete.", id="q1")
        auth = {"Authorization": f"Bearer {server.key}"}
        listed = httpx.post(f"{server.url}/ns/n1/list/memories", headers=auth).json()
        memories = [m["id"] for m in listed.get("memories", listed.get("items", []))] or ["m-none"]
        with httpx.Client(timeout=60) as http:
            yield World(server, http, {"namespace": ["n1", "n2", "n1"], "id": ["p1", "p2"], "type": [
                "memories", "documents", "chunks"], "memory": memories})


ODD = ["nope", "a" * 300, "%2e%2e", "%ED%A0%80", "%00", "x y", "é"]


def _path(draw: st.DrawFn | None, route: Route, world: World) -> str:
    """The route's path with its parameters: real values (the first ones when there is no draw), or odd ones."""
    path = route.path
    for name in ("namespace", "id", "type"):
        if f"{{{name}}}" in path:
            real = world.ids["memory"] if name == "id" and "/memories/" in path else world.ids[name]
            if route.check == "nsdelete":  # deleting the namespace the other routes read would starve them
                real = ["n2", "n3"]
            path = path.replace(f"{{{name}}}", real[0] if draw is None else draw(st.sampled_from(real) | st.sampled_from(ODD)))
    return path


def _multipart(fields: dict[str, Any], file: bool) -> tuple[bytes, str]:
    """A multipart form's bytes and content type (a lone surrogate goes as the bytes a broken client sends)."""
    boundary = "engram-property-boundary"
    parts = []
    for name, v in fields.items():
        if name == "file":
            continue
        text = v if isinstance(v, str) else schemagen.encode(v).decode()
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode(
            "utf-8", "backslashreplace") + text.encode("utf-8", "surrogatepass") + b"\r\n")
    if file:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="notes.txt"\r\n'
                     "Content-Type: text/plain\r\n\r\nDana grows basil.\r\n".encode())
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def _call(route: Route, path: str, params: tuple[tuple[str, str], ...], value: Any, world: World,
          where: str = "") -> Call:
    """A call of the route carrying a body value (a form for the multipart routes)."""
    headers: list[tuple[str, str]] = [("authorization", f"Bearer {world.server.key}")]
    raw: bytes | None = None
    if route.multipart and isinstance(value, dict):
        raw, content_type = _multipart(value, "file" in value or route.check != "patchfile")
        headers.append(("content-type", content_type))
    elif value is not None:
        raw = value if isinstance(value, bytes) else schemagen.encode(value)
        headers.append(("content-type", "application/json"))
    return Call(route.method, path, params, raw, tuple(headers), check=route.check + where)


@st.composite
def requests(draw: st.DrawFn, route: Route, world: World) -> Call:
    """One request of a route: path, query string and body drawn from its schemas."""
    path = _path(draw, route, world)
    params = tuple((n, draw(schemagen.query_value(route.query[n]), label=n))
                   for n in draw(st.lists(st.sampled_from(sorted(route.query)), unique=True))) if route.query else ()
    value: Any = None
    if route.body is not None:
        value = draw(schemagen.value(route.body)) if route.multipart else draw(schemagen.body(route.body))
    return _call(route, path, params, value, world)


def problems(route: Route, call: Call, answer: httpx.Response) -> list[str]:
    """How an answer breaks the face's rules."""
    if answer.status_code >= 500:
        return [f"status {answer.status_code}"]
    try:
        body = answer.json()
    except ValueError:
        return ["the answer is not JSON"]
    named = Call(call.method, call.path, call.params, call.body, call.headers, check=route.check)
    if answer.status_code >= 400:
        return v5_envelope_errors(named, answer.status_code, body)
    if route.model is not None:
        return [f"missing {p}" for p in missing(construct_type(type_=route.model, object_=body))]
    return v5_output_errors(named, body)


def _send(world: World, call: Call) -> httpx.Response:
    """Send a call, its query string built by hand (it may carry bytes no client library would encode)."""
    query = schemagen.query_string(list(call.params))
    url = world.server.url + call.path + (f"?{query}" if query else "")
    return world.http.request(call.method, url, content=call.body, headers=dict(call.headers))


IDS = [f"{r.method} {r.path}" for r in ROUTES]


@pytest.mark.parametrize("route", ROUTES, ids=IDS)
def test_no_request_drawn_from_a_routes_schema_gets_a_5xx_or_leaves_the_error_bodies_or_the_sdks_model(
        world: World, route: Route) -> None:
    schemagen.check_drawn(lambda data: data.draw(requests(route, world), label="request"),
                          lambda call: _send(world, call), lambda call, answer: problems(route, call, answer),
                          EXAMPLES)


@pytest.mark.parametrize("route", ROUTES, ids=IDS)
def test_every_property_and_query_parameter_at_each_of_its_boundaries_gets_no_5xx(world: World, route: Route) -> None:
    path = _path(None, route, world)
    calls = [_call(route, path, ((name, edge),), None, world) for name in route.query for edge in schemagen.QUERY_EDGES]
    if route.body is not None:
        base = route.base or {"file": True, "date": "2024-01-01"}
        calls += [_call(route, path, (), body, world, f" {where}") for where, body in schemagen.sweep(route.body, base)]
    found = []
    for call in calls:
        answer = _send(world, call)
        found += [f"{call} -> {answer.status_code} {answer.text[:200]}: {p}" for p in problems(route, call, answer)]
    assert not found, "\n".join(found[:10])


def test_every_v5_route_of_the_app_has_a_generator(world: World) -> None:
    prefixes = ("/ns", "/namespaces", "/organization", "/feedback")
    served = {(m, r.path) for r in world.server.app.routes
              if getattr(r, "path", "").startswith(prefixes) for m in (r.methods or ())}
    drawn = {(r.method, r.path) for r in ROUTES}
    assert served and served <= drawn, f"routes with no generator: {sorted(served - drawn)}"
