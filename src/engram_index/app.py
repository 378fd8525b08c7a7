"""The one place that wires storage, engine and API into an ASGI application."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

from engram_index import __version__, metrics
from engram_index.engram.api.graph import get_memory_graph
from engram_index.engram.api.memories import get_memory, list_memories
from engram_index.engram.api.search import search_memories
from engram_index.engram.api.spaces import REGISTER_NSID, WARM_NSID, describe, register_space, warm_space
from engram_index.engram.api.status import get_space_status
from engram_index.embed.base import Embedder
from engram_index.engram.api.embedding import QueryEmbedding
from engram_index.admission import Admission
from engram_index.engram.api.limits import SpaceLimits
from engram_index.engram.api.xrpc import xrpc
from engram_index.endpoints import FaceRoute
from engram_index.envelopes import XRPC as XRPC_ERRORS, face_for
from engram_index.engram.api.notify import DELETED as DELETED_NSID, WRITE as WRITE_NSID, notify_space_deleted, notify_write
from engram_index.engram.api.revocation import NSID as REVOKE_NSID, notify_credential_revoked
from engram_index.engram.auth import Authenticator, InsecureOpen
from engram_index.engram.auth.credentials import SpaceCredentials
from engram_index.engram.auth.service_auth import ServiceAuth
from engram_index.engram.auth.state import AuthState
from engram_index.engram.identity.did import PLC_DEFAULT, DidResolver
from engram_index.engram.records import is_space_uri
from engram_index.collections import Collections
from engram_index.eviction import MAX_LOADED
from engram_index.console.web import web_routes
from engram_index.console.wiring import McpRoute
from engram_index.engram.sync.runner import SyncConfig, SyncRunner
from engram_index.kindgi.face import KindgiFace
from engram_index.kindgi.routes import routes as kindgi_routes
from engram_index.keys import KeyStore
from engram_index.supermemory.face import Face as SupermemoryFace
from engram_index.supermemory.pipeline import Pipeline as SupermemoryPipeline
from engram_index.supermemory.routes import routes as supermemory_routes
from engram_index.llm.base import LLM, Reranker
from engram_index.routing import FaceApp, FaceRouter
from engram_index.search_pool import SEARCH_THREADS, loop_depth_for
from engram_index.settings import ServeSettings

log = logging.getLogger("engram_index")


def did_document(service_did: str, endpoint: str) -> dict[str, Any]:
    """The service's did:web document, naming where it is served (`endpoint`: scheme, host and port)."""
    return {
        "@context": ["https://www.w3.org/ns/did/v1"],
        "id": service_did,
        "service": [
            {"id": "#engram_index", "type": "EngramIndex", "serviceEndpoint": endpoint}
        ],
    }


# Each face's 404, 405 and 500 come from its entry in envelopes.FACES (beside its malformed-HTTP envelope).
xrpc_not_found = XRPC_ERRORS.not_found


def not_found_for(path: str) -> Callable[[Request], Response]:
    """The 404 answer of the face owning `path`."""
    return face_for(path).not_found


def create_app(
    data_dir: Path,
    service_did: str,
    *,
    authenticator: Authenticator,
    limits: SpaceLimits | None = None,
    key_limits: Admission | None = None,
    embedding: QueryEmbedding | None = None,
    read_only: bool = False,
    sync: SyncConfig | None = None,
    search_threads: int = SEARCH_THREADS,
    public_url: str | None = None,
    llm: LLM | None = None,
    reranker: Reranker | None = None,
    store: str | None = None,
    face_embedder: Embedder | None = None,
    allow_private_urls: bool = False,
    max_collections: int = MAX_LOADED,
    processes: int = 1,
) -> Starlette:
    """Build the service for a data directory, checking callers with `authenticator`.

    With `sync`, the configured spaces are kept current from the network in the background and
    the write notifications of space hosts are accepted. Searches run on `search_threads` threads
    of their own: one computes while another waits in tantivy or a vector scan (both release the
    GIL); more threads only contend for the GIL. `llm` and `reranker` (None when not configured)
    are on `app.state` for the faces that use them. `key_limits` admits the requests of each key
    of the v5 and Kindgi faces (a token bucket and slots per key; the default when None). `store`:
    a postgresql:// URL holding the records (None: the data directory's own SQLite store).
    `face_embedder` embeds for the v5 and Kindgi faces (None: the query embedder of `embedding`).
    At most `max_collections` collections stay loaded (the least recently used idle one is closed).
    `processes`: how many processes serve the data directory, this one included (`serve --workers`):
    as many as the cores, and a garden search runs on its request's event loop under load too
    (search_pool.py).
    """

    # The MCP server at /mcp and the web page at / call the faces of this very app (`app`, below).
    mcp = McpRoute(lambda: app, [_host_of(public_url)] if public_url else None)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if isinstance(authenticator, InsecureOpen):
            log.warning("serving WITHOUT authentication (--insecure-open): every caller can query every space")
        app.state.authenticator = authenticator
        app.state.service_did = service_did
        app.state.limits = limits or SpaceLimits()
        app.state.key_limits = key_limits or Admission()
        app.state.embedding = embedding or QueryEmbedding()
        app.state.embedding.embedder = metrics.timed(app.state.embedding.embedder)  # query embeddings timed
        app.state.llm, app.state.reranker = llm, reranker
        app.state.spaces = Collections(data_dir, read_only=read_only, store=store, search_threads=search_threads,
                                       max_loaded=max_collections)
        app.state.spaces.searches.loop_depth = loop_depth_for(processes)
        app.state.spaces.on_searchable = metrics.observe_lag
        app.state.sync = None
        if sync is not None:
            # The HTTP loop gets its own resolver: a resolver's in-flight futures belong to one loop.
            app.state.service_auth = ServiceAuth(service_did, DidResolver(
                sync.plc_url, allow_http_localhost=sync.did_web_http_localhost))
            app.state.sync = SyncRunner(app.state.spaces, sync, service_did)
            app.state.sync.start()
        app.state.face_embedder = face_embedder or app.state.embedding.embedder
        app.state.kindgi = KindgiFace.open(app.state.spaces, app.state.face_embedder)
        # The supermemory v5 face: its tables, and (when this process writes) its processing pipeline,
        # which first queues again every document a previous run acknowledged but did not finish.
        app.state.supermemory = SupermemoryFace(
            app.state.spaces, KeyStore(data_dir, app.state.spaces.shared_store()), app.state.face_embedder, state=app.state,
            read_only=read_only)
        app.state.supermemory_pipeline = None if read_only else SupermemoryPipeline(app.state.supermemory)
        if app.state.supermemory_pipeline is not None:
            app.state.supermemory_pipeline.start()
        # Only the garden.engram spaces: other faces keep collections of their own in the same store.
        for uri in filter(is_space_uri, app.state.spaces.store.collections()):
            try:
                app.state.spaces.index_if_loaded(uri)
            except Exception:
                pass  # loading started in the background
        async with mcp.running():
            yield
        client, app.state.console_client = getattr(app.state, "console_client", None), None
        if client is not None:
            await client.aclose()
        if app.state.sync is not None:
            app.state.sync.stop()
        if app.state.supermemory_pipeline is not None:
            app.state.supermemory_pipeline.stop()
        app.state.supermemory.close()
        app.state.kindgi.close()
        app.state.spaces.close()
        for embedder in {id(e): e for e in (app.state.embedding.embedder, app.state.face_embedder) if e}.values():
            embedder.close()
        for client in (llm, reranker):
            close = getattr(client, "close", None)
            if callable(close):
                close()
        metrics.process_exited()

    async def describe_service(request: Request) -> dict[str, Any]:
        return describe(request)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"version": __version__})

    async def well_known(request: Request) -> JSONResponse:
        # Where this request reached us (http for a plain server), unless the operator named a public URL.
        endpoint = public_url or (sync.public_url if sync is not None else None) or str(request.base_url)
        return JSONResponse(did_document(service_did, endpoint.rstrip("/")))

    async def not_found(request: Request, exc: Exception) -> Response:
        return not_found_for(request.url.path)(request)

    async def not_allowed(request: Request, exc: Exception) -> Response:
        # OPTIONS asks which methods a route takes: answered, not refused. Other methods (TRACE too)
        # get the 405 of the face owning the path, in its envelope, with Allow.
        allow = getattr(exc, "headers", None) or {}
        # Starlette's Allow names the first route of the path only: a path with a route per method
        # (GET and POST /v1/memory/facts) takes the union of every route's.
        methods = {*allow.get("Allow", "").split(", "), "OPTIONS"}
        for route in request.app.router.routes:
            if isinstance(route, Route) and route.methods and route.matches(request.scope)[0] is not Match.NONE:
                methods |= route.methods
        allowed = ", ".join(sorted(methods - {""}))
        if request.method == "OPTIONS":
            return Response(status_code=204, headers={"Allow": allowed})
        answer = face_for(request.url.path).not_allowed(request, allowed)
        answer.headers["Allow"] = allowed
        return answer

    async def internal(request: Request, exc: Exception) -> Response:
        # What escaped every face's own handling (the faces catch their own): never a plain-text 500.
        return face_for(request.url.path).internal(request, exc)

    routes = [
        FaceRoute("/xrpc/garden.engram.searchMemories", xrpc(search_memories)),
        FaceRoute("/xrpc/garden.engram.listMemories", xrpc(list_memories)),
        FaceRoute("/xrpc/garden.engram.getMemory", xrpc(get_memory)),
        FaceRoute("/xrpc/garden.engram.getSpaceStatus", xrpc(get_space_status)),
        FaceRoute("/xrpc/garden.engram.getMemoryGraph", xrpc(get_memory_graph)),
        FaceRoute("/xrpc/garden.engram.describeService", xrpc(describe_service, authenticated=False)),
        FaceRoute(f"/xrpc/{WARM_NSID}", xrpc(warm_space, procedure=True), methods=["POST"]),
        FaceRoute(f"/xrpc/{REGISTER_NSID}", xrpc(register_space, procedure=True), methods=["POST"]),
        FaceRoute(f"/xrpc/{REVOKE_NSID}", xrpc(notify_credential_revoked, authenticated=False), methods=["POST"]),
        FaceRoute(f"/xrpc/{WRITE_NSID}", xrpc(notify_write, authenticated=False), methods=["POST"]),
        FaceRoute(f"/xrpc/{DELETED_NSID}", xrpc(notify_space_deleted, authenticated=False), methods=["POST"]),
        Route("/xrpc/_health", health),
        Route("/.well-known/did.json", well_known),
        Route("/metrics", metrics.metrics_endpoint),
        *kindgi_routes(),
        *supermemory_routes(),
        Route("/mcp", mcp, methods=["POST"]),  # stateless: no GET stream, no session to DELETE
        *web_routes(),
    ]
    app = FaceApp(routes=routes, lifespan=lifespan,
                    exception_handlers={404: not_found, 405: not_allowed, Exception: internal})
    app.router = FaceRouter(routes, lifespan=lifespan)  # Starlette's, trying only the routes a path can reach
    app.add_middleware(metrics.HttpMetrics, routes=routes)
    app.router.redirect_slashes = False  # a bodyless 307 is no JSON answer: a trailing slash gets the 404 envelope
    app.state.allow_private_urls = allow_private_urls  # read by the v5 pipeline when it fetches a URL
    return app


def _host_of(url: str) -> str:
    """The host[:port] of a URL (the MCP transport's allowed Host)."""
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or url


AUTH_STATE_FILE = "auth.sqlite"


def space_credentials(
    data_dir: Path, service_did: str, *, plc_url: str = PLC_DEFAULT, allow_http_localhost: bool = False
) -> SpaceCredentials:
    """The real credential check, remembering revocations and nonces in the data directory."""
    data_dir.mkdir(parents=True, exist_ok=True)
    resolver = DidResolver(plc_url, allow_http_localhost=allow_http_localhost)
    return SpaceCredentials(service_did, resolver, AuthState(data_dir / AUTH_STATE_FILE))


WORKER_CONFIG_ENV = "ENGRAM_SERVE_CONFIG"


def app_from_settings(
    settings: ServeSettings, *, embedding: QueryEmbedding, face_embedder: Embedder | None,
    llm: LLM | None = None, reranker: Reranker | None = None, read_only: bool = False, sync: SyncConfig | None = None,
) -> Starlette:
    """The service `settings` describe, with the embedders and LLM parts already made from them."""
    data = Path(settings.data)
    authenticator: Authenticator = InsecureOpen() if settings.insecure_open else space_credentials(
        data, settings.service_did, plc_url=settings.plc_url, allow_http_localhost=settings.did_web_http_localhost)
    return create_app(
        data, settings.service_did, authenticator=authenticator,
        limits=SpaceLimits(settings.rate, settings.burst, settings.concurrent),
        key_limits=Admission(settings.key_rate, settings.key_burst, settings.key_concurrent),
        embedding=embedding, read_only=read_only, sync=sync, search_threads=settings.search_threads,
        llm=llm, reranker=reranker, store=settings.store, face_embedder=face_embedder,
        allow_private_urls=settings.allow_private_urls, max_collections=settings.max_collections,
        processes=settings.workers,
    )


def worker_app() -> Starlette:
    """The app of one `serve --workers` process: read-only, with the parent's settings from the environment."""
    import os

    from engram_index.embed.factory import embedder_from_spec, face_embedder_from_spec
    from engram_index.llm.openai_compat import llm_from_spec
    from engram_index.rerank import reranker_from_spec

    settings = ServeSettings.from_json(os.environ[WORKER_CONFIG_ENV])
    embedding = QueryEmbedding(embedder_from_spec(settings.embedder), frozenset(settings.embed_authorities) or None)
    face_embedder = face_embedder_from_spec(settings.face_embedder, settings.embedder, embedding.embedder)
    llm = llm_from_spec(settings.llm) if settings.llm else None
    reranker = reranker_from_spec(settings.rerank, llm) if settings.rerank else None
    return app_from_settings(settings, embedding=embedding, face_embedder=face_embedder, llm=llm, reranker=reranker,
                             read_only=True)
