"""Isolation over Kindgi tenants and scopes as a property: no token ever learns of a fact it may not see.

Random facts across two tenants, each in a random scope (tenant-wide, a user's, an org's, a
project's, or several at once) and each holding a secret word of its own; hypothesis draws tokens
with random grants (user, orgs, projects, admin, tenant) and read calls (retrieve in every mode,
list with and without filters, get, revisions) naming any fact. Every fact an answer holds is one
the token may see; no answer or error message holds the secret or the id of one it may not (unless
the caller sent it); unfiltered lists and retrieves are exactly the visible set; a hidden fact is
404 exactly like a missing one. Bounded: ISOLATION_EXAMPLES calls (default 300).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kindgi.server import Server, kindgi_server

EXAMPLES = int(os.environ.get("ISOLATION_EXAMPLES", "300"))
TENANTS = ["acme", "globex"]
USERS = ["alice", "bob", "carol"]
ORGS = ["eng", "ops"]
PROJECTS = ["web", "mobile", "data"]
VOCAB = ["tea", "river", "stone", "cloud", "ember", "maple"]
MISSING = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class Fact:
    id: str
    tenant: str
    scope: dict[str, str]
    secret: str


@dataclass(frozen=True)
class Grants:
    tenant: str
    user: str | None
    orgs: frozenset[str]
    projects: frozenset[str]
    admin: bool


def may_see(g: Grants, f: Fact) -> bool:
    """The visibility rule of the spec: same tenant, and admin or every container the scope names held."""
    if g.tenant != f.tenant:
        return False
    if g.admin:
        return True
    s = f.scope
    return (s.get("userId") in (None, g.user) and ("orgId" not in s or s["orgId"] in g.orgs)
            and ("projectId" not in s or s["projectId"] in g.projects))


def random_scope(rng: random.Random, tenant: str) -> dict[str, str]:
    """A scope naming none, one or several containers."""
    scope = {"tenantId": tenant}
    for key, values in (("userId", USERS), ("orgId", ORGS), ("projectId", PROJECTS)):
        if rng.random() < 0.4:
            scope[key] = rng.choice(values)
    return scope


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, list[Fact]]]:
    rng = random.Random(int(os.environ.get("ISOLATION_SEED", "18")))
    with kindgi_server(tmp_path_factory.mktemp("kiso") / "data") as server:
        admins = {t: server.token(t, admin=True) for t in TENANTS}
        facts = []
        for n in range(60):
            tenant = rng.choice(TENANTS)
            scope = random_scope(rng, tenant)
            secret = f"secret{n}word"
            r = httpx.post(f"{server.url}/v1/memory/facts", headers={"Authorization": f"Bearer {admins[tenant]}"},
                           json={"type": rng.choice(["note", "preference"]), "scope": scope,
                                 "content": f"{' '.join(rng.sample(VOCAB, 3))} {secret}"})
            assert r.status_code == 201, r.text
            facts.append(Fact(r.json()["id"], tenant, scope, secret))
        yield server, facts


grants = st.builds(Grants, st.sampled_from(TENANTS), st.sampled_from([*USERS, None]),
                   st.frozensets(st.sampled_from(ORGS)), st.frozensets(st.sampled_from(PROJECTS)),
                   st.sampled_from([False] * 5 + [True]))


@st.composite
def calls(draw: st.DrawFn, facts: list[Fact]) -> tuple[Grants, str, str, dict[str, Any], Any]:
    """A token's grants and one read call (method, path, query params, JSON body)."""
    g = draw(grants)
    target = draw(st.sampled_from(facts))
    words = [*VOCAB, *(f.secret for f in facts)]
    kind = draw(st.sampled_from(["retrieve", "retrieve", "list", "get", "get", "revisions"]))
    if kind == "retrieve":
        mode = draw(st.sampled_from(["list", "keyword", "semantic", "both"]))
        body: dict[str, Any] = {"mode": mode, "limit": 100}
        if mode != "list":
            body["query"] = " ".join(draw(st.lists(st.sampled_from(words), min_size=1, max_size=3)))
        if draw(st.integers(0, 3)) == 0:
            body["scope"] = {k: v for k, v in target.scope.items() if k != "tenantId" or draw(st.booleans())}
        return g, "POST", "/v1/memory/retrieve", {}, body
    if kind == "list":
        params: dict[str, Any] = {"limit": "100"}
        if draw(st.integers(0, 3)) == 0:
            params["scope"] = json.dumps({k: v for k, v in target.scope.items() if k != "tenantId"})
        if draw(st.integers(0, 3)) == 0:
            params["scopeKind"], params["scopeId"] = draw(st.sampled_from(
                [("project", p) for p in PROJECTS] + [("org", o) for o in ORGS]))
        return g, "GET", "/v1/memory/facts", params, None
    fid = target.id if draw(st.integers(0, 5)) else MISSING
    return g, "GET", f"/v1/memory/facts/{fid}" + ("/revisions" if kind == "revisions" else ""), {}, None


def fact_ids(body: Any) -> list[str]:
    """The ids of every fact an answer holds (retrieve results, list pages, one fact)."""
    if not isinstance(body, dict):
        return []
    if "results" in body:
        return [r["fact"]["id"] for r in body["results"]]
    if "data" in body:
        return [f["id"] for f in body["data"]]
    return [body["id"]] if "id" in body else []


def test_no_kindgi_answer_reveals_a_fact_the_token_may_not_see(world: tuple[Server, list[Fact]]) -> None:
    server, facts = world
    by_id = {f.id: f for f in facts}
    tokens: dict[Grants, str] = {}
    client = httpx.Client(timeout=30)
    tried: set[str] = set()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(calls(facts))
    def run(call: tuple[Grants, str, str, dict[str, Any], Any]) -> None:
        g, method, path, params, body = call
        if g not in tokens:
            tokens[g] = server.token(g.tenant, user=g.user, orgs=sorted(g.orgs), projects=sorted(g.projects),
                                     admin=g.admin)
        r = client.request(method, server.url + path, params=params, json=body,
                           headers={"Authorization": f"Bearer {tokens[g]}"})
        assert r.status_code < 500, r.text
        kind = "retrieve" if path.endswith("retrieve") else "list" if path.endswith("facts") else \
            "revisions" if path.endswith("revisions") else "get"
        tried.add(f"{kind}:{r.status_code}")
        visible = {f.id for f in facts if may_see(g, f)}
        text = r.text
        for value in [*params.values(), *json.dumps(body).split('"'), path.split("/")[4] if kind in ("get", "revisions") else ""]:
            if value:
                text = text.replace(value, "")  # what the caller sent may be echoed; it reveals nothing new
        for f in facts:
            if f.id not in visible:
                assert f.secret not in text, f"{f.secret} of {f.scope} leaked to {g} by {kind}"
                assert f.id not in text, f"{f.id} of {f.scope} leaked to {g} by {kind}"
        if kind in ("get", "revisions"):
            fid = path.split("/")[4]
            if fid not in visible:
                assert r.status_code == 404, r.text
                err = r.json()["error"]
                assert (err["code"], err["message"].replace(fid, "ID"), err.get("details")) == \
                    ("fact-not-found", 'No fact with id "ID"', {"factId": fid})
                tried.add(f"{kind}:hidden" if fid in by_id else f"{kind}:missing")
            else:
                assert r.status_code == 200, r.text
        if r.status_code != 200:
            return
        ids = fact_ids(r.json())
        assert set(ids) <= visible, f"{set(ids) - visible} shown to {g}"
        unfiltered = kind == "list" and set(params) == {"limit"} or \
            kind == "retrieve" and body["mode"] == "list" and "scope" not in body
        if unfiltered:
            assert sorted(ids) == sorted(visible), f"{kind} for {g} is not exactly the visible facts"
            tried.add(f"{kind}:exact")

    try:
        run()
    finally:
        client.close()
    print(f"\nkindgi isolation: {len(tokens)} tokens, cases {sorted(tried)}")  # shown with pytest -s
    assert {"retrieve:200", "list:200", "get:200", "get:hidden", "get:missing", "revisions:hidden",
            "list:exact", "retrieve:exact"} <= tried, tried
