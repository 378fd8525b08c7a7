"""DID documents for did:plc (through a PLC directory) and did:web, resolved with a TTL cache.

Parsing and validation of documents come from the `atproto` SDK (atproto_core.did_doc); the
fetching is ours because the SDK's resolvers cannot meet what a public service needs: a bound on
the size and total time of a response (a slow or huge document must not hold a request), no
redirects, did:web with a port, plain http only for localhost behind an explicit setting,
one fetch in flight per DID, a short negative cache, and a rate limit on forced re-resolution
(a bad signature may mean the key rotated, but must not let a caller make us refetch at will).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import httpx
from atproto_core.did_doc import DidDocument

from engram_index.engram.identity.keys import BadKey, PublicKey, key_from_method

PLC_DEFAULT = "https://plc.directory"
_PLC_RE = re.compile(r"^did:plc:[a-z2-7]{24}$")
_WEB_RE = re.compile(r"^did:web:[A-Za-z0-9.\-]+(%3A[0-9]{1,5})?$")
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]"}


class ResolveError(Exception):
    """A DID that could not be resolved; `temporary` when retrying later may succeed."""

    def __init__(self, message: str, *, temporary: bool = False) -> None:
        super().__init__(message)
        self.temporary = temporary


@dataclass(frozen=True)
class DidDoc:
    """A validated DID document with lookups by fragment."""

    did: str
    doc: DidDocument
    fetched_at: float

    def key(self, fragment: str) -> PublicKey | None:
        """The public key of verification method `#fragment`, or None when the document has none."""
        for method in self.doc.verification_method or []:
            if method.id in (fragment, f"{self.did}{fragment}") and method.public_key_multibase:
                try:
                    return key_from_method(method.type, method.public_key_multibase)
                except BadKey:
                    return None
        return None

    def service(self, fragment: str) -> str | None:
        """The endpoint URL of service `#fragment`, or None."""
        for service in self.doc.service or []:
            if service.id in (fragment, f"{self.did}{fragment}") and isinstance(service.service_endpoint, str):
                return service.service_endpoint.rstrip("/")
        return None


def parse_document(did: str, body: bytes, fetched_at: float) -> DidDoc:
    """Validate a fetched document: JSON, the DID document shape, and `id` equal to the DID asked for."""
    try:
        raw: Any = json.loads(body)
        doc = DidDocument.from_dict(raw)
    except Exception as exc:  # JSON and pydantic errors alike: the document is unusable
        raise ResolveError(f"malformed DID document for {did}") from exc
    if doc.id != did:
        raise ResolveError(f"the DID document's id is {doc.id!r}, not {did}")
    return DidDoc(did, doc, fetched_at)


class DidResolver:
    """Resolves DIDs to documents, caching each for `ttl` seconds."""

    def __init__(
        self,
        plc_url: str = PLC_DEFAULT,
        *,
        ttl: float = 300.0,
        negative_ttl: float = 15.0,
        min_refresh: float = 5.0,
        timeout: float = 3.0,
        max_bytes: int = 64 * 1024,
        allow_http_localhost: bool = False,
        max_entries: int = 10_000,
    ) -> None:
        self.plc_url = plc_url.rstrip("/")
        self.ttl, self.negative_ttl, self.min_refresh = ttl, negative_ttl, min_refresh
        self.timeout, self.max_bytes = timeout, max_bytes
        self.allow_http_localhost = allow_http_localhost
        self.max_entries = max_entries
        self._cache: OrderedDict[str, tuple[float, DidDoc | ResolveError]] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[DidDoc]] = {}
        # One client per event loop: making one costs more than a fetch (it loads the CA bundle).
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary())
        self.fetches = 0  # for tests and benchmarks: how many documents were fetched

    async def resolve(self, did: str, *, fresh: bool = False) -> DidDoc:
        """The DID's document; `fresh` refetches unless the cached copy is younger than `min_refresh`."""
        now = time.monotonic()
        cached = self._cache.get(did)
        if cached is not None:
            stored_at, value = cached
            young = now - stored_at < self.min_refresh
            if isinstance(value, ResolveError):
                if now - stored_at < self.negative_ttl:
                    raise value
            elif now - stored_at < self.ttl and (not fresh or young):
                self._cache.move_to_end(did)
                return value
        pending = self._inflight.get(did)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[DidDoc] = asyncio.get_running_loop().create_future()
        self._inflight[did] = future
        try:
            doc = await self._fetch(did)
        except ResolveError as exc:
            if not exc.temporary:
                self._store(did, exc)
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody else must log it
            raise
        else:
            self._store(did, doc)
            future.set_result(doc)
            return doc
        finally:
            del self._inflight[did]

    def forget(self, did: str) -> None:
        """Drop a DID from the cache (its next resolution fetches)."""
        self._cache.pop(did, None)

    def _store(self, did: str, value: DidDoc | ResolveError) -> None:
        self._cache[did] = (time.monotonic(), value)
        self._cache.move_to_end(did)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)

    def url_for(self, did: str) -> str:
        """Where the DID's document is fetched from; raises ResolveError for DIDs we do not resolve."""
        if _PLC_RE.match(did):
            return f"{self.plc_url}/{did}"
        if _WEB_RE.match(did):
            host = unquote(did.removeprefix("did:web:")).lower()
            hostname = host.rsplit(":", 1)[0] if ":" in host else host
            if hostname in _LOCAL_HOSTS or hostname == "localhost":
                if not self.allow_http_localhost:
                    raise ResolveError(f"{did} names this machine; resolving it needs the localhost setting")
                return f"http://{host}/.well-known/did.json"
            if _is_ip(hostname):
                raise ResolveError(f"{did} names an IP address, which did:web does not allow")
            return f"https://{host}/.well-known/did.json"
        raise ResolveError(f"unsupported or malformed DID {did[:100]!r}")

    async def _fetch(self, did: str) -> DidDoc:
        url = self.url_for(did)
        self.fetches += 1
        try:
            body = await asyncio.wait_for(self._get(url), self.timeout)
        except asyncio.TimeoutError as exc:
            raise ResolveError(f"resolving {did} took longer than {self.timeout:g} s", temporary=True) from exc
        except httpx.HTTPError as exc:
            raise ResolveError(f"could not fetch the DID document of {did}: {type(exc).__name__}",
                               temporary=True) from exc
        return parse_document(did, body, time.monotonic())

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = httpx.AsyncClient(follow_redirects=False, timeout=self.timeout)
            self._clients[loop] = client
        return client

    async def _get(self, url: str) -> bytes:
        async with self._client().stream("GET", url, headers={"accept": "application/json"}) as response:
            if response.status_code in (404, 410):
                raise ResolveError(f"no DID document at {url} ({response.status_code})")
            if response.status_code != 200:
                raise ResolveError(f"{url} answered {response.status_code}",
                                   temporary=response.status_code >= 500 or response.status_code == 429)
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.max_bytes:
                    raise ResolveError(f"the DID document at {url} is larger than {self.max_bytes} bytes")
                chunks.append(chunk)
            return b"".join(chunks)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True
