"""Fetching URLs from a real loopback HTTP server: types, limits, redirects, and the SSRF refusals."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from engram_index.errors import InvalidInput
from engram_index.extract.fetch import (FetchFailed, FetchRefused, FetchTimeout, FetchTooLarge, USER_AGENT, fetch_url,
                                        is_public)
from engram_index.extract.files import Extracted, UnsupportedFileType
from engram_index.testkit.serve import free_port, serving

from tests.extract.pdfs import make_pdf

HTML = b"<html><head><title>Hello</title></head><body><p>Fetched page.</p></body></html>"
SEEN: list[dict[str, str]] = []


async def page(request: Request) -> Response:
    SEEN.append(dict(request.headers))
    return Response(HTML, media_type="text/html")


async def pdf(request: Request) -> Response:
    return Response(make_pdf([["A fetched PDF."]]), media_type="application/pdf")


async def notes(request: Request) -> Response:
    return Response("plain notes", media_type="text/plain")


async def image(request: Request) -> Response:
    return Response(b"\x89PNG\r\n\x1a\n", media_type="image/png")


async def big(request: Request) -> Response:
    return Response(b"a" * 5000, media_type="text/plain")


async def endless(request: Request) -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(100):
            yield b"b" * 1000

    return StreamingResponse(chunks(), media_type="text/plain")  # chunked: no Content-Length


async def slow(request: Request) -> Response:
    await asyncio.sleep(2)
    return Response("late", media_type="text/plain")


async def drip(request: Request) -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(40):
            await asyncio.sleep(0.05)
            yield b"c"

    return StreamingResponse(chunks(), media_type="text/plain")


async def hop(request: Request) -> Response:
    n = int(request.path_params["n"])
    return RedirectResponse(f"/hop/{n - 1}" if n > 0 else "/page.html", status_code=302)


async def to_ftp(request: Request) -> Response:
    return RedirectResponse("ftp://example.com/file.txt", status_code=301)


async def missing(request: Request) -> Response:
    return Response("nope", status_code=404, media_type="text/plain")


async def zipped(request: Request) -> Response:
    return Response(gzip.compress(HTML), media_type="text/html", headers={"content-encoding": "gzip"})


async def bomb(request: Request) -> Response:
    return Response(gzip.compress(b"d" * 200_000), media_type="text/plain", headers={"content-encoding": "gzip"})


async def empty(request: Request) -> Response:
    return Response(status_code=204)


APP = Starlette(routes=[Route(path, endpoint) for path, endpoint in [
    ("/page.html", page), ("/doc.pdf", pdf), ("/notes", notes), ("/image", image), ("/big", big),
    ("/endless", endless), ("/slow", slow), ("/drip", drip), ("/hop/{n}", hop), ("/to-ftp", to_ftp),
    ("/missing", missing), ("/zipped", zipped), ("/bomb", bomb), ("/empty", empty)]])


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serving(APP, probe="/notes") as url:
        yield url


def fetch(url: str, **kw: object) -> Extracted:
    return fetch_url(url, allow_private=True, **kw)  # type: ignore[arg-type]


def test_an_html_page_is_fetched_and_extracted(site: str) -> None:
    assert fetch(f"{site}/page.html") == Extracted("Fetched page.", "webpage", "Hello")
    assert SEEN[-1]["user-agent"] == USER_AGENT and SEEN[-1]["host"] == site.removeprefix("http://")


def test_a_pdf_and_plain_text_are_fetched(site: str) -> None:
    assert fetch(f"{site}/doc.pdf") == Extracted("A fetched PDF.", "pdf", None)
    assert fetch(f"{site}/notes") == Extracted("plain notes", "text", None)


def test_a_compressed_answer_is_decoded(site: str) -> None:
    assert fetch(f"{site}/zipped").text == "Fetched page."


def test_redirects_are_followed_up_to_the_limit(site: str) -> None:
    assert fetch(f"{site}/hop/4").text == "Fetched page."  # five redirects
    with pytest.raises(FetchFailed, match="redirected more than 5 times"):
        fetch(f"{site}/hop/5")


def test_a_redirect_to_another_scheme_is_refused(site: str) -> None:
    with pytest.raises(FetchRefused, match="only http and https URLs are fetched, not ftp"):
        fetch(f"{site}/to-ftp")


def test_an_unsupported_content_type_is_refused_by_name(site: str) -> None:
    with pytest.raises(UnsupportedFileType, match="unsupported file type: image/png"):
        fetch(f"{site}/image")


def test_content_larger_than_the_limit_is_refused_declared_or_streamed(site: str) -> None:
    with pytest.raises(FetchTooLarge, match=r"\(5000 bytes\) is larger than 1000 bytes"):
        fetch(f"{site}/big", max_bytes=1000)
    with pytest.raises(FetchTooLarge, match="larger than 10000 bytes"):
        fetch(f"{site}/endless", max_bytes=10_000)
    with pytest.raises(FetchTooLarge, match="larger than 50000 bytes"):
        fetch(f"{site}/bomb", max_bytes=50_000)  # the limit counts decompressed bytes


def test_a_slow_server_times_out(site: str) -> None:
    with pytest.raises(FetchTimeout, match="did not answer within 0.3 s"):
        fetch(f"{site}/slow", timeout_s=0.3)


def test_a_server_that_drips_its_body_times_out_as_a_whole(site: str) -> None:
    with pytest.raises(FetchTimeout, match="within 0.5 s"):
        fetch(f"{site}/drip", timeout_s=0.5)


def test_error_statuses_and_empty_answers_fail_clearly(site: str) -> None:
    with pytest.raises(FetchFailed, match="answered HTTP 404"):
        fetch(f"{site}/missing")
    with pytest.raises(FetchFailed, match="answered HTTP 204"):
        fetch(f"{site}/empty")


def test_an_unreachable_host_fails_clearly() -> None:
    with pytest.raises(FetchFailed, match=r"could not be reached \(ConnectError\)"):
        fetch(f"http://127.0.0.1:{free_port()}/x")
    with pytest.raises(FetchFailed, match="does not resolve"):
        fetch("http://no-such-host.invalid/x")


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/", "http://localhost/", "http://10.0.0.5/", "http://192.168.1.1/", "http://172.16.0.1/",
    "http://169.254.169.254/latest/meta-data/", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/",
    "http://100.64.0.1/", "http://[fd00::1]/", "http://[fe80::1]/", "http://224.0.0.1/",
])
def test_private_loopback_and_link_local_addresses_are_refused(url: str) -> None:
    with pytest.raises(FetchRefused, match="private, loopback or link-local") as info:
        fetch_url(url)
    assert isinstance(info.value, InvalidInput) and info.value.status == 400


def test_a_public_name_that_resolves_inside_is_refused(site: str) -> None:
    port = int(site.rsplit(":", 1)[1])
    with pytest.raises(FetchRefused, match="'rebind.example' is a private"):
        fetch_url(f"http://rebind.example:{port}/page.html", resolve=lambda host, p: ["93.184.215.14", "127.0.0.1"])


def test_the_connection_goes_to_the_checked_address_with_the_urls_host_header(site: str) -> None:
    port = int(site.rsplit(":", 1)[1])
    got = fetch_url(f"http://docs.example:{port}/page.html", allow_private=True,
                    resolve=lambda host, p: ["127.0.0.1"])
    assert got.text == "Fetched page." and SEEN[-1]["host"] == f"docs.example:{port}"


@pytest.mark.parametrize("url, message", [
    ("file:///etc/passwd", "not file"), ("ftp://example.com/x", "not ftp"), ("/relative", "relative URL"),
    ("http://user:pw@example.com/", "credentials"), ("http://example.com/" + "a" * 3000, "longer than"),
    ("http://[::1/", "not a valid URL"),
])
def test_urls_that_are_not_plain_http_are_refused(url: str, message: str) -> None:
    with pytest.raises(FetchRefused, match=message):
        fetch_url(url)


def test_public_addresses_are_public() -> None:
    assert is_public("93.184.215.14") and is_public("2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    assert not is_public("127.0.0.2") and not is_public("::ffff:10.1.2.3") and not is_public("fe80::1%eth0")
