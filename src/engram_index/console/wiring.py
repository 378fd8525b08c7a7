"""Where the access layer meets a served app: in process over ASGI, or a running service over HTTP."""

from __future__ import annotations

from typing import Any, Callable

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from engram_index.console.access import Console
from engram_index.console.mcp_server import build, request_credential
from engram_index.engram.auth import InsecureOpen
from engram_index.engram.records import is_space_uri

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
    """`/mcp` on an app: a fresh MCP server per run of the app's lifespan (a session manager runs once)."""

    def __init__(self, app: Callable[[], Starlette], allowed_hosts: list[str] | None = None) -> None:
        """Serve the MCP tools of the app `app()` returns."""
        self.app, self.allowed_hosts = app, allowed_hosts
        self.asgi: Starlette | None = None

    def start(self) -> MCPServer[Any]:
        """A new server for this run of the lifespan (its session manager is the caller's to run)."""
        server, self.asgi = http_mcp(self.app, self.allowed_hosts)
        return server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand the request to this run's transport."""
        assert self.asgi is not None, "the app's lifespan starts the MCP server"
        await self.asgi(scope, receive, send)
