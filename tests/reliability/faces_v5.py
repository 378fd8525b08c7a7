"""The supermemory v5 face for the reliability suite: served with a minted key, calls from its closed schemas.

`serve_v5` mints a key with `engram-index keys create supermemory`, serves the data directory with
`engram-index serve` and adds a few documents to two namespaces (waiting until they are processed).
The calls are search bodies valid and not (modes, limits, thresholds, filters of every shape,
include flags, nulls, unknown keys, wrong types), list bodies and query strings, document gets and
deletes with odd ids, bad JSON, wrong methods and keys; and (faces_v5_writes.py) document adds,
batches, patches, file uploads and replacements with odd content types, profiles, buckets, memory
gets, forgetting by id and by description (dry run or not) and namespace PATCH/DELETE, stateful
through the pool; and (faces_v5_org.py) namespace lists, the organization and feedback, under the
admin key and one scoped to a namespace. Every error must be one of the spec's two bodies with a
status the spec gives its route; every 2xx must carry every field the official SDK's models mark required.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from hypothesis import strategies as st
from supermemory.core.unchecked_base_model import construct_type
from supermemory.types import DeleteDocumentsResult, ListResponse, SearchResponse

from engram_index.testkit.serve import free_port
from tests.supermemory.test_required_fields import missing

from .faces_v5_org import MODELS as ORG_MODELS, SCOPED_NAMESPACE, org_call, org_output_errors
from .faces_v5_org import STATUSES as ORG_STATUSES
from .faces_v5_writes import MODELS as WRITE_MODELS, STATUSES as WRITE_STATUSES, remember_write, write_call
from .fuzzkit import Call, Face, Served, serve_command, shared_envelope, stop, wait_up

SRC = str(Path(__file__).resolve().parents[2] / "src")
NAMESPACES = ("fuzz_a", "fuzz_b")
TEXTS = ("My bike is green and I ride it to work.", "The garden has tomatoes, basil and a pear tree.",
         "Alice moved to Lisbon in March; she works on compilers.", "Quartz clocks drift a few seconds a month.")
HEALTH = "/xrpc/_health"
V5_PREFIXES = ("/ns", "/namespaces", "/organization", "/feedback")
STATUSES: dict[str, frozenset[int]] = {**WRITE_STATUSES, **ORG_STATUSES}  # by call.check: what the spec allows


def _cli(*args: str) -> str:
    """Run `engram-index ARGS` as an operator would; its standard output."""
    return subprocess.run([sys.executable, "-m", "engram_index.cli", *args], env={**os.environ, "PYTHONPATH": SRC},
                          check=True, capture_output=True, text=True).stdout



def add_documents(url: str, key: str, docs: list[tuple[str, str, str, dict[str, Any]]], timeout: float = 60) -> None:
    """Add (namespace, id, text, metadata) documents over HTTP and wait until each is done."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        for ns, doc_id, text, metadata in docs:
            r = client.post(f"/ns/{ns}/document", json={"content": text, "id": doc_id, "metadata": metadata})
            assert r.status_code == 200, r.text
        deadline = time.monotonic() + timeout
        for ns, doc_id, _, _ in docs:
            while (status := client.get(f"/ns/{ns}/document/{doc_id}").json()["system"]["status"]) not in ("done",
                                                                                                        "failed"):
                assert time.monotonic() < deadline, f"{doc_id} stuck in {status}"
                time.sleep(0.05)
            assert status == "done", doc_id


@contextmanager
def serve_v5(data: Path) -> Iterator[Served]:
    """A data directory with a minted key, served, with a few processed documents in two namespaces."""
    key = _cli("keys", "create", "supermemory", "--data", str(data)).split()[-1]
    scoped = _cli("keys", "create", "supermemory", "--data", str(data), "--namespace", SCOPED_NAMESPACE).split()[-1]
    port = free_port()
    proc = subprocess.Popen(
        serve_command("--data", str(data), "--port", str(port),
                      "--insecure-open", "--embedder", "hashing:64", "--no-access-log",
                      # The fuzzer is not testing admission (the load paths do), and its one key would
                      # pass 50 a second on a quiet machine: v5's spec gives no route a 429.
                      "--key-rate", "1000000", "--key-burst", "1000000", "--key-concurrent", "256"),
        env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc)
        docs = [(ns, f"d{i}", text, {"n": i, "kind": "note" if i % 2 else "fact", "tags": ["x", f"t{i}"]})
                for ns in NAMESPACES for i, text in enumerate(TEXTS)]
        add_documents(url, key, docs)
        served = Served(url, proc.pid, facts={"key": key, "scoped": scoped})
        for ns, doc_id, _, _ in docs:
            served.pool.add(f"doc:{ns}", doc_id)
        yield served
    finally:
        stop(proc)


# -- calls from the request schemas ---------------------------------------------------------

_ODD = st.sampled_from(["", " ", "\x00", "%00", "..", "../x", "a" * 300, "\ud7ff", "\U0010ffff", "\u202e",
                        "null", "[]", "d0?x=1", "d0#f", "%2F", "é"]) | st.text(max_size=20)
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
                     max_leaves=8)
_FIELDS = st.sampled_from(["n", "kind", "tags", "a.b", "", "bad field", "x" * 200, "é"])
_OPS = st.sampled_from(["eq", "neq", "gt", "gte", "lt", "lte", "contains", "notContains", "arrayContains",
                        "arrayNotContains", "EQ", "like", ""])
_VALUES = st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=False) | st.sampled_from(
    ["note", "fact", "x", "", "1"]) | st.lists(st.text(max_size=3), max_size=2)


def _predicate() -> st.SearchStrategy[Any]:
    """A filter predicate, well formed or not (extra keys, legacy keys, wrong types)."""
    base = st.fixed_dictionaries({"field": _FIELDS, "operator": _OPS, "value": _VALUES},
                                 optional={"caseSensitive": st.booleans() | st.just("yes")})
    legacy = st.fixed_dictionaries({"key": _FIELDS, "value": _VALUES},
                                   optional={"filterType": st.just("metadata"), "negate": st.booleans()})
    extra = st.builds(lambda p, k: {**p, k: 1}, base, st.sampled_from(["extra", "ignoreCase", "numericOperator"]))
    return base | base | legacy | extra


_FILTERS: st.SearchStrategy[Any] = st.recursive(
    _predicate(),
    lambda kids: st.builds(lambda op, items: {"operator": op, "operands": items},
                           st.sampled_from(["and", "or", "AND", "not"]), st.lists(kids, max_size=3))
    | st.builds(lambda items: {"AND": items}, st.lists(kids, max_size=2)),
    max_leaves=8) | _JSON


_GOOD_PREDICATES = st.sampled_from([
    {"field": "kind", "operator": "eq", "value": "note"}, {"field": "kind", "operator": "neq", "value": "NOTE",
                                                          "caseSensitive": False},
    {"field": "n", "operator": "gte", "value": 1}, {"field": "n", "operator": "lt", "value": 2.5},
    {"field": "tags", "operator": "arrayContains", "value": "x"}, {"field": "kind", "operator": "contains", "value": "o"},
    {"field": "missing", "operator": "notContains", "value": "z"}, {"field": "n", "operator": "eq", "value": True}])
_GOOD_FILTERS: st.SearchStrategy[Any] = st.recursive(
    _GOOD_PREDICATES, lambda kids: st.builds(lambda op, items: {"operator": op, "operands": items},
                                             st.sampled_from(["and", "or"]), st.lists(kids, min_size=1, max_size=3)),
    max_leaves=6)


def _clean_search_body() -> st.SearchStrategy[dict[str, Any]]:
    """A search body the schema accepts, so that calls reach the search itself."""
    return st.fixed_dictionaries({"query": st.sampled_from(["bike", "garden tomatoes", "Lisbon", "quartz", "work"])}, optional={
        "searchMode": st.sampled_from(["hybrid", "memories", "chunks"]), "limit": st.integers(1, 100),
        "threshold": st.floats(0, 1), "rerank": st.just("none"), "filter": _GOOD_FILTERS,
        "include": st.fixed_dictionaries({}, optional={k: st.booleans() for k in ("documents", "related", "forgotten")})})


def _maybe(valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly valid values, sometimes invalid ones, sometimes null."""
    return st.one_of(valid, valid, valid, invalid, st.none())


def _search_body() -> st.SearchStrategy[Any]:
    """A search body per the closed schema, with each field sometimes wrong."""
    fields = {
        "searchMode": _maybe(st.sampled_from(["hybrid", "memories", "chunks"]),
                             st.sampled_from(["documents", "HYBRID", "", 1])),
        "limit": _maybe(st.integers(1, 100), st.sampled_from([0, 101, -1, 1.5, "5", True, 10**20])),
        "threshold": _maybe(st.floats(0, 1), st.sampled_from([-0.1, 1.01, "0.5", float("inf"), True])),
        "rerank": _maybe(st.sampled_from(["none"]), st.sampled_from([True, "order2", ""])),
        "rewriteQuery": _maybe(st.just(False), st.sampled_from(["true", 1])),
        "filter": _FILTERS,
        "include": _maybe(st.fixed_dictionaries({}, optional={k: st.booleans() for k in
                                                              ("documents", "related", "forgotten")}),
                          st.sampled_from([{"chunks": True}, {"documents": "yes"}, [], "documents",
                                           {"relatedMemories": True}])),
    }
    query = _maybe(st.sampled_from(["bike", "garden tomatoes", "Lisbon", "quartz"]) | st.text(min_size=1, max_size=30),
                   st.sampled_from(["", 1, ["bike"], "a" * 10001]))
    body = st.fixed_dictionaries({"query": query}, optional=fields)
    unknown = st.builds(lambda b, k: {**b, k: 1}, body, st.sampled_from(["q", "containerTag", "docId", "zzz", ""]))
    clean = _clean_search_body()
    return st.one_of(clean, clean, clean, body, body, unknown, st.builds(lambda b: {k: v for k, v in b.items() if k != "query"}, body))


def _encode(draw: st.DrawFn, body: Any) -> bytes:
    """The body as JSON, or now and then as bytes that are not JSON (or not an object)."""
    pick = draw(st.integers(0, 19))
    if pick == 0:
        return draw(st.sampled_from([b"{", b"", b"\xff\xfe", b'{"a":' * 300, b"[1]", b"null", b'"x"', b"1e999"]))
    if pick == 1:
        return draw(st.binary(max_size=40))
    return json.dumps(body).encode()


def _headers(draw: st.DrawFn, served: Served) -> tuple[tuple[str, str], ...]:
    """Mostly the minted key, sometimes none, a wrong one or an odd content type."""
    auth = draw(st.sampled_from([f"Bearer {served.facts['key']}"] * 8 + ["", "Bearer nope", "Basic x"]))
    out = [("authorization", auth)] if auth else []
    if draw(st.integers(0, 9)) == 0:
        out.append(("content-type", draw(st.sampled_from(["text/plain", "application/x-www-form-urlencoded", "x"]))))
    return tuple(out)


def _namespace(draw: st.DrawFn) -> str:
    """A namespace of the served data, an empty one, or a name the path pattern refuses."""
    return draw(st.sampled_from([*NAMESPACES, *NAMESPACES, "fuzz_empty", "bad%20name", "a" * 101, "x.y"]))


@st.composite
def v5_calls(draw: st.DrawFn, served: Served) -> Call:
    """One v5 request: a search, a list, a document get or delete, or a wrong method on one of them."""
    ns = _namespace(draw)
    headers = _headers(draw, served)
    kind = draw(st.sampled_from(["search"] * 5 + ["list"] * 2 + ["get", "get", "delete", "method"] + ["write"] * 8
                                + ["org"] * 3))
    if kind == "write":
        return write_call(draw, served, ns, headers, _encode)
    if kind == "org":
        return org_call(draw, served, _encode)
    if kind == "search":
        return Call("POST", f"/ns/{ns}/search", (), _encode(draw, draw(_search_body())), headers, check="search")
    if kind == "list":
        body = st.fixed_dictionaries({}, optional={"filter": _GOOD_FILTERS | _FILTERS, "include": _maybe(
            st.fixed_dictionaries({}, optional={"forgotten": st.booleans(), "content": st.booleans(),
                                                "memoryCount": st.booleans()}), _JSON)}) | _JSON
        params = draw(st.fixed_dictionaries({}, optional={
            "page": st.sampled_from(["1", "2", "0", "-1", "x", " 1", "1000001"]),
            "limit": st.sampled_from(["1", "10", "100", "101", "0", "+5", "1_0"]),
            "sort": st.sampled_from(["createdAt", "updatedAt", "position", "bogus"]),
            "order": st.sampled_from(["asc", "desc", "up"]), "zzz": st.just("1")}))
        kind_of = draw(st.sampled_from(["documents", "chunks", "memories", "bogus", ""]))
        raw = b"" if draw(st.integers(0, 4)) == 0 else _encode(draw, draw(body))
        return Call("POST", f"/ns/{ns}/list/{kind_of}", tuple(params.items()), raw or None, headers, check="list")
    doc_id = draw(st.sampled_from([served.pool.pick(f"doc:{ns}", draw(st.integers(0, 9))) or "d0"]) | _ODD)
    if kind == "get":
        include = draw(st.lists(st.sampled_from(["chunks", "memories", "bogus", ""]), max_size=2))
        params = tuple(("include", i) for i in include)
        return Call("GET", f"/ns/{ns}/document/{_quote(doc_id)}", params, None, headers, check="document")
    if kind == "delete":
        ids = draw(st.lists(st.sampled_from(["nope", "d9"]) | _ODD, max_size=3)
                   | st.sampled_from([[""], ["a" * 256], [1], "d0"]) | st.lists(st.just("x"), min_size=101, max_size=101))
        return Call("DELETE", f"/ns/{ns}/document", (), _encode(draw, {"ids": ids}), headers, check="delete")
    method = draw(st.sampled_from(["PUT", "GET", "OPTIONS", "TRACE", "PATCH", "DELETE"]))
    path = draw(st.sampled_from([f"/ns/{ns}/search", f"/ns/{ns}/list/documents", f"/ns/{ns}/nothing", "/ns", "/"]))
    return Call(method, path, (), None, headers, check="method")


def _quote(value: str) -> str:
    """A path segment as a client would send it (httpx would otherwise reinterpret ? and #)."""
    from urllib.parse import quote

    return quote(value.encode("utf-8", "surrogatepass"), safe="")


# -- checks ---------------------------------------------------------------------------------


def v5_path(target: str) -> bool:
    """Whether a path or request target is under one of v5's prefixes (`/ns` itself or `/ns/…`, not `/nsx`)."""
    path = target.split("?", 1)[0]
    return any(path == p or path.startswith(p + "/") for p in V5_PREFIXES)


def v5_envelope_errors(call: Call, status: int, body: Any) -> list[str]:
    """How an error body breaks both of the spec's shapes: ErrorResponse or ValidationErrorResponse."""
    if not v5_path(call.path):
        # Paths of no face (/, the health probe) and malformed heads whose target cannot be read get
        # the shared envelope; a readable v5 target (call.path, for raw heads) must get v5's.
        return [] if shared_envelope(body) else [f"not the shared envelope: {str(body)[:100]}"]
    if not isinstance(body, dict):
        return [f"not an object: {str(body)[:80]}"]
    allowed = STATUSES.get(call.check)
    if allowed is not None and status not in allowed | {405, 413, 503}:
        return [f"status {status} is not one the spec gives {call.check}"]
    if body.get("success") is False:
        if set(body) - {"success", "error", "data"} or not isinstance(body.get("error"), list):
            return [f"not a ValidationErrorResponse: {str(body)[:100]}"]
        if status != 400:
            return [f"ValidationErrorResponse on a {status}"]
        for item in body["error"]:
            if not isinstance(item, dict) or not isinstance(item.get("message"), str) or set(item) - {"message", "path"}:
                return [f"bad validation item {str(item)[:80]}"]
            if "path" in item and not (isinstance(item["path"], list) and all(
                    isinstance(p, (str, int)) and not isinstance(p, bool) for p in item["path"])):
                return [f"bad validation path {item['path']!r}"]
        return []
    if set(body) - {"error", "details"} or not isinstance(body.get("error"), str):
        return [f"not an ErrorResponse: {str(body)[:100]}"]
    if not isinstance(body.get("details", ""), str):
        return ["details is not a string"]
    return []


_MODELS: dict[str, Any] = {"search": SearchResponse, "list": ListResponse, "delete": DeleteDocumentsResult,
                           **WRITE_MODELS, **ORG_MODELS}


def v5_output_errors(call: Call, body: Any) -> list[str]:
    """The fields the SDK's model of a 200 marks required that are absent (searches, lists, deletes)."""
    model = _MODELS.get(call.check)
    if model is None:
        return []
    if not isinstance(body, dict):
        return [f"a {call.check} answer is not an object"]
    problems = [f"missing {p}" for p in missing(construct_type(type_=model, object_=body))]
    problems += org_output_errors(call, body) if call.check in ORG_MODELS else []
    if call.check == "search":
        if not isinstance(body.get("results"), list) or not isinstance(body.get("searchTime"), (int, float)):
            problems.append("results or searchTime has the wrong type")
        for result in body.get("results") or []:
            sim = result.get("similarity") if isinstance(result, dict) else None
            if not isinstance(sim, (int, float)) or not 0 <= sim <= 1:
                problems.append(f"similarity {sim!r} is not in 0..1")
            elif isinstance(result, dict) and ("memory" in result) == ("chunk" in result):
                problems.append("a result is neither (or both) a memory and a chunk")
    return problems


def v5_remember(served: Served, call: Call, body: Any) -> None:
    """Keep the ids writes, lists and searches answer, for the reads and forgetting after them."""
    remember_write(served, call, body)


V5 = Face(
    name="v5",
    serve=serve_v5,
    calls=v5_calls,
    envelope_errors=v5_envelope_errors,
    output_errors=v5_output_errors,
    remember=v5_remember,
    paths=(f"/ns/{NAMESPACES[0]}/search", f"/ns/{NAMESPACES[0]}/list/documents", f"/ns/{NAMESPACES[0]}/document/d0",
           HEALTH),
    temporary=frozenset({503}),
)
