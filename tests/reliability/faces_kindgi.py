"""The Kindgi face for the reliability suite: served facts in two tenants, calls from its request schemas.

Calls are the memory routes (`/v1/memory/...`) with bodies shaped by the Kindgi request models,
valid and not: retrieve intents (modes, limits, scopes of the caller's and another tenant, types,
unknown fields, nulls, wrong types), fact writes, gets and lists with odd ids and cursors,
supersede/verify/delete with `expectVersion`, an Idempotency-Key reused with other bodies, bad
JSON and wrong methods. Every error must be `{"error": {code, message, details?, requestId}}`
with `X-Request-Id` equal to its `requestId`; every fact in a 2xx answer must have an id, a type,
`scope.tenantId`, a version of 1 or more, a `createdAt` with a zone, and no null field.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from hypothesis import strategies as st

from engram_index.keys import KeyStore
from engram_index.testkit.serve import free_port

from .fuzzkit import Call, Face, Served, serve_command, shared_envelope, stop, wait_up

PREFIX = "/v1/memory"
TENANTS = ("acme", "globex")
PROJECTS = ("web", "mobile", "data")
ORGS = ("eng", "ops")
# Grants of the minted tokens: (name, tenant, user, orgs, projects, admin).
GRANTS = (
    ("alice", "acme", "alice", ("eng",), ("web", "mobile"), False),
    ("bob", "acme", "bob", (), ("data",), False),
    ("admin", "acme", None, (), (), True),
    ("gina", "globex", "gina", ("ops",), ("web",), False),
)
CODES = frozenset({
    "bad-input", "unknown-field", "validation-failed", "scope-mismatch", "scope-invalid", "auth-missing",
    "auth-expired", "auth-revoked", "permission-denied", "fact-not-found", "not-found", "method-not-allowed",
    "fact-changed", "legal-hold", "idempotency-key-body-mismatch", "idempotency-key-in-flight",
    "idempotency-key-replay-withheld", "request-too-large", "semantic-unavailable", "rate-limit-exceeded",
    "memory-operation-unsupported", "service-unavailable",
})
_ZONED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


def mint(data: Path) -> dict[str, str]:
    """One token per GRANTS row, minted as `engram-index keys create kindgi` mints them."""
    keys = KeyStore(data)
    tokens = {}
    for name, tenant, user, orgs, projects, admin in GRANTS:
        grants = {"tenant": tenant, "user": user, "orgs": sorted(orgs), "projects": sorted(projects), "admin": admin}
        tokens[name], _ = keys.create("kindgi", grants)
    return tokens


def seed_facts(url: str, tokens: dict[str, str]) -> list[str]:
    """Facts in both tenants, in several projects, orgs and for users; their ids."""
    ids = []
    plan = [("alice", {"tenantId": "acme", "projectId": "web"}), ("alice", {"tenantId": "acme", "userId": "alice"}),
            ("alice", {"tenantId": "acme", "orgId": "eng"}), ("bob", {"tenantId": "acme", "projectId": "data"}),
            ("admin", {"tenantId": "acme"}), ("gina", {"tenantId": "globex", "projectId": "web"}),
            ("gina", {"tenantId": "globex", "userId": "gina"})]
    for i in range(24):
        who, scope = plan[i % len(plan)]
        r = httpx.post(f"{url}{PREFIX}/facts", headers={"Authorization": f"Bearer {tokens[who]}"},
                       json={"type": ["note", "preference", "decision"][i % 3], "scope": scope,
                             "content": f"fact {i} about tea and {['rivers', 'stones', 'clouds'][i % 3]}"})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    return ids


SRC = str(Path(__file__).resolve().parents[2] / "src")


def _serve(data: Path, port: int) -> subprocess.Popen[bytes]:
    """`engram-index serve` on a loopback port (no embedder: semantic retrieval is 422)."""
    return subprocess.Popen(
        serve_command("--data", str(data), "--port", str(port),
                      "--insecure-open", "--embedder", "none", "--no-access-log"),
        env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)



@contextmanager
def serve_kindgi(data: Path) -> Iterator[Served]:
    """A data directory with minted tokens and facts in two tenants, served by `engram-index serve`."""
    data.mkdir(parents=True, exist_ok=True)
    tokens = mint(data)
    port = free_port()
    proc = _serve(data, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc)
        served = Served(url, proc.pid, facts={"tokens": tokens})
        for fact_id in seed_facts(url, tokens):
            served.pool.add("fact", fact_id)
        yield served
    finally:
        stop(proc)


# -- calls ----------------------------------------------------------------------------------

_JUNK: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=20),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.sampled_from(["", " ", "\x00", "\ud800", "a" * 5000, "1e309", "NaN"]))


def _maybe(valid: st.SearchStrategy[Any], clean: bool) -> st.SearchStrategy[Any]:
    """A valid value when `clean`, else sometimes junk."""
    return valid if clean else st.one_of(valid, valid, _JUNK)


def _scope(clean: bool, partial: bool = False) -> st.SearchStrategy[Any]:
    """A scope object: the caller's tenant or another, with containers."""
    tenant = st.sampled_from(TENANTS + ("acme", "nobody"))
    scope = st.fixed_dictionaries(
        {} if partial else {"tenantId": _maybe(tenant, clean)},
        optional={**({"tenantId": _maybe(tenant, clean)} if partial else {}),
                  "projectId": _maybe(st.sampled_from(PROJECTS), clean),
                  "orgId": _maybe(st.sampled_from(ORGS), clean),
                  "userId": _maybe(st.sampled_from(["alice", "bob", "gina", "zed"]), clean)})
    return _maybe(scope, clean)


def _extra(clean: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Unknown fields (and nulls) a broken body adds."""
    if clean:
        return st.just({})
    return st.dictionaries(st.sampled_from(["bogus", "id", "version", "tenantId", "Mode", ""]), _JUNK, max_size=2)


def _retrieve(clean: bool) -> st.SearchStrategy[dict[str, Any]]:
    """A retrieve intent (seed 004)."""
    return st.fixed_dictionaries(
        {"mode": _maybe(st.sampled_from(["list", "keyword", "both", "semantic"]), clean)},
        optional={"query": _maybe(st.sampled_from(["tea", "rivers", "fact 3", "zzz", ""]) | st.text(max_size=30), clean),
                  "type": _maybe(st.sampled_from(["note", "preference", "x"]), clean),
                  "scope": _scope(clean, partial=True),
                  "limit": _maybe(st.integers(-2, 150), clean) | st.sampled_from([1.5, 0.2, 1e300]),
                  "embeddingModel": _maybe(st.sampled_from(["m", "other"]), clean)})


def _write(clean: bool) -> st.SearchStrategy[dict[str, Any]]:
    """A fact write."""
    return st.fixed_dictionaries(
        {"type": _maybe(st.sampled_from(["note", "preference"]), clean), "scope": _scope(clean),
         "content": st.text(max_size=40) | _JUNK},
        optional={"review": _maybe(st.just("pending"), clean),
                  "subjects": _maybe(st.just([{"kind": "user", "id": "alice"}]), clean),
                  "validFrom": _maybe(st.sampled_from(["2024-01-01T00:00:00Z", "2024-01-01"]), clean)})


@st.composite
def _fact_id(draw: st.DrawFn, served: Served) -> str:
    """A fact id: one seen, or an odd one."""
    seen = served.pool.pick("fact", draw(st.integers(0, 10**6)))
    odd = st.sampled_from(["00000000-0000-0000-0000-000000000000", "x", "%00", "..", "a" * 300, "\u202e", "%ff",
                           "null", "1"])
    return draw(st.just(seen) if seen and draw(st.integers(0, 3)) else odd)


@st.composite
def kindgi_call(draw: st.DrawFn, served: Served) -> Call:
    """One memory-route request, valid or broken somewhere."""
    clean = draw(st.booleans())
    tokens = served.facts["tokens"]
    who = draw(st.sampled_from(sorted(tokens)))
    auth = draw(st.sampled_from(["ok"] * 8 + ["none", "junk"])) if not clean else "ok"
    headers: list[tuple[str, str]] = []
    if auth == "ok":
        headers.append(("authorization", f"Bearer {tokens[who]}"))
    elif auth == "junk":
        headers.append(("authorization", draw(st.sampled_from(["Bearer x", "Basic abc", "Bearer kg_1_2"]))))
    if draw(st.integers(0, 4)) == 0:
        headers.append(("idempotency-key", draw(st.sampled_from(["k1", "k2", "k3"]))))
    if draw(st.integers(0, 6)) == 0:
        headers.append(("x-request-id", draw(st.sampled_from(["trace-1", "bad id", "x" * 200]))))
    fid = draw(_fact_id(served))
    kind = draw(st.sampled_from(["retrieve", "retrieve", "write", "get", "list", "list", "revisions",
                                 "supersede", "verify", "delete", "erasures", "stray"]))
    method, path, params, body = "GET", f"{PREFIX}/facts", [], None
    if kind == "retrieve":
        method, path, body = "POST", f"{PREFIX}/retrieve", {**draw(_retrieve(clean)), **draw(_extra(clean))}
    elif kind == "write":
        method, body = "POST", {**draw(_write(clean)), **draw(_extra(clean))}
    elif kind == "get":
        path = f"{PREFIX}/facts/{fid}"
        params += draw(st.sampled_from([[], [("version", "1")], [("version", draw(st.text(max_size=5)))],
                                        [("asOf", "2030-01-01T00:00:00Z")], [("asOf", "yesterday")]]))
    elif kind == "list":
        cursor = served.pool.pick("cursor", draw(st.integers(0, 100)))
        options = {"limit": _maybe(st.integers(-1, 200).map(str), clean),
                   "cursor": (st.just(cursor) if cursor else st.nothing()) | _maybe(st.sampled_from(
                       ["", "abc", "WzEsIlx1ZDgwMCJd", "W1tbW1tbW1tbW10=", "eyJ4IjoxfQ"]), clean),
                   "type": _maybe(st.sampled_from(["note", "decision"]), clean),
                   "scopeKind": _maybe(st.sampled_from(["tenant", "org", "project", "user"]), clean),
                   "scopeId": _maybe(st.sampled_from(PROJECTS + ORGS), clean),
                   "inherit": st.sampled_from(["true", "false", "1"]),
                   "scope": _scope(clean, partial=True).map(json.dumps) | st.sampled_from(["{", "[]", "null"]),
                   "asOf": _maybe(st.sampled_from(["2030-01-01T00:00:00Z", "2020-01-01T00:00:00+02:00"]), clean)}
        for name in draw(st.lists(st.sampled_from(sorted(options)), max_size=4, unique=True)):
            params.append((name, str(draw(options[name]))))
    elif kind == "revisions":
        path = f"{PREFIX}/facts/{fid}/revisions"
    elif kind in ("supersede", "verify"):
        method, path = "POST", f"{PREFIX}/facts/{fid}/{kind}"
        body = st.fixed_dictionaries({}, optional={"expectVersion": _maybe(st.integers(0, 5), clean)})
        body = {**draw(body), **draw(_extra(clean))}
        if kind == "supersede" and draw(st.integers(0, 5)):
            body["content"] = draw(st.text(max_size=20))
    elif kind == "delete":
        method, path = "DELETE", f"{PREFIX}/facts/{fid}"
        if draw(st.booleans()):
            params.append(("expectVersion", draw(_maybe(st.integers(0, 5).map(str), clean))))
    elif kind == "erasures":
        path = f"{PREFIX}/erasures" + draw(st.sampled_from(["", "/export", "/nope"]))
    else:
        path = draw(st.sampled_from([f"{PREFIX}/", f"{PREFIX}/nothing", f"{PREFIX}/facts/{fid}/x"]))
    raw = None if body is None else json.dumps(body).encode()
    if not clean and draw(st.integers(0, 7)) == 0:
        raw = draw(st.sampled_from([b"{", b"[]", b"null", b"\xff\xfe", b'{"mode": "list",}', b"1e999"]))
        method = "POST" if method == "GET" else method
    if not clean and draw(st.integers(0, 9)) == 0:
        method = draw(st.sampled_from(["PUT", "PATCH", "TRACE", "DELETE", "GET"]))
    if raw is not None:
        headers.append(("content-type", "application/json"))
    # A lone surrogate cannot go on the wire in a query string: send its escaped form.
    sendable = tuple((k, str(v).encode("utf-8", "backslashreplace").decode()) for k, v in params)
    return Call(method, path, sendable, raw, tuple(headers), check=kind)


def kindgi_calls(served: Served) -> st.SearchStrategy[Call]:
    """The strategy of Kindgi calls."""
    return kindgi_call(served)


# -- checks ---------------------------------------------------------------------------------


def kindgi_envelope_errors(call: Call, status: int, body: Any) -> list[str]:
    """How an error body breaks the Kindgi envelope."""
    if call.check == "raw" and not call.path.startswith(PREFIX):
        # A malformed head whose target cannot be read, or is no memory path, gets the shared envelope;
        # one with a readable /v1/memory target must get Kindgi's (call.path is that target).
        return [] if shared_envelope(body) else [f"not the shared envelope: {str(body)[:100]}"]
    if not isinstance(body, dict) or set(body) != {"error"} or not isinstance(body["error"], dict):
        return [f"not a Kindgi error envelope: {str(body)[:100]}"]
    inner = body["error"]
    problems = []
    if set(inner) - {"code", "message", "details", "requestId"} or not {"code", "message", "requestId"} <= set(inner):
        problems.append(f"envelope fields {sorted(inner)}")
    if not isinstance(inner.get("code"), str) or not isinstance(inner.get("message"), str):
        problems.append("code or message is not a string")
    elif call.path.startswith(PREFIX) and inner["code"] not in CODES:
        problems.append(f"unknown code {inner['code']!r}")
    if "details" in inner and not isinstance(inner["details"], dict):
        problems.append("details is not an object")
    if not isinstance(inner.get("requestId"), str) or not inner["requestId"]:
        problems.append("requestId is not a non-empty string")
    return problems


def fact_errors(fact: Any) -> list[str]:
    """How one fact in an answer breaks the fact schema."""
    if not isinstance(fact, dict):
        return [f"fact is not an object: {str(fact)[:80]}"]
    problems = []
    for name in ("id", "type"):
        if not isinstance(fact.get(name), str) or not fact[name]:
            problems.append(f"fact {name} missing")
    scope = fact.get("scope")
    if not isinstance(scope, dict) or not isinstance(scope.get("tenantId"), str):
        problems.append("fact scope.tenantId missing")
    elif any(v is None for v in scope.values()):
        problems.append("null in fact scope")
    version = fact.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        problems.append(f"fact version {version!r}")
    if not isinstance(fact.get("createdAt"), str) or not _ZONED.fullmatch(fact["createdAt"]):
        problems.append(f"fact createdAt {fact.get('createdAt')!r} has no zone")
    nulls = sorted(k for k, v in fact.items() if v is None)
    if nulls:
        problems.append(f"null fields {nulls}")
    return problems


def route(call: Call) -> str:
    """Which route a call reached, from its method and path (a call's method may have been broken)."""
    parts = call.path[len(PREFIX):].strip("/").split("/")
    if parts == ["retrieve"] and call.method == "POST":
        return "retrieve"
    if parts[0] != "facts":
        return "other"
    if len(parts) == 1:
        return {"GET": "list", "POST": "write"}.get(call.method, "other")
    if len(parts) == 2:
        return {"GET": "get", "DELETE": "delete"}.get(call.method, "other")
    if parts[2] == "revisions" and call.method == "GET":
        return "revisions"
    return parts[2] if parts[2] in ("supersede", "verify") and call.method == "POST" else "other"


def kindgi_output_errors(call: Call, body: Any) -> list[str]:
    """How a 2xx body breaks its route's answer: every fact in it well formed."""
    if not isinstance(body, dict):
        return ["answer is not an object"]
    kind = route(call)
    if kind == "retrieve":
        results = body.get("results")
        if not isinstance(results, list):
            return ["retrieve has no results list"]
        return [p for r in results for p in (fact_errors(r.get("fact")) if isinstance(r, dict) else ["result"])]
    if kind in ("list", "revisions"):
        data = body.get("data")
        if not isinstance(data, list):
            return ["page has no data list"]
        problems = [p for f in data for p in fact_errors(f)]
        if kind == "list" and body.get("hasMore") is not (isinstance(body.get("nextCursor"), str)):
            problems.append("hasMore disagrees with nextCursor")
        return problems
    if kind in ("write", "get", "supersede", "verify", "delete"):
        return fact_errors(body)
    return []


def kindgi_remember(served: Served, call: Call, body: Any) -> None:
    """Keep fact ids and cursors from answers, so that later calls follow them."""
    if not isinstance(body, dict):
        return
    if isinstance(body.get("nextCursor"), str):
        served.pool.add("cursor", body["nextCursor"])
    if isinstance(body.get("id"), str):
        served.pool.add("fact", body["id"])


KINDGI = Face(
    name="kindgi",
    serve=serve_kindgi,
    calls=kindgi_calls,
    envelope_errors=kindgi_envelope_errors,
    output_errors=kindgi_output_errors,
    remember=kindgi_remember,
    paths=(f"{PREFIX}/facts", f"{PREFIX}/retrieve", f"{PREFIX}/facts/x", "/xrpc/_health"),
    temporary=frozenset({503}),
    request_id_header="X-Request-Id",
)
