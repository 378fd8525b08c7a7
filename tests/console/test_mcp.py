"""The MCP server through the SDK's own client: in process, over stdio, over streamable HTTP on `serve`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Awaitable, Callable

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from engram_index.console.access import Console
from engram_index.console.mcp_server import build
from tests.console.served import FACTS, MEMORIES, SCOPE, SPACE, Served, served
from tests.limits import PATIENCE_S, REPO

SRC = str(Path(__file__).resolve().parents[2] / "src")
ClientCall = Callable[[Client], Awaitable[Any]]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Served]:
    """A running service with a garden.engram space and Kindgi facts."""
    with served(tmp_path / "data") as running:
        yield running


def in_process(service: Served, key: str | None, call: ClientCall) -> Any:
    """Run `call` with an in-process client of a server whose calls go to `service` over HTTP."""
    async def go() -> Any:
        async with httpx.AsyncClient(base_url=service.url) as http:
            console = Console(http, key, lambda: [SPACE])
            async with Client(build(lambda ctx: console)) as client:
                return await call(client)
    return asyncio.run(go())


def over_http(service: Served, key: str | None, call: ClientCall) -> Any:
    """Run `call` with a streamable-HTTP client of `/mcp` on the served app."""
    async def go() -> Any:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client:
                return await call(client)
    return asyncio.run(go())


def over_stdio(args: list[str], key: str | None, call: ClientCall) -> Any:
    """Run `call` with a client of `engram-index mcp ARGS` launched as a subprocess over stdio."""
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("ENGRAM_INDEX_KEY", None)
    if key:
        env["ENGRAM_INDEX_KEY"] = key
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram_index.cli", "mcp", *args], env=env)

    async def go() -> Any:
        async with Client(params) as client:
            return await call(client)
    return asyncio.run(go())


def data_of(result: Any) -> Any:
    """A tool result's structured content (or its JSON text block)."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def tools(client: Client) -> dict[str, Any]:
    """The server's tools by name."""
    return {t.name: t for t in (await client.list_tools()).tools}


def test_every_tool_is_listed_with_a_description_and_its_annotations(service: Served) -> None:
    listed = in_process(service, None, tools)
    assert set(listed) == {"list_collections", "remember", "recall", "get", "list", "forget", "write_fact", "retrieve"}
    assert all(len(t.description or "") > 40 for t in listed.values())
    assert listed["forget"].annotations.destructive_hint is True
    assert listed["forget"].annotations.read_only_hint is False
    for name in ("list_collections", "recall", "get", "list", "retrieve"):
        assert listed[name].annotations.read_only_hint is True, name
    assert listed["remember"].annotations.destructive_hint is False
    limit = listed["recall"].input_schema["properties"]["limit"]
    assert limit["maximum"] == 50 and limit["minimum"] == 1


def _recall(query: str, **extra: Any) -> ClientCall:
    async def call(client: Client) -> Any:
        return data_of(await client.call_tool("recall", {"collection": SPACE, "query": query, **extra}))
    return call


def test_recall_on_an_open_space_carries_each_results_explanation(service: Served) -> None:
    out = in_process(service, None, _recall("green tea", mode="hybrid"))
    assert out["collection"] == SPACE and out["face"] == "engram" and out["mode"] == "hybrid"
    first = out["results"][0]
    assert first["text"] == MEMORIES[0][0] and first["tags"] == MEMORIES[0][1]
    why = first["explanation"]
    assert {t["term"] for t in why["terms"]} >= {"green", "tea"}
    text = why["snippet"]["text"].encode()
    marked = {text[h["byteStart"]:h["byteEnd"]].decode() for h in why["snippet"]["highlights"]}
    assert marked == {"green", "tea"}
    assert why["bm25"] > 0 and why["vectorSimilarity"] is not None and why["fusion"]["method"]


def test_recall_says_when_the_ranking_was_by_keyword_alone(service: Served) -> None:
    out = in_process(service, None, _recall("coffee", mode="keyword"))
    assert out["mode"] == "keyword" and out["results"][0]["text"] == MEMORIES[1][0]
    assert out["results"][0]["explanation"]["vectorSimilarity"] is None


def test_recall_filters_by_tags_author_and_time(service: Served) -> None:
    tagged = in_process(service, None, _recall("morning tea river", tags=["sport"]))
    assert [r["text"] for r in tagged["results"]] == [MEMORIES[2][0]]
    later = in_process(service, None, _recall("tea", since="2026-01-04T00:00:00Z", mode="keyword"))
    assert [r["text"] for r in later["results"]] == [MEMORIES[3][0]]
    nobody = in_process(service, None, _recall("tea", author="did:plc:nobodynobodynobodynobody"))
    assert nobody["results"] == []


def _error(name: str, args: dict[str, Any]) -> ClientCall:
    async def call(client: Client) -> Any:
        result = await client.call_tool(name, args)
        assert result.is_error
        return result.content[0].text
    return call


def test_a_bad_argument_is_a_readable_tool_error(service: Served) -> None:
    text = in_process(service, None, _error("recall", {"collection": SPACE, "query": "tea", "limit": 500}))
    assert "limit" in text and "50" in text


def test_a_filter_the_face_cannot_apply_is_refused_by_name_not_dropped(service: Served) -> None:
    text = in_process(service, None, _error("recall", {"collection": SPACE, "query": "tea", "metadata": {"a": "b"}}))
    assert "metadata" in text and "garden.engram" in text


def test_an_unknown_space_is_the_faces_own_message(service: Served) -> None:
    other = SPACE.replace("notes", "elsewhere")
    text = in_process(service, None, _error("recall", {"collection": other, "query": "tea"}))
    assert "HTTP 400: UnknownSpace" in text and other in text


def test_remember_on_a_garden_space_explains_who_writes_it(service: Served) -> None:
    text = in_process(service, None, _error("remember", {"collection": SPACE, "text": "new"}))
    assert "members' repos" in text


def test_get_and_list_page_through_a_space_with_a_cursor(service: Served) -> None:
    async def call(client: Client) -> Any:
        first = data_of(await client.call_tool("list", {"collection": SPACE, "limit": 3}))
        rest = data_of(await client.call_tool("list", {"collection": SPACE, "limit": 3, "cursor": first["cursor"]}))
        one = data_of(await client.call_tool("get", {"collection": SPACE, "id": first["memories"][0]["id"]}))
        return first, rest, one
    first, rest, one = in_process(service, None, call)
    assert len(first["memories"]) == 3 and len(rest["memories"]) == 1 and first["cursor"]
    assert {m["text"] for m in first["memories"] + rest["memories"]} == {t for t, _ in MEMORIES}
    assert one["memory"]["text"] == first["memories"][0]["text"] and len(one["memory"]["versions"]) == 1


def _kindgi_round(client_call: Callable[[Served, str | None, ClientCall], Any], service: Served) -> None:
    """Every Kindgi tool: write a fact, find it explained, read its revisions, page, forget it."""
    async def call(client: Client) -> Any:
        listed = data_of(await client.call_tool("list_collections", {}))
        wrote = data_of(await client.call_tool("write_fact", {"type": "note", "scope": SCOPE,
                                                              "content": "matcha latte in the morning"}))
        fid = wrote["fact"]["id"]
        found = data_of(await client.call_tool("recall", {"collection": "kindgi", "query": "matcha latte"}))
        raw = data_of(await client.call_tool("retrieve", {"mode": "keyword", "query": "herbal"}))
        got = data_of(await client.call_tool("get", {"collection": "kindgi", "id": fid}))
        page = data_of(await client.call_tool("list", {"collection": "kindgi", "limit": 2}))
        gone = data_of(await client.call_tool("forget", {"collection": "kindgi", "id": fid}))
        again = await client.call_tool("get", {"collection": "kindgi", "id": fid})
        return listed, fid, found, raw, got, page, gone, again
    listed, fid, found, raw, got, page, gone, again = client_call(service, service.kindgi_key, call)
    assert listed["collections"][0]["id"] == "kindgi"
    top = found["results"][0]
    assert top["id"] == fid and top["explanation"]["fusion"]["method"] == "rrf"
    assert {t["term"] for t in top["explanation"]["terms"]} >= {"matcha", "latte"}
    assert raw["results"][0]["fact"]["content"] == FACTS[1] and "explanation" in raw["results"][0]
    assert got["memory"]["text"] == "matcha latte in the morning" and got["memory"]["versions"][0]["version"] == 1
    assert len(page["memories"]) == 2 and page["cursor"]
    assert gone["forgotten"] == fid
    assert again.is_error and "404" in again.content[0].text


def test_every_kindgi_tool_works_in_process(service: Served) -> None:
    _kindgi_round(in_process, service)


def test_every_kindgi_tool_works_over_http_on_serve(service: Served) -> None:
    _kindgi_round(over_http, service)


def test_every_kindgi_tool_works_over_stdio_beside_a_service(service: Served) -> None:
    _kindgi_round(lambda s, key, call: over_stdio(["--url", s.url], key, call), service)


def test_recall_over_http_on_an_open_service_carries_its_explanation(service: Served) -> None:
    out = over_http(service, None, _recall("green tea"))
    assert out["results"][0]["explanation"]["snippet"]["highlights"]


def test_a_revoked_or_unknown_key_is_refused_readably_over_http(service: Served) -> None:
    text = over_http(service, "kg_nope_nope", _error("recall", {"collection": "kindgi", "query": "tea"}))
    assert "HTTP 401" in text


def test_a_space_credential_given_as_a_bearer_key_is_refused_with_why(service: Served) -> None:
    text = in_process(service, "eyJhbGciOi.not.a-key", _error("list_collections", {}))
    assert "Atproto-Space-Audience" in text and "not as a bearer key" in text


def test_write_fact_with_a_garden_credential_says_it_needs_a_kindgi_key(service: Served) -> None:
    text = in_process(service, None, _error("write_fact", {"type": "note", "scope": SCOPE, "content": "x"}))
    assert "Kindgi key" in text


def test_the_stdio_server_opens_a_data_directory_itself(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with served(data):
        pass  # filled, then released (one process owns a data directory)
    out = over_stdio(["--data", str(data), "--embedder", "hashing:64"], None, _recall("green tea"))
    assert out["results"][0]["text"] == MEMORIES[0][0] and out["results"][0]["explanation"]["terms"]


def wait_processed(service: Served, ns: str, doc_id: str) -> None:
    """Wait until the v5 pipeline made the document's memories (it runs in the background)."""
    deadline = time.monotonic() + 60
    headers = {"authorization": f"Bearer {service.v5_key}"}
    while httpx.get(f"{service.url}/ns/{ns}/document/{doc_id}", headers=headers).json()["system"]["status"] != "done":
        assert time.monotonic() < deadline, "the document was never processed"
        time.sleep(0.05)


def _v5_round(client_call: Callable[[Served, str | None, ClientCall], Any], service: Served) -> None:
    """Every general tool on a v5 namespace: remember, recall explained, get, list, forget."""
    async def write(client: Client) -> Any:
        return data_of(await client.call_tool("remember", {"collection": "work", "metadata": {"kind": "fact"},
                                                           "text": "The café uses oat milk in every flat white."}))

    async def read(client: Client) -> Any:
        listed = data_of(await client.call_tool("list_collections", {}))
        found = data_of(await client.call_tool("recall", {"collection": "work", "query": "oat milk",
                                                          "metadata": {"kind": "fact"}}))
        other = data_of(await client.call_tool("recall", {"collection": "work", "query": "oat milk",
                                                          "metadata": {"kind": "opinion"}}))
        assert other["results"] == []  # the metadata filter applies
        page = data_of(await client.call_tool("list", {"collection": "work", "limit": 10}))
        memory = {**page["memories"][0], "hit": found["results"][0]}
        got = data_of(await client.call_tool("get", {"collection": "work", "id": memory["id"]}))
        gone = data_of(await client.call_tool("forget", {"collection": "work", "id": memory["id"]}))
        twice = await client.call_tool("forget", {"collection": "work", "id": "m-no-such"})
        after = data_of(await client.call_tool("list", {"collection": "work"}))
        return listed, found, memory, got, page, gone, twice, after
    wrote = client_call(service, service.v5_key, write)
    wait_processed(service, "work", wrote["id"])
    listed, found, memory, got, page, gone, twice, after = client_call(service, service.v5_key, read)
    assert {"id": "work", "face": "v5", "name": "work"} in listed["collections"]
    # The memory and the chunk it came from hold one sentence: hybrid gives them one place (the better).
    assert [r["kind"] for r in found["results"]] in (["memory"], ["chunk"]) and memory["hit"]["text"] == memory["text"]
    why = memory["hit"]["explanation"]
    text = why["snippet"]["text"].encode()
    assert {text[h["byteStart"]:h["byteEnd"]].decode() for h in why["snippet"]["highlights"]} == {"oat", "milk"}
    assert why["bm25"] > 0 and why["vectorSimilarity"] is not None and "cosine" in why["fusion"]["method"]
    assert got["memory"]["text"] == memory["text"] and got["memory"]["versions"][0]["version"] == 1
    assert [m["id"] for m in page["memories"]] == [memory["id"]] and page["cursor"] is None
    assert gone["forgotten"] == memory["id"] and twice.is_error and "404" in twice.content[0].text
    assert after["memories"] == []


def test_every_general_tool_works_on_a_v5_namespace_in_process(service: Served) -> None:
    _v5_round(in_process, service)


def test_every_general_tool_works_on_a_v5_namespace_over_http(service: Served) -> None:
    _v5_round(over_http, service)


def test_a_v5_mode_other_than_hybrid_is_refused_readably(service: Served) -> None:
    text = in_process(service, service.v5_key, _error("recall", {"collection": "work", "query": "x", "mode": "keyword"}))
    assert "mode must be hybrid" in text


def test_an_app_served_twice_answers_mcp_each_time(tmp_path: Path) -> None:
    from engram_index.engram.auth import InsecureOpen
    from engram_index.testkit.serve import serving
    from tests.limits import roomy_app

    data = tmp_path / "data"
    with served(data):
        pass
    app = roomy_app(data, "did:web:localhost", authenticator=InsecureOpen())
    for _ in range(2):  # a session manager runs once: each run of the lifespan starts a new server
        with serving(app) as url:
            out = over_http(Served(url, data, "", app), None, _recall("green tea", mode="keyword"))
            assert out["results"][0]["text"] == MEMORIES[0][0]


def test_a_served_app_imports_the_mcp_sdk_only_when_mcp_is_first_asked_for(tmp_path: Path) -> None:
    # In a fresh interpreter: this suite's own imports have long loaded the SDK.
    script = """
import sys
from pathlib import Path
import httpx
from engram_index.engram.auth import InsecureOpen
from engram_index.testkit.serve import serving
from tests.limits import roomy_app

app = roomy_app(Path(sys.argv[1]), "did:web:localhost", authenticator=InsecureOpen())
with serving(app) as url:
    assert httpx.get(url + "/xrpc/_health").status_code == 200
    assert not [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")], "imported before /mcp"
    asked = httpx.post(url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                       headers={"Accept": "application/json, text/event-stream"})
    assert asked.status_code == 200, asked.text
    assert "recall" in {t["name"] for t in asked.json()["result"]["tools"]}
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "data")], capture_output=True, text=True,
                          timeout=PATIENCE_S, cwd=REPO, env={**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"})
    assert done.stdout.strip() == "ok", done.stderr
