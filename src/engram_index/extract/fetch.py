"""Fetch a document's URL with limits on size, time, type and redirects, refusing private addresses.

Only http and https. The host is resolved once per hop and every address it resolves to must
be public (not loopback, private, link-local, shared, multicast or reserved) unless
`allow_private`; the connection then goes to that checked address (the Host header and TLS
name stay the URL's), so a DNS answer that changes between check and connect cannot reach
the inside (DNS rebinding). Redirects are followed by hand, each hop checked the same way.
The whole fetch, redirects and body included, takes at most `timeout_s`. Every refusal is an
InvalidInput subclass whose message says what was wrong.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from urllib.parse import unquote, urljoin

import httpx

from engram_index import __version__
from engram_index.extract.files import ExtractError, Extracted, UnsupportedFileType, extract_text

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_TIMEOUT_S = 15.0
MAX_REDIRECTS = 5
MAX_URL_CHARS = 2_048
ACCEPTED_TYPES = ("text/html", "application/xhtml+xml", "text/plain", "text/markdown", "text/x-markdown",
                  "application/pdf", "application/octet-stream", "")
ACCEPT = "text/html, application/xhtml+xml, application/pdf, text/markdown, text/plain;q=0.9, */*;q=0.1"
USER_AGENT = f"engram-index/{__version__} (document fetcher)"

Resolver = Callable[[str, int], list[str]]


class FetchError(ExtractError):
    """A URL whose content could not be fetched."""


class FetchRefused(FetchError):
    """A URL this service will not fetch (scheme, address, credentials, length)."""


class PrivateAddressRefused(FetchRefused):
    """A URL whose host is (or resolves to) a private, loopback or link-local address."""


class FetchFailed(FetchError):
    """The URL could not be reached or answered an error status."""


class FetchTimeout(FetchError):
    """The URL did not answer in time."""


class FetchTooLarge(FetchError):
    """The URL's content is larger than the limit."""


def is_public(address: str) -> bool:
    """Whether an IP address is on the public internet (IPv4-mapped IPv6 judged as the IPv4 it maps)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the host resolves to (FetchFailed when it does not resolve)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise FetchFailed(f"the host {host!r} does not resolve") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _checked_target(url: httpx.URL, allow_private: bool, resolve: Resolver) -> str:
    """The address to connect to for this URL, after the scheme and address checks."""
    if url.scheme not in ("http", "https"):
        raise FetchRefused(f"only http and https URLs are fetched, not {url.scheme or 'a relative URL'}")
    if not url.host:
        raise FetchRefused("the URL has no host")
    if url.userinfo:
        raise FetchRefused("URLs with credentials (user:password@) are not fetched")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        addresses = [str(ipaddress.ip_address(url.host))]
    except ValueError:
        addresses = resolve(url.host, port)
    if not addresses:
        raise FetchFailed(f"the host {url.host!r} does not resolve")
    if not allow_private:
        for address in addresses:
            if not is_public(address):
                raise PrivateAddressRefused(f"the URL's host {url.host!r} is a private, loopback or link-local address")
    return addresses[0]


def fetch_url(
    url: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    allow_private: bool = False,
    max_redirects: int = MAX_REDIRECTS,
    resolve: Resolver = system_resolver,
) -> Extracted:
    """The extracted text of what the URL serves (see the module docstring)."""
    if len(url) > MAX_URL_CHARS:
        raise FetchRefused(f"the URL is longer than {MAX_URL_CHARS} characters")
    try:
        current = httpx.URL(url.strip())
    except Exception:
        raise FetchRefused("the URL is not a valid URL") from None
    deadline = time.monotonic() + timeout_s
    with httpx.Client(follow_redirects=False, headers={"user-agent": USER_AGENT, "accept": ACCEPT}) as client:
        for _hop in range(max_redirects + 1):
            address = _checked_target(current, allow_private, resolve)
            data, content_type, location = _get(client, current, address, deadline, timeout_s, max_bytes)
            if location is None:
                name = unquote(current.path.rsplit("/", 1)[-1]) or None
                return extract_text(data, name, content_type)
            try:
                current = httpx.URL(urljoin(str(current), location))
            except Exception:
                raise FetchFailed("the URL redirected to an invalid URL") from None
    raise FetchFailed(f"the URL redirected more than {max_redirects} times")


def _get(client: httpx.Client, url: httpx.URL, address: str, deadline: float, timeout_s: float,
         max_bytes: int) -> tuple[bytes, str, str | None]:
    """One GET to the checked address: (body, content type, None) or (b"", "", redirect location)."""
    host = url.host
    target = url.copy_with(host=address)
    headers = {"host": url.netloc.decode("ascii")}
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise FetchTimeout(f"the URL did not answer within {timeout_s:g} s")
    request = client.build_request("GET", target, headers=headers, timeout=httpx.Timeout(remaining),
                                   extensions={"sni_hostname": host})
    try:
        response = client.send(request, stream=True)
    except httpx.TimeoutException:
        raise FetchTimeout(f"the URL did not answer within {timeout_s:g} s") from None
    except httpx.TransportError as exc:
        raise FetchFailed(f"the URL could not be reached ({type(exc).__name__})") from None
    try:
        if response.is_redirect and "location" in response.headers:
            return b"", "", response.headers["location"]
        if response.status_code >= 400:
            raise FetchFailed(f"the URL answered HTTP {response.status_code}")
        if response.status_code != 200:
            raise FetchFailed(f"the URL answered HTTP {response.status_code}, not 200 with content")
        content_type = response.headers.get("content-type", "")
        media = content_type.split(";", 1)[0].strip().lower()
        if media not in ACCEPTED_TYPES:
            raise UnsupportedFileType(media)
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise FetchTooLarge(f"the URL's content ({int(declared)} bytes) is larger than {max_bytes} bytes")
        body = bytearray()
        try:
            for chunk in response.iter_raw(65536) if _identity(response) else response.iter_bytes(65536):
                body += chunk
                if len(body) > max_bytes:
                    raise FetchTooLarge(f"the URL's content is larger than {max_bytes} bytes")
                if time.monotonic() > deadline:
                    raise FetchTimeout(f"the URL did not finish sending within {timeout_s:g} s")
        except httpx.TimeoutException:
            raise FetchTimeout(f"the URL did not finish sending within {timeout_s:g} s") from None
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise FetchFailed(f"the URL's content could not be read ({type(exc).__name__})") from None
        return bytes(body), content_type, None
    finally:
        response.close()


def _identity(response: httpx.Response) -> bool:
    return response.headers.get("content-encoding", "identity").strip().lower() in ("", "identity")

