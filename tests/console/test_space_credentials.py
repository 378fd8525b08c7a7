"""garden.engram space credentials through the MCP server and the page: the signed headers, forwarded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.console.test_mcp import data_of, over_stdio
from tests.engram.auth.network import SERVICE_DID, Network, network


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Network]:
    """A PLC directory, authorities and a service that checks space credentials."""
    with network(tmp_path / "data") as running:
        yield running


def over_http(url: str, headers: dict[str, str], calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The results of tool calls made over `/mcp` carrying `headers`."""
    async def go() -> list[Any]:
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                return [await client.call_tool(name, args) for name, args in calls]
    return asyncio.run(go())


def test_a_members_signed_headers_list_its_space_and_recall_in_it_over_http(net: Network) -> None:
    space = net.p256.space()
    headers = net.p256.member(space, SERVICE_DID).headers()
    listed, found = over_http(net.url, headers, [("list_collections", {}),
                                                 ("recall", {"collection": space, "query": "deploy server"})])
    assert data_of(listed)["collections"] == [{"id": space, "face": "engram", "name": "main"}]
    out = data_of(found)
    assert out["collection"] == space and out["results"][0]["text"] == "deploy the server"
    assert {t["term"] for t in out["results"][0]["explanation"]["terms"]} >= {"deploy", "server"}


def test_a_credential_for_one_space_reads_no_other(net: Network) -> None:
    headers = net.p256.member(net.p256.space(), SERVICE_DID).headers()
    (other,) = over_http(net.url, headers, [("recall", {"collection": net.k256.space(), "query": "pasta"})])
    assert other.is_error and "HTTP 401" in other.content[0].text


def test_a_credential_for_another_service_is_refused_at_list_collections(net: Network) -> None:
    headers = net.p256.member(net.p256.space(), "did:web:elsewhere.example").headers()
    (listed,) = over_http(net.url, headers, [("list_collections", {})])
    assert listed.is_error and "HTTP 401" in listed.content[0].text


def test_the_stdio_server_forwards_a_credential_file_beside_a_service(net: Network, tmp_path: Path) -> None:
    space = net.k256.space()
    path = tmp_path / "headers.json"
    path.write_text(json.dumps(net.k256.member(space, SERVICE_DID).headers()))

    async def call(client: Client) -> Any:
        return data_of(await client.call_tool("recall", {"collection": space, "query": "pasta tomatoes"}))
    out = over_stdio(["--url", net.url, "--space-headers", str(path)], None, call)
    assert out["results"][0]["text"] == "pasta with tomatoes"


def test_the_page_signs_in_with_a_credentials_headers_as_json(net: Network, tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    from tests.console.test_web import CHROMIUM, FLAGS

    if CHROMIUM is None:
        pytest.skip("chromium-headless-shell is not installed (make test installs it)")
    space = net.p256.space()
    headers = json.dumps(net.p256.member(space, SERVICE_DID).headers())
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page()
            page.goto(net.url + "/")
            page.locator("#key").fill(headers)
            page.locator("#key").press("Enter")
            playwright.expect(page.locator("#who")).to_have_text("signed in (space credential)")
            playwright.expect(page.locator("#collection option")).to_have_count(1)
            page.locator("#query").fill("pasta")
            page.locator("#query").press("Enter")
            playwright.expect(page.locator("#results li mark")).to_have_text(["pasta"])
        finally:
            browser.close()


