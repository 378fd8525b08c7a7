"""`engram-index serve` options of the v5 face, through the command an operator runs."""

from __future__ import annotations

import pytest
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route
from supermemory import Supermemory

from engram_index.keys import KeyStore
from engram_index.testkit.serve import serving
from tests.limits import ServeProcess
from tests.supermemory.conftest import wait_done


async def _page(request: Any) -> HTMLResponse:
    return HTMLResponse("<html><head><title>Intranet</title></head><body><p>The build server is rack seven.</p>"
                        "</body></html>")

pytestmark = pytest.mark.long(16)  # seconds in all on a 2-core machine: run first (tests/conftest.py)


def test_allow_private_urls_lets_url_documents_be_fetched_from_private_addresses(tmp_path: Path) -> None:
    token, _ = KeyStore(tmp_path).create("supermemory", {"namespaces": None})
    with serving(Starlette(routes=[Route("/wiki", _page)]), probe="/wiki") as page_url:
        for flag, status in (((), "failed"), (("--allow-private-urls",), "done")):
            with ServeProcess(tmp_path, "--embedder", "hashing:64", *flag) as server:
                client = Supermemory(api_key=token, base_url=server.url, max_retries=0)
                ref = client.add("intranet", content=f"{page_url}/wiki")
                doc = wait_done(client, "intranet", ref.id)
                assert doc.system.status == status, flag
                if status == "failed":
                    raw = httpx.get(f"{server.url}/ns/intranet/document/{ref.id}",
                                    headers={"Authorization": f"Bearer {token}"}).json()
                    assert "--allow-private-urls" in raw["error"]
                else:
                    assert "rack seven" in doc.content
