"""The network side of sync: our own space credential, and signed reads from space and repo hosts.

The wire is described in docs/design/sync.md. Every read carries the credential as a member's
search does (Atproto-Space + an RFC 9421 signature), addressed to the host's did:web.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from engram_index.engram.auth import httpsig, jwt
from engram_index.engram.auth.mint import SpaceClient
from engram_index.engram.identity.did import DidResolver, ResolveError
from engram_index.engram.identity.keys import P256, PrivateKey
from engram_index.engram.records import parse_space_uri
from engram_index.engram.sync.commit import SignedCommit
from engram_index.engram.sync.verify import Op, commit_from_json

MAX_CAR_BYTES = 1 << 30
RENEW_BEFORE_S = 60.0


class SyncError(Exception):
    """A host refused or failed a sync call; `name` is its XRPC error name when it sent one."""

    def __init__(self, message: str, *, name: str = "", status: int = 0) -> None:
        super().__init__(message)
        self.name, self.status = name, status


def audience_for(url: str) -> str:
    """The did:web a request to `url` is addressed to (a port becomes `%3A<port>`)."""
    netloc = urlsplit(url).netloc
    return "did:web:" + netloc.replace(":", "%3A")


@dataclass
class Account:
    """The indexer's own account, which signs in to get delegation tokens."""

    did: str
    password: str


@dataclass
class _Held:
    client: SpaceClient
    expires: float


class SyncClient:
    """Talks to space hosts and repo hosts on behalf of this indexer."""

    def __init__(self, resolver: DidResolver, account: Account | None, *, timeout: float = 15.0,
                 page: int = 500) -> None:
        self.resolver = resolver
        self.account = account
        self.timeout = timeout
        self.page = page
        self._credentials: dict[str, _Held] = {}
        self._session: str | None = None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary())

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)
            self._clients[loop] = client
        return client

    async def _resolve_service(self, did: str, *fragments: str) -> str:
        try:
            doc = await self.resolver.resolve(did)
        except ResolveError as exc:
            raise SyncError(f"cannot resolve {did}: {exc}") from exc
        for fragment in fragments:
            endpoint = doc.service(fragment)
            if endpoint:
                return endpoint
        raise SyncError(f"{did} names no {' or '.join(fragments)} service")

    async def space_host(self, space: str) -> str:
        """The space host of `space`: the authority's #atproto_space_host, else its PDS."""
        return await self._resolve_service(parse_space_uri(space).authority, "#atproto_space_host", "#atproto_pds")

    async def repo_host(self, repo: str) -> str:
        """A member's repo host (its PDS)."""
        return await self._resolve_service(repo, "#atproto_pds")

    # -- our credential ---------------------------------------------------------------------

    async def credential(self, space: str, *, renew: bool = False) -> SpaceClient:
        """A credential for `space` bound to a fresh P-256 key, renewed before it expires."""
        held = self._credentials.get(space)
        if held is not None and not renew and held.expires - time.time() > RENEW_BEFORE_S:
            return held.client
        if self.account is None:
            raise SyncError("no sync account is configured: cannot get a space credential")
        host = await self.space_host(space)
        delegation = await self._delegation_token(space, renew=renew)
        key = PrivateKey.generate(P256)
        values = {"authorization": f"Bearer {delegation}"}
        headers = {**values, **httpsig.sign(key, values, ("authorization",), keyid=key.did_key)}
        body = await self._call("POST", host, "com.atproto.space.getSpaceCredential", headers=headers, json_body={})
        token = body.get("credential")
        if not isinstance(token, str):
            raise SyncError("getSpaceCredential answered no credential")
        claims = jwt.decode(token, typ=None).claims
        expires = float(claims.get("exp", time.time() + 300))
        client = SpaceClient(token, key, "")
        self._credentials[space] = _Held(client, expires)
        return client

    async def _delegation_token(self, space: str, *, renew: bool) -> str:
        assert self.account is not None
        pds = await self.repo_host(self.account.did)
        for attempt in range(2):
            if self._session is None or renew or attempt:
                session = await self._call("POST", pds, "com.atproto.server.createSession",
                                           json_body={"identifier": self.account.did,
                                                      "password": self.account.password})
                self._session = str(session.get("accessJwt", ""))
            try:
                body = await self._call("GET", pds, "com.atproto.space.getDelegationToken", params={"space": space},
                                        headers={"authorization": f"Bearer {self._session}"})
            except SyncError as exc:
                if exc.status == 401 and not attempt:
                    continue  # the session expired: sign in again
                raise
            token = body.get("token")
            if isinstance(token, str):
                return token
            raise SyncError("getDelegationToken answered no token")
        raise SyncError("could not get a delegation token")

    # -- reads ------------------------------------------------------------------------------

    async def _signed(self, method: str, space: str, base: str, nsid: str, *, params: dict[str, Any] | None = None,
                      json_body: Any = None, raw: bool = False) -> Any:
        """A call carrying our credential; a 401 renews the credential and retries once."""
        for attempt in range(2):
            member = await self.credential(space, renew=bool(attempt))
            member.audience = audience_for(base)
            try:
                return await self._call(method, base, nsid, params=params, headers=member.headers(),
                                        json_body=json_body, raw=raw)
            except SyncError as exc:
                if exc.status != 401 or attempt:
                    raise
        raise AssertionError("unreachable")

    async def _call(self, method: str, base: str, nsid: str, *, params: dict[str, Any] | None = None,
                    headers: dict[str, str] | None = None, json_body: Any = None, raw: bool = False) -> Any:
        url = f"{base.rstrip('/')}/xrpc/{nsid}"
        try:
            async with self._http().stream(method, url, params=params, headers=headers, json=json_body) as response:
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_CAR_BYTES:
                        raise SyncError(f"{nsid} answered more than {MAX_CAR_BYTES} bytes")
                    chunks.append(chunk)
                content = b"".join(chunks)
        except httpx.HTTPError as exc:
            raise SyncError(f"{nsid} at {base}: {type(exc).__name__}") from exc
        if response.status_code != 200:
            try:
                error = json.loads(content)
            except ValueError:
                error = {}
            name = str(error.get("error", "")) if isinstance(error, dict) else ""
            message = str(error.get("message", "")) if isinstance(error, dict) else ""
            raise SyncError(f"{nsid} at {base}: {response.status_code} {name} {message}".strip(),
                            name=name, status=response.status_code)
        if raw:
            return content
        try:
            value = json.loads(content)
        except ValueError as exc:
            raise SyncError(f"{nsid} answered something that is not JSON") from exc
        if not isinstance(value, dict):
            raise SyncError(f"{nsid} answered something that is not a JSON object")
        return value

    async def list_repos(self, space: str) -> list[tuple[str, str | None]]:
        """Every member repo of the space, as the authority claims it: (did, rev)."""
        host = await self.space_host(space)
        out: list[tuple[str, str | None]] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"space": space, "limit": self.page, **({"cursor": cursor} if cursor else {})}
            body = await self._signed("GET", space, host, "com.atproto.space.listRepos", params=params)
            for repo in body.get("repos", []):
                if isinstance(repo, dict) and isinstance(repo.get("did"), str):
                    rev = repo.get("rev")
                    out.append((repo["did"], rev if isinstance(rev, str) else None))
            cursor = body.get("cursor") if isinstance(body.get("cursor"), str) else None
            if not cursor or not body.get("repos"):
                return out

    async def list_repo_ops(self, space: str, repo: str, since: str | None) -> tuple[list[Op], SignedCommit | None]:
        """Every op after `since`, and the commit the last page carries."""
        host = await self.repo_host(repo)
        ops: list[Op] = []
        after = since
        while True:
            params: dict[str, Any] = {"space": space, "repo": repo, "limit": self.page}
            if after:
                params["since"] = after
            body = await self._signed("GET", space, host, "com.atproto.space.listRepoOps", params=params)
            try:
                page = [Op.from_json(op) for op in body.get("ops", [])]
                commit = commit_from_json(body["commit"]) if body.get("commit") is not None else None
            except ValueError as exc:
                raise SyncError(f"listRepoOps answered a malformed op or commit: {exc}") from exc
            ops.extend(page)
            if commit is not None or not page:
                return ops, commit
            # The cursor is the page's last rev, passed back as `since`.
            cursor = body.get("cursor")
            after = cursor if isinstance(cursor, str) and cursor else page[-1].rev

    async def get_repo(self, space: str, repo: str) -> bytes:
        """The member's whole repo as a CAR."""
        host = await self.repo_host(repo)
        data: bytes = await self._signed("GET", space, host, "com.atproto.space.getRepo",
                                         params={"space": space, "repo": repo}, raw=True)
        return data

    async def register_notify(self, space: str, service_did: str, endpoint: str) -> int:
        """Ask the space host to notify us of writes; returns until when (ms) the registration holds."""
        host = await self.space_host(space)
        body = await self._signed("POST", space, host, "com.atproto.space.registerNotify",
                                  json_body={"space": space, "service": service_did, "endpoint": endpoint})
        from engram_index.engram.records import parse_datetime_ms

        try:
            return parse_datetime_ms(body.get("expiresAt"), "expiresAt")
        except Exception:
            return int((time.time() + 12 * 3600) * 1000)
