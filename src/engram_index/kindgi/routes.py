"""The memory routes (`/v1/memory/...`, as the official SDK's `client.memory` calls them).

`endpoint` is the one place that runs a route: request id, read-only refusal, token, the token's
admission (`--key-rate`: 429 rate-limit-exceeded), body within its limit, Idempotency-Key, the
handler in a worker thread, and every error as the envelope.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engram_index.admission import Admission
from engram_index.search_pool import SearchTimedOut, on_loop
from engram_index import endpoints
from engram_index.endpoints import Endpoint, in_thread
from engram_index.kindgi import models
from engram_index.kindgi.auth import Principal, authenticate
from engram_index.kindgi.errors import KindgiError, unsupported
from engram_index.kindgi.face import KindgiFace
from engram_index.kindgi.facts import DEFAULT_PAGE, MAX_PAGE, decode_cursor
from engram_index.kindgi.idempotency import HEADER, METHODS, REPLAY_HEADER, Claim, Replay
from engram_index.kindgi.scope import check_tenant, parse_scope
from engram_index.kindgi.wire import (
    ANSWERS, MAX_DEPTH, error_response, json_response, nesting, parse_object, read_body, request_id,
)

# The opt-in for "why it matched" on retrieve results (a header: request bodies are closed models).
EXPLAIN_HEADER = "X-Kindgi-Explain"


@dataclass
class Call:
    """One request as a handler sees it."""

    request: Request
    face: KindgiFace
    principal: Principal
    body: bytes
    claim: Claim | None
    started: Any = None  # what the route's `prepare` began on the event loop (retrieve: its embedding)

    def seal(self, status: int, payload: dict[str, Any]) -> list[Any]:
        """The statements that keep this answer for the request's Idempotency-Key."""
        assert self.face.idempotency is not None
        return self.face.idempotency.seal(self.claim, status, payload)

    def names(self, tenant: str, fact_ids: list[str]) -> None:
        """Say which facts the answer holds: kept behind it, the answer is withheld if one is erased first."""
        if self.claim is not None:
            self.claim.facts = (tenant, tuple(fact_ids))

    def param(self, name: str) -> str:
        """A path parameter."""
        return str(self.request.path_params[name])

    def query(self, name: str) -> str | None:
        """A query parameter (an empty one counts as absent)."""
        value = self.request.query_params.get(name)
        return value if value else None


Handler = Callable[[Call], tuple[int, dict[str, Any]]]
Prepare = Callable[[Call], None]
Runner = Callable[[Call], Awaitable[tuple[int, dict[str, Any]]]]


async def on_worker(handler: Handler, call: Call) -> tuple[int, dict[str, Any]]:
    """A handler on a worker thread (every route's, but a started retrieve's: `run_retrieve`)."""
    return await in_thread(handler, call)


def endpoint(handler: Handler, *, changes: bool = True, prepare: Prepare | None = None,
             run: Runner | None = None) -> Endpoint:
    """A route: everything but the handler's own work, done the same way for each.

    A route that `changes` nothing (retrieve) keeps its idempotent answer behind the response.
    `prepare`, when given, runs on the event loop before the Idempotency-Key is looked up and the
    handler's hop to a worker thread: cheap checks that start work which then overlaps both (retrieve's
    query embedding); what it raises is answered after the key's checks, as the handler's errors are.
    `run`, when given, runs the handler instead of a worker thread (retrieve: on its own threads).
    """

    async def work(request: Request) -> Response:
        """Answer one request."""
        rid = request_id(request)
        face: KindgiFace = request.app.state.kindgi
        claim: Claim | None = None
        try:
            if face.read_only:
                raise unsupported("changes or reads in a read-only worker (serve it with one process)")
            principal = authenticate(request, face.keys)
            # The caller's admission before its body is read or parsed: a refusal costs little, and a
            # 429 always means nothing ran (the SDK retries a POST on it with the same key).
            admission: Admission = request.app.state.key_limits
            async with admission.admit(principal.key_id):
                body = await read_body(request)
                call = Call(request, face, principal, body, None)
                # Before any fact is read (prepare may start reading): see Idempotency.keep_behind.
                scrubs = face.idempotency.scrubs if face.idempotency is not None else 0
                refused: Exception | None = None
                if prepare is not None:
                    try:
                        prepare(call)
                    except Exception as exc:  # answered once the key is known not to replay an answer
                        refused = exc
                key = request.headers.get(HEADER)
                if key and request.method in METHODS:
                    assert face.idempotency is not None
                    scoped = face.idempotency.scoped(principal.tenant, principal.ref, request.method,
                                                     request.url.path, key)
                    started = face.idempotency.begin(scoped, body, scrubs)
                    if isinstance(started, Replay):
                        return Response(started.body, started.status, {"X-Request-Id": rid, REPLAY_HEADER: "true",
                                                                        "Content-Type": started.content_type})
                    claim = call.claim = started
                if refused is not None:
                    raise refused
                status, payload = await (run or partial(on_worker, handler))(call)
                if claim is not None and claim.answer is not None:
                    answer = claim.answer[1]
                else:
                    answer = orjson.dumps(payload)
                if claim is not None and not changes:
                    assert face.idempotency is not None
                    face.idempotency.keep_behind(claim, status, answer)
                elif claim is not None:
                    assert face.idempotency is not None
                    await in_thread(face.idempotency.keep, claim, status, answer)
                return json_response(status, answer, rid)
        finally:
            if claim is not None and face.idempotency is not None:
                face.idempotency.release(claim)

    return endpoints.endpoint(ANSWERS, work)


def _facts(call: Call) -> Any:
    """The face's facts (absent only in a read-only worker, refused before this)."""
    assert call.face.facts is not None
    return call.face.facts


# -- facts --------------------------------------------------------------------------------------


def write_fact(call: Call) -> tuple[int, dict[str, Any]]:
    """POST /v1/memory/facts: a new fact, 201."""
    body = models.write_body(parse_object(call.body))
    check_tenant(body.scope, call.principal)
    return 201, _facts(call).write(call.principal, body, call.seal)


def get_fact(call: Call) -> tuple[int, dict[str, Any]]:
    """GET /v1/memory/facts/{factId}: current, `?version` or `?asOf`."""
    version = models.parse_version(call.query("version"), "version", query=True)
    as_of = models.parse_time(call.query("asOf"), "asOf", query=True)
    return 200, _facts(call).current(call.principal, call.param("factId"), version=version, as_of=as_of)


def _limit(call: Call) -> int:
    """`?limit`: default 25, more than 100 is 100 (as the reference clamps it); not a whole number ≥ 1: 400."""
    return models.parse_limit(call.query("limit"), DEFAULT_PAGE, MAX_PAGE)


def _cursor(call: Call) -> str | None:
    """`?cursor`, checked to be one a list issued before any query runs (400 naming it otherwise)."""
    raw = call.query("cursor")
    if raw is not None:
        decode_cursor(raw)
    return raw


def _platform(call: Call) -> tuple[str, list[Any]]:
    """The SQL of `?scopeKind` + `?scopeId` (+ `?inherit`): facts of one tenant, org or project."""
    kind, ident = call.query("scopeKind"), models.parse_text(call.query("scopeId"), "scopeId")
    inherit = models.parse_flag(call.query("inherit"), "inherit")
    if kind is None:
        if ident is not None:
            raise KindgiError("scope-invalid", "`scopeId` needs `scopeKind`")
        return "TRUE", []
    if kind == "tenant":
        return ("TRUE" if inherit else "(org_id IS NULL AND project_id IS NULL)"), []
    if kind not in ("org", "project") or ident is None:
        raise KindgiError("scope-invalid", "`scopeKind` is tenant, org or project; org and project need `scopeId`")
    column = "org_id" if kind == "org" else "project_id"
    if not inherit:
        return f"{column} = ?", [ident]
    wider = "(org_id IS NULL AND project_id IS NULL)" if kind == "org" else "project_id IS NULL"
    return f"({column} = ? OR {wider})", [ident]


def list_facts(call: Call) -> tuple[int, dict[str, Any]]:
    """GET /v1/memory/facts: a page of the facts the caller may see."""
    scope = None
    raw = call.query("scope")
    if raw is not None:
        try:
            loaded = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise KindgiError("bad-input", "Query parameter `scope` must be a JSON object",
                              {"parameter": "scope"}) from None
        if nesting(loaded) > MAX_DEPTH:  # as a body: its values are written back by orjson (255 levels at most)
            raise KindgiError("bad-input", f"Query parameter `scope` nests more than {MAX_DEPTH} levels",
                              {"parameter": "scope", "maxDepth": MAX_DEPTH})
        scope = parse_scope(loaded, partial=True)
        check_tenant(scope, call.principal)
    data, cursor = _facts(call).page(
        call.principal, limit=_limit(call), cursor=_cursor(call), type_=models.parse_text(call.query("type"), "type"),
        scope=scope, platform=_platform(call), as_of=models.parse_time(call.query("asOf"), "asOf", query=True))
    page: dict[str, Any] = {"data": data, "hasMore": cursor is not None}
    if cursor is not None:
        page["nextCursor"] = cursor
    return 200, page


def list_revisions(call: Call) -> tuple[int, dict[str, Any]]:
    """GET /v1/memory/facts/{factId}/revisions: newest first."""
    return 200, {"data": _facts(call).revisions(call.principal, call.param("factId"))}


def supersede_fact(call: Call) -> tuple[int, dict[str, Any]]:
    """POST /v1/memory/facts/{factId}/supersede: the next content."""
    body = models.supersede_body(parse_object(call.body))
    return 200, _facts(call).supersede(call.principal, call.param("factId"), body, call.seal)


def verify_fact(call: Call) -> tuple[int, dict[str, Any]]:
    """POST /v1/memory/facts/{factId}/verify: the next revision, verified."""
    expect = models.verify_body(parse_object(call.body, empty_is_object=True))
    return 200, _facts(call).verify(call.principal, call.param("factId"), expect, call.seal)


def delete_fact(call: Call) -> tuple[int, dict[str, Any]]:
    """DELETE /v1/memory/facts/{factId}: the tombstoned revision."""
    expect = models.parse_version(call.query("expectVersion"), "expectVersion", query=True)
    return 200, _facts(call).delete(call.principal, call.param("factId"), expect, call.seal)


# -- retrieve -----------------------------------------------------------------------------------


# A retrieve body up to this size is checked on the event loop (`start_retrieve`); a larger one (a
# legitimate one is a few KB: `query` is at most 4,000 characters) is parsed on the worker thread.
PREPARE_MAX_BYTES = 64 * 1024


def _start_retrieve(call: Call, pooled: bool = False) -> None:
    """A retrieve's body checked and its searches' start (`Retriever.start`: the query's embedding)."""
    intent = models.retrieve_intent(parse_object(call.body))
    check_tenant(intent.scope, call.principal)
    assert call.face.retriever is not None
    explain = call.request.headers.get(EXPLAIN_HEADER, "").lower() in ("1", "true", "yes")
    call.started = call.face.retriever.start(call.principal, intent, explain, pooled=pooled)


def start_retrieve(call: Call) -> None:
    """On the event loop: a small retrieve's checks, and its query's embedding set going before the
    Idempotency-Key's lookup and the hop to a search thread (the embedding is the longest step of
    `both`: all else overlaps it)."""
    # A tenant's first retrieve in this process declares its collection's model (a write, or a whole
    # re-embedding when the deployment's model changed): never on the event loop, but on the worker.
    # Over a shared PostgreSQL store every collection read is a round trip that an outage can hold
    # for seconds: the event loop never waits on one, so such a retrieve starts on the worker too.
    facts = call.face.facts
    if (len(call.body) <= PREPARE_MAX_BYTES and facts is not None and facts.collections.shared_store() is None
            and facts.declared(call.principal.tenant)):
        _start_retrieve(call, pooled=True)


def retrieve(call: Call) -> tuple[int, dict[str, Any]]:
    """POST /v1/memory/retrieve: seed 004 (on a worker thread: a retrieve not started on the event loop,
    or one in list mode or of a tenant without facts)."""
    if call.started is None:
        _start_retrieve(call)
    assert call.face.retriever is not None
    out = call.face.retriever.finish(call.principal, call.started)
    call.names(call.principal.tenant, [str(r["fact"]["id"]) for r in out["results"]])
    return 200, out


def _expire(answer: asyncio.Future[dict[str, Any]], seconds: float) -> None:
    """The retrieve's deadline: its request stops waiting (its legs run on)."""
    if not answer.done():
        answer.set_exception(SearchTimedOut(f"the retrieve did not finish within {seconds:g} s"))


async def run_retrieve(call: Call) -> tuple[int, dict[str, Any]]:
    """A retrieve started on the event loop with its legs on their own threads (`Started.join`): its keyword
    leg on the search pool (a slot, the pool's deadline), its semantic leg already on the embedding
    thread, the answer formed by the last of them to finish; any other on a worker thread."""
    started, face = call.started, call.face
    if started is None or started.join is None:
        return await on_worker(retrieve, call)
    assert face.retriever is not None and face.facts is not None
    searches = face.facts.collections.searches
    limit = time.monotonic() + searches.deadline_s
    done = started.join.done
    if started.intent.mode != "semantic":
        await searches.run(face.retriever.keyword_part, started)
    if not done.done():
        loop = asyncio.get_running_loop()
        answer = on_loop(done, loop)
        timer = loop.call_later(max(limit - time.monotonic(), 0.0), _expire, answer, searches.deadline_s)
        try:
            out = await answer
        finally:
            timer.cancel()
    else:
        out = done.result()
    call.names(call.principal.tenant, [str(r["fact"]["id"]) for r in out["results"]])
    return 200, out


# -- erasures -----------------------------------------------------------------------------------


def _erasures(call: Call) -> Any:
    """The face's erasures (absent only in a read-only worker, refused before this)."""
    assert call.face.erasures is not None
    return call.face.erasures


def create_erasure(call: Call) -> tuple[int, dict[str, Any]]:
    """POST /v1/memory/erasures: started, 202."""
    selector = models.erasure_selector(parse_object(call.body))
    return 202, _erasures(call).create(call.principal, selector, call.seal)


def list_erasures(call: Call) -> tuple[int, dict[str, Any]]:
    """GET /v1/memory/erasures: newest first, in pages."""
    data, cursor = _erasures(call).page(call.principal, _limit(call), _cursor(call))
    page: dict[str, Any] = {"data": data, "hasMore": cursor is not None}
    if cursor is not None:
        page["nextCursor"] = cursor
    return 200, page


def get_erasure(call: Call) -> tuple[int, dict[str, Any]]:
    """GET /v1/memory/erasures/{erasureId}: one, and how far it got."""
    return 200, _erasures(call).get(call.principal, call.param("erasureId"))


def export_erasures(call: Call) -> tuple[int, dict[str, Any]]:
    """GET /v1/memory/erasures/export: the ledger, oldest first."""
    return 200, {"data": _erasures(call).ledger(call.principal)}


def replay_erasures(call: Call) -> tuple[int, dict[str, Any]]:
    """POST /v1/memory/erasures/replay: not offered without a ledger key (501)."""
    raise unsupported("replaying erasures (no erasure ledger key is kept, so no erased person can be found again)")


def resume_erasure(call: Call) -> tuple[int, dict[str, Any]]:
    """POST /v1/memory/erasures/{erasureId}/resume: run an unfinished one again."""
    models.resume_body(parse_object(call.body, empty_is_object=True))
    return 200, _erasures(call).resume(call.principal, call.param("erasureId"), call.seal)


PREFIX = "/v1/memory"


def _route(path: str, run: Callable[[Request], Awaitable[Response]], method: str) -> Route:
    """One route taking exactly its method: HEAD (which Starlette adds beside GET) is no memory route's, so
    it is answered 405 with Allow where the path has a route, never run as a GET."""
    route = Route(path, run, methods=[method])
    assert route.methods is not None
    route.methods.discard("HEAD")
    return route


def routes() -> list[Route]:
    """Every memory route (the literal erasure paths before the one with an id)."""
    e = endpoint
    return [
        _route(f"{PREFIX}/facts", e(list_facts), "GET"),
        _route(f"{PREFIX}/facts", e(write_fact), "POST"),
        _route(f"{PREFIX}/facts/{{factId}}", e(get_fact), "GET"),
        _route(f"{PREFIX}/facts/{{factId}}", e(delete_fact), "DELETE"),
        _route(f"{PREFIX}/facts/{{factId}}/revisions", e(list_revisions), "GET"),
        _route(f"{PREFIX}/facts/{{factId}}/supersede", e(supersede_fact), "POST"),
        _route(f"{PREFIX}/facts/{{factId}}/verify", e(verify_fact), "POST"),
        _route(f"{PREFIX}/retrieve", e(retrieve, changes=False, prepare=start_retrieve, run=run_retrieve), "POST"),
        _route(f"{PREFIX}/erasures", e(list_erasures), "GET"),
        _route(f"{PREFIX}/erasures", e(create_erasure), "POST"),
        _route(f"{PREFIX}/erasures/export", e(export_erasures), "GET"),
        _route(f"{PREFIX}/erasures/replay", e(replay_erasures), "POST"),
        _route(f"{PREFIX}/erasures/{{erasureId}}", e(get_erasure), "GET"),
        _route(f"{PREFIX}/erasures/{{erasureId}}/resume", e(resume_erasure), "POST"),
    ]


def not_found(request: Request, status: int) -> Response:
    """A 404 or 405 on a memory path, in the Kindgi envelope."""
    rid = request_id(request)
    if status == 405:
        err = KindgiError("method-not-allowed", f"{request.method} is not allowed on {request.url.path}")
    else:
        err = KindgiError("not-found", f"No route {request.url.path}")
    return error_response(err, rid)
