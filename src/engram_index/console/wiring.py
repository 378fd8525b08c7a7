"""Where the access layer meets a served app: in process over ASGI, or a running service over HTTP."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Callable

import anyio
import httpx
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from engram_index.console.access import Console
from engram_index.engram.auth import InsecureOpen
from engram_index.engram.records import is_space_uri

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context, MCPServer

# The in-process client's base URL: never resolved, ASGI carries the requests.
IN_PROCESS = "http://engram-index.internal"
TIMEOUT = httpx.Timeout(30.0)  # an agent's tool call should not hang: the reference connector's 30 s


def in_process_client(app: Starlette) -> httpx.AsyncClient:
    """A client whose requests reach `app` in this process (its lifespan already running)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=IN_PROCESS, timeout=TIMEOUT)


def open_spaces(app: Starlette) -> list[str] | None:
    """The garden.engram spaces of an app that checks no credentials (--insecure-open); None when it checks them."""
    if not isinstance(getattr(app.state, "authenticator", None), InsecureOpen):
        return None
    return sorted(filter(is_space_uri, app.state.spaces.store.collections()))


def app_console(app: Starlette, credential: str | None, space_headers: dict[str, str] | None = None) -> Console:
    """The caller holding `credential` (or a space credential's headers), served by `app` in this process."""
    client = getattr(app.state, "console_client", None)
    if client is None:
        client = app.state.console_client = in_process_client(app)
    return Console(client, credential, lambda: open_spaces(app), space_headers)


def http_mcp(app: Callable[[], Starlette], allowed_hosts: list[str] | None = None
             ) -> tuple[MCPServer[Any], Starlette]:
    """The MCP server for `/mcp` on the app `app()` returns: each call as the bearer key of its HTTP request."""
    from mcp.server.transport_security import TransportSecuritySettings

    from engram_index.console.mcp_server import build, request_credential

    def console_for(ctx: Context) -> Console:
        return app_console(app(), *request_credential(ctx))

    server = build(console_for)
    # The SDK's DNS-rebinding guard admits loopback Host/Origin; a public URL's host is added.
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", *(allowed_hosts or [])]
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                         allowed_origins=[f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts])
    asgi = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                                      transport_security=security)
    return server, asgi


class McpRoute:
    """`/mcp` on an app: a fresh MCP server per run of the app's lifespan, built at its first request.

    The MCP SDK and its dependencies are about a third of a served process's imports (`python -X
    importtime -c "import engram_index.app"`), and most processes never get an MCP call: a worker, a
    test's server, a service only SDKs talk to. So the SDK is imported, and the server built and its
    session manager run, only once `/mcp` is asked for; the manager runs in a task of the lifespan's
    own (a session manager's task group must be entered and left by one task), until the lifespan ends.
    """

    def __init__(self, app: Callable[[], Starlette], allowed_hosts: list[str] | None = None) -> None:
        """Serve the MCP tools of the app `app()` returns."""
        self.app, self.allowed_hosts = app, allowed_hosts
        self.asgi: Starlette | None = None
        self._wanted: anyio.Event | None = None
        self._ready = self._done = anyio.Event()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For one run of the app's lifespan: start the MCP server when first asked, stop it at the end."""
        self.asgi, self._wanted, self._ready, self._done = None, anyio.Event(), anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._serve)
            try:
                yield
            finally:
                self._done.set()
                self._wanted.set()  # wakes the task if no request ever asked

    async def _serve(self) -> None:
        """Wait for the first request, then build the server and run its session manager until the end."""
        assert self._wanted is not None
        await self._wanted.wait()
        if self._done.is_set():
            return
        try:
            # Off the event loop: importing the SDK takes a while, and other requests go on meanwhile.
            await anyio.to_thread.run_sync(importlib.import_module, "mcp.server.mcpserver")
            server, asgi = http_mcp(self.app, self.allowed_hosts)
            async with server.session_manager.run():
                self.asgi = asgi
                self._ready.set()
                await self._done.wait()
        finally:
            self._ready.set()  # a request waiting on a server that could not start is not left hanging

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand the request to this run's transport (started by the first request)."""
        assert self._wanted is not None, "the app's lifespan runs the MCP route"
        self._wanted.set()
        await self._ready.wait()
        if self.asgi is None:
            failed = JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32603, "message": "the MCP server could not start: see the service's log"}}, 503)
            await failed(scope, receive, send)
            return
        await self.asgi(scope, receive, send)
