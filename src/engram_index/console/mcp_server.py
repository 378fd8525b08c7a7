"""The MCP server: the access layer's calls as tools an agent can act on (official `mcp` SDK 2.x).

One server definition serves stdio (`engram-index mcp`) and streamable HTTP (`/mcp` on `serve`,
stateless, JSON answers). Who is calling comes from `console_for`: over HTTP the request's bearer
key, over stdio the key the server was started with. Refusals reach the model as readable tool
errors (ToolError); every output is bounded (limits, texts cut at MAX_TEXT_CHARS).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, Callable

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from engram_index import __version__
from engram_index.console.access import MAX_LIST, MAX_RESULTS, Console, Query, Refused, credential_of

Json = dict[str, Any]
ConsoleFor = Callable[[Context], Console]

INSTRUCTIONS = """engram-index holds memories in collections (garden.engram spaces, v5 namespaces, Kindgi facts).
Start with list_collections, then recall to search one: every result says why it matched (matched
terms, a highlighted snippet, BM25, vector similarity, how the two were fused), and the answer names
the collection searched and notes when the ranking was approximate or by keyword alone. get shows one
memory with its versions; list pages through a collection; remember writes; forget deletes for good.
On Kindgi (a kg_ key) write_fact and retrieve take Kindgi's own scopes and modes."""

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
DESTROY = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

Collection = Annotated[str, Field(description="A collection id from list_collections (a space URI, a namespace, or 'kindgi').",
                                  min_length=1, max_length=1000)]
MemoryId = Annotated[str, Field(description="A memory's id as recall or list gave it.", min_length=1, max_length=1000)]


def build(console_for: ConsoleFor,
          lifespan: Callable[[MCPServer[Any]], AbstractAsyncContextManager[Any]] | None = None) -> MCPServer[Any]:
    """The server, asking `console_for` for each call's caller."""
    server: MCPServer[Any] = MCPServer(name="engram-index", instructions=INSTRUCTIONS, version=__version__,
                                       lifespan=lifespan)

    async def run(ctx: Context, call: Callable[[Console], Any]) -> Json:
        """Run one call as the caller, turning a refusal into a message the model reads."""
        try:
            console = console_for(ctx)
            out = await call(console)
        except Refused as exc:
            raise ToolError(exc.message) from exc
        return out if isinstance(out, dict) else {"collections": out}

    @server.tool(description="List the collections your credential can read (id, face, name). Call this first:"
                 " every other tool takes one of these ids as `collection`.", annotations=READ)
    async def list_collections(ctx: Context) -> Json:
        return await run(ctx, lambda c: c.list_collections())

    @server.tool(description="Search a collection for memories about `query`. Returns up to `limit` results, best"
                 " first, each with id, text, score, tags, author, createdAt and `explanation` (matched terms,"
                 " snippet with UTF-8 byte highlights, bm25, vectorSimilarity, fusion); plus `collection` (the scope"
                 " searched), `mode` (what ran), `note` (approximate or keyword-only ranking) and `whyFewer`"
                 " (why fewer than `limit` came back, when the service says).", annotations=READ)
    async def recall(
        ctx: Context,
        collection: Collection,
        query: Annotated[str, Field(description="What to look for, in words.", min_length=1, max_length=1000)],
        limit: Annotated[int, Field(description="How many results at most.", ge=1, le=MAX_RESULTS)] = 10,
        mode: Annotated[str | None, Field(description="hybrid (default: meaning and exact words), vector"
                                          " (meaning only) or keyword (exact words only).",
                                          pattern="^(hybrid|vector|keyword)$")] = None,
        author: Annotated[str | None, Field(description="Only memories by this author (a DID; garden.engram).",
                                            max_length=2048)] = None,
        tags: Annotated[list[str] | None, Field(description="Only memories carrying every one of these tags.",
                                                max_length=16)] = None,
        since: Annotated[str | None, Field(description="Only memories created at or after this RFC 3339 time.",
                                           max_length=64)] = None,
        metadata: Annotated[dict[str, str] | None, Field(description="Only memories whose metadata has these"
                                                         " values (v5).")] = None,
    ) -> Json:
        q = Query(query, limit, mode, author, list(tags or []), since, dict(metadata or {}))
        return await run(ctx, lambda c: c.recall(collection, q))

    @server.tool(description="Read one memory in full, with its versions (v5) or revisions (Kindgi), newest"
                 " first.", annotations=READ)
    async def get(ctx: Context, collection: Collection, id: MemoryId) -> Json:
        return await run(ctx, lambda c: c.get(collection, id))

    @server.tool(name="list", description="Page through a collection's memories, newest first. Pass the returned `cursor` to"
                 " get the next page; no cursor means the last page.", annotations=READ)
    async def list_memories(
        ctx: Context, collection: Collection,
        limit: Annotated[int, Field(description="Memories per page.", ge=1, le=MAX_LIST)] = 25,
        cursor: Annotated[str | None, Field(description="The cursor of the previous page.", max_length=2000)] = None,
    ) -> Json:
        return await run(ctx, lambda c: c.page(collection, limit, cursor))

    @server.tool(description="Write a memory into a collection (v5 namespaces; Kindgi takes write_fact,"
                 " garden.engram spaces are written by their members). Returns its id.", annotations=WRITE)
    async def remember(
        ctx: Context, collection: Collection,
        text: Annotated[str, Field(description="The memory, in words.", min_length=1, max_length=100_000)],
        tags: Annotated[list[str] | None, Field(description="Tags to file it under.", max_length=16)] = None,
        metadata: Annotated[dict[str, str] | None, Field(description="Key-value metadata.")] = None,
    ) -> Json:
        return await run(ctx, lambda c: c.remember(collection, text, list(tags or []), dict(metadata or {})))

    @server.tool(description="Delete a memory for good (it cannot be undone). Use the id recall or list gave.",
                 annotations=DESTROY)
    async def forget(ctx: Context, collection: Collection, id: MemoryId) -> Json:
        return await run(ctx, lambda c: c.forget(collection, id))

    @server.tool(description="Kindgi only: write a fact. `type` names its kind (e.g. note, preference), `scope`"
                 " where it is visible ({tenantId, projectId?, orgId?, userId?}), `content` the fact.",
                 annotations=WRITE)
    async def write_fact(
        ctx: Context,
        type: Annotated[str, Field(description="The fact's kind.", min_length=1, max_length=256)],
        scope: Annotated[dict[str, str], Field(description="Where it is visible: tenantId and optional"
                                               " projectId, orgId, userId.")],
        content: Annotated[str, Field(description="The fact, in words.", min_length=1, max_length=100_000)],
    ) -> Json:
        return await run(ctx, lambda c: c.write_fact({"type": type, "scope": scope, "content": content}))

    @server.tool(description="Kindgi only: retrieve facts by intent. mode list (newest first), keyword, semantic"
                 " or both (fused by reciprocal rank); each result carries its explanation.", annotations=READ)
    async def retrieve(
        ctx: Context,
        mode: Annotated[str, Field(description="list, keyword, semantic or both.",
                                   pattern="^(list|keyword|semantic|both)$")] = "both",
        query: Annotated[str | None, Field(description="What to look for (not for list).", max_length=4000)] = None,
        limit: Annotated[int, Field(description="How many results at most.", ge=1, le=MAX_RESULTS)] = 10,
        type: Annotated[str | None, Field(description="Only facts of this kind.", max_length=256)] = None,
        scope: Annotated[dict[str, str] | None, Field(description="Only facts in this scope.")] = None,
    ) -> Json:
        body: Json = {"mode": mode, "limit": limit, **{k: v for k, v in
                                                         (("query", query), ("type", type), ("scope", scope)) if v}}
        return await run(ctx, lambda c: c.retrieve(body))

    return server


def request_credential(ctx: Context) -> tuple[str | None, dict[str, str] | None]:
    """The credential of the HTTP request behind a tool call: a bearer key or a space credential's headers."""
    return credential_of(ctx.headers or {})
