"""The HTTP side of the fake space network: repo hosts (PDSes) and the authority's space host, each
its own Starlette app with its own did:web, speaking the wire of docs/design/sync.md."""

from __future__ import annotations

import asyncio
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engram_index.engram.api.xrpc import xrpc_name
from engram_index.engram.auth import httpsig, jwt
from engram_index.engram.auth.credentials import SpaceCredentials
from engram_index.engram.auth.mint import mint_credential
from engram_index.engram.auth.state import AuthState
from engram_index.keys import bearer_token
from engram_index.errors import BadRecord, EngramError
from engram_index.engram.auth.errors import ExpiredToken, InvalidToken
from engram_index.engram.identity.did import DidResolver, ResolveError
from engram_index.engram.identity.keys import P256, BadKey, PrivateKey, PublicKey, parse_public_key
from engram_index.engram.records import format_datetime_ms, is_did, parse_space_uri
from engram_index.engram.sync.verify import commit_to_json
from engram_index.testkit.authority import SpaceAuthority
from engram_index.testkit.spacenet_repo import Account, Faults, LogOp, Registration, Repo, SinceNotFound, Space



class Network(Protocol):
    """What the hosts read of the network they belong to (spacenet.SpaceNetwork is the one)."""

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """The network's lock (a threading.RLock)."""

    @property
    def accounts(self) -> dict[str, Account]:
        """Accounts by DID."""

    @property
    def spaces(self) -> dict[str, Space]:
        """Spaces by URI."""

    @property
    def authority(self) -> SpaceAuthority:
        """The spaces' authority."""

    @property
    def credential_lifetime(self) -> int:
        """Seconds a minted space credential lives."""

    @property
    def notify_lifetime(self) -> float:
        """Seconds a notification subscription lives."""

    @property
    def plc_url(self) -> str:
        """The PLC directory's URL."""

DELEGATION_TYP = "atproto-space-delegation+jwt"
ACCESS_TYP = "at+jwt"
SESSION_LIFETIME = 7200
DELEGATION_LIFETIME = 60
MAX_DELEGATION_LIFETIME = 300
SKEW = 5.0
Handler = Callable[[Request], Awaitable[Response]]


class HostError(Exception):
    """An XRPC error answer: status, error name and message."""

    def __init__(self, status: int, name: str, message: str) -> None:
        super().__init__(message)
        self.status, self.name, self.message = status, name, message


def _param(request: Request, name: str, *, required: bool = True) -> str | None:
    values = request.query_params.getlist(name)
    if len(values) > 1 or (required and not values):
        raise HostError(400, "InvalidRequest", f"{name} is required, once" if required else f"{name} at most once")
    return values[0] if values else None


def _limit(request: Request, default: int = 100, maximum: int = 1000) -> int:
    text = _param(request, "limit", required=False)
    if text is None:
        return default
    if not text.isdigit() or not 1 <= int(text) <= maximum:
        raise HostError(400, "InvalidRequest", f"limit must be an integer from 1 to {maximum}")
    return int(text)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        value = await request.json()
    except ValueError as exc:
        raise HostError(400, "InvalidRequest", "the body is not JSON") from exc
    if not isinstance(value, dict):
        raise HostError(400, "InvalidRequest", "the body is not a JSON object")
    return value


def _string(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise HostError(400, "InvalidRequest", f"{name} is required")
    return value


def _bearer(request: Request) -> str:
    values = request.headers.getlist("authorization")
    token = bearer_token(values[0]) if len(values) == 1 else None
    if token is None:
        raise HostError(401, "AuthenticationRequired", "send Authorization: Bearer <token>")
    return token


def _check_space_uri(space: str) -> str:
    try:
        return parse_space_uri(space).authority
    except BadRecord as exc:
        raise HostError(400, "InvalidRequest", exc.message) from exc


def _check_times(claims: dict[str, Any], max_lifetime: float) -> None:
    """iat/exp present, not expired, not from the future, not too long-lived."""
    iat, exp, now = jwt.numeric_date(claims, "iat"), jwt.numeric_date(claims, "exp"), time.time()
    if exp <= iat or exp - iat > max_lifetime or iat > now + SKEW:
        raise InvalidToken("the token's iat/exp are not acceptable")
    if exp < now - SKEW:
        raise ExpiredToken("the token has expired")


class Host:
    """What every fake host shares: a port, its did:web, a credential check for its DID, a delay."""

    service = ("#atproto_pds", "AtprotoPersonalDataServer")  # what its did:web document names it

    def __init__(self, net: Network, port: int) -> None:
        self.net = net
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.did = f"did:web:127.0.0.1%3A{port}"
        self.delay = 0.0  # seconds each response waits
        # One resolver per host: each host runs on its own event loop, and a resolver's in-flight
        # lookups belong to one loop. min_refresh 0: a rotated key is picked up at once.
        self.resolver = DidResolver(net.plc_url, min_refresh=0.0)
        self.credentials = SpaceCredentials(self.did, self.resolver, AuthState())

    def routes(self) -> list[tuple[str, str, Handler]]:
        """(method, NSID, handler) of each XRPC endpoint."""
        return []

    def did_document(self) -> dict[str, Any]:
        """This host's did:web document."""
        fragment, kind = self.service
        return {"@context": ["https://www.w3.org/ns/did/v1"], "id": self.did,
                "service": [{"id": fragment, "type": kind, "serviceEndpoint": self.url}]}

    def app(self) -> Starlette:
        """The ASGI app."""

        async def health(request: Request) -> Response:
            return JSONResponse({})

        async def did_json(request: Request) -> Response:
            return JSONResponse(self.did_document())

        routes = [Route("/xrpc/_health", health), Route("/.well-known/did.json", did_json)]
        routes += [Route(f"/xrpc/{nsid}", self._wrap(handler), methods=[method])
                   for method, nsid, handler in self.routes()]
        return Starlette(routes=routes)

    def _wrap(self, handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            if self.delay > 0:
                await asyncio.sleep(self.delay)
            try:
                return await handler(request)
            except HostError as exc:
                return JSONResponse({"error": exc.name, "message": exc.message}, status_code=exc.status)
            except EngramError as exc:  # the credential check's errors carry their XRPC name and status
                return JSONResponse({"error": xrpc_name(exc), "message": exc.message}, status_code=exc.status)

        return endpoint

    def live_space(self, uri: str) -> Space:
        """The space, or 404 SpaceNotFound when it never existed or was deleted (call under the lock)."""
        space = self.net.spaces.get(uri)
        if space is None or space.deleted:
            raise HostError(404, "SpaceNotFound", f"no space {uri}")
        return space


class PdsHost(Host):
    """A member's repo host: sessions, delegation tokens, and the space repos of its accounts."""

    def __init__(self, net: Network, port: int) -> None:
        super().__init__(net, port)
        self.session_key = PrivateKey.generate(P256)
        self._session_public = parse_public_key(self.session_key.did_key)

    def routes(self) -> list[tuple[str, str, Handler]]:
        """createSession, getDelegationToken, listRepoOps, getRepo."""
        return [("POST", "com.atproto.server.createSession", self.create_session),
                ("GET", "com.atproto.space.getDelegationToken", self.get_delegation_token),
                ("GET", "com.atproto.space.listRepoOps", self.list_repo_ops),
                ("GET", "com.atproto.space.getRepo", self.get_repo)]

    async def create_session(self, request: Request) -> Response:
        """`{identifier, password}` → an access token for an account of this host."""
        body = await _body(request)
        identifier, password = _string(body, "identifier"), _string(body, "password")
        with self.net.lock:
            account = next((a for a in self.net.accounts.values()
                            if a.pds == self.url and identifier in (a.did, a.handle)), None)
        if account is None or not hmac.compare_digest(password.encode(), account.password.encode()):
            raise HostError(401, "AuthenticationRequired", "Invalid identifier or password")
        now = int(time.time())
        claims = {"sub": account.did, "aud": self.did, "iat": now, "exp": now + SESSION_LIFETIME,
                  "jti": secrets.token_hex(16)}
        access = jwt.encode({"typ": ACCESS_TYP}, {**claims, "scope": "com.atproto.access"}, self.session_key)
        refresh = jwt.encode({"typ": "refresh+jwt"}, {**claims, "scope": "com.atproto.refresh"}, self.session_key)
        return JSONResponse({"accessJwt": access, "refreshJwt": refresh, "did": account.did,
                             "handle": account.handle, "active": True})

    async def get_delegation_token(self, request: Request) -> Response:
        """A token, signed by the account's #atproto key, that lets the space host identify the account."""
        session = jwt.decode(_bearer(request), typ=ACCESS_TYP)
        claims = session.claims
        if not session.verify(self._session_public) or claims.get("aud") != self.did \
                or claims.get("scope") != "com.atproto.access":
            raise InvalidToken("not an access token of this host")
        _check_times(claims, SESSION_LIFETIME)
        space = str(_param(request, "space"))
        authority = _check_space_uri(space)
        with self.net.lock:
            account = self.net.accounts.get(str(claims.get("sub")))
            if account is None or account.pds != self.url:
                raise InvalidToken("the session's account is not hosted here")
            key = account.key
        now = int(time.time())
        token = jwt.encode(
            {"typ": DELEGATION_TYP, "kid": "#atproto"},
            {"iss": account.did, "sub": space, "aud": f"{authority}#atproto_space_host", "iat": now,
             "exp": now + DELEGATION_LIFETIME, "jti": secrets.token_hex(16)},
            key)
        return JSONResponse({"token": token})

    def _repo(self, space_uri: str, did: str) -> tuple[Repo, Account]:
        """A member's repo in a live space hosted here; 404 otherwise (call under the lock)."""
        space = self.live_space(space_uri)
        account = self.net.accounts.get(did)
        repo = space.repos.get(did)
        if repo is None or repo.rev is None or account is None or account.pds != self.url \
                or did not in space.members:
            raise HostError(404, "RepoNotFound", f"no repo of {did} in {space_uri} on this host")
        return repo, account

    async def list_repo_ops(self, request: Request) -> Response:
        """`{ops, cursor?, commit?}`: ops after `since` in rev order, a fresh commit on the last page."""
        space, repo_did = str(_param(request, "space")), str(_param(request, "repo"))
        since, limit = _param(request, "since", required=False), _limit(request)
        await self.credentials.authenticate(request, space)
        with self.net.lock:
            repo, account = self._repo(space, repo_did)
            try:
                page, last = repo.ops_after(since, limit)
            except SinceNotFound as exc:
                raise HostError(400, "SinceNotFound", str(exc)) from exc
            ops = [_op_json(op, repo.value_of(op)) for op in page]
            _misreport(ops, account.faults)
            out: dict[str, Any] = {"ops": ops}
            if last:
                out["commit"] = commit_to_json(repo.commit(account.key, account.faults))
            else:
                out["cursor"] = page[-1].rev
        return JSONResponse(out)

    async def get_repo(self, request: Request) -> Response:
        """The repo CAR with a fresh commit."""
        space, repo_did = str(_param(request, "space")), str(_param(request, "repo"))
        await self.credentials.authenticate(request, space)
        with self.net.lock:
            repo, account = self._repo(space, repo_did)
            car = repo.car(repo.commit(account.key, account.faults))
        return Response(car, media_type="application/vnd.ipld.car")


def _op_json(op: LogOp, value: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"rev": op.rev, "collection": op.collection, "rkey": op.rkey, "cid": op.cid,
                           "prev": op.prev}
    if value is not None:
        out["value"] = value
    return out


def _misreport(ops: list[dict[str, Any]], faults: Faults) -> None:
    """Apply an armed value fault to a page that inlines values (a page without any leaves it armed)."""
    inlined = [op for op in ops if "value" in op]
    if not inlined:
        return
    if faults.omitted_values > 0:
        faults.omitted_values -= 1
        for op in inlined:
            del op["value"]
    elif faults.wrong_values > 0:
        faults.wrong_values -= 1
        value = inlined[0]["value"]
        inlined[0]["value"] = {**value, "text": f"{value.get('text', '')} (not what was written)"}


class AuthorityHost(Host):
    """The authority's space host: credentials for readers, the space's repos, notification sign-up."""

    service = ("#atproto_space_host", "AtprotoSpaceHost")

    def routes(self) -> list[tuple[str, str, Handler]]:
        """getSpaceCredential, listRepos, registerNotify."""
        return [("POST", "com.atproto.space.getSpaceCredential", self.get_space_credential),
                ("GET", "com.atproto.space.listRepos", self.list_repos),
                ("POST", "com.atproto.space.registerNotify", self.register_notify)]

    async def get_space_credential(self, request: Request) -> Response:
        """Delegation token + an RFC 9421 signature by a fresh key → a credential bound to that key."""
        token = jwt.decode(_bearer(request), typ=DELEGATION_TYP)
        claims, authority = token.claims, self.net.authority
        space, account = claims.get("sub"), claims.get("iss")
        if not isinstance(space, str) or not isinstance(account, str) or not is_did(account):
            raise InvalidToken("the delegation token needs iss (an account DID) and sub (a space)")
        asked = (await _body(request)).get("space")
        if asked is not None and asked != space:
            raise HostError(400, "InvalidRequest", "space is not the delegation token's sub")
        if claims.get("aud") != f"{authority.did}#atproto_space_host":
            raise InvalidToken("the delegation token is not addressed to this space host")
        if token.header.get("kid") not in ("#atproto", f"{account}#atproto"):
            raise InvalidToken("the delegation token must be signed with the account's #atproto key")
        _check_times(claims, MAX_DELEGATION_LIFETIME)
        holder = self._request_key(request)
        await self._check_account_signature(token, account)
        with self.net.lock:
            known = self.live_space(space)
            if account not in known.readers and account not in known.members:
                raise HostError(403, "Forbidden", f"{account} may not read {space}")
        credential = mint_credential(authority.credential_key, authority.did, space, holder.did_key,
                                     kid=authority.kid, lifetime=self.net.credential_lifetime)
        return JSONResponse({"credential": credential})

    def _request_key(self, request: Request) -> PublicKey:
        """The P-256 key named by `keyid` that signed `("authorization")`, the key to bind."""
        inputs, signatures = request.headers.getlist("signature-input"), request.headers.getlist("signature")
        if len(inputs) != 1 or len(signatures) != 1:
            raise HostError(401, "BadSpaceSignature", "sign the request (label atproto-space, keyid)")
        signature = httpsig.parse(inputs[0], signatures[0])
        keyid = signature.params.get("keyid")
        if signature.components != ("authorization",) or not isinstance(keyid, str):
            raise HostError(401, "BadSpaceSignature", 'the signature covers ("authorization") and names a keyid')
        try:
            key = parse_public_key(keyid)
        except BadKey as exc:
            raise HostError(401, "BadSpaceSignature", f"keyid: {exc}") from exc
        if key.alg != P256 or not key.verify(signature.base({"authorization": request.headers["authorization"]}),
                                             signature.signature):
            raise HostError(401, "BadSpaceSignature", "the signature does not verify with its P-256 keyid")
        return key

    async def _check_account_signature(self, token: jwt.Jwt, account: str) -> None:
        """The account's current #atproto key signed the token (resolving again once: it may have rotated)."""
        for fresh in (False, True):
            try:
                doc = await self.resolver.resolve(account, fresh=fresh)
            except ResolveError as exc:
                raise InvalidToken(f"{account} cannot be resolved: {exc}") from exc
            key = doc.key("#atproto")
            if key is not None and token.verify(key):
                return
        raise InvalidToken("the delegation token is not signed by the account's #atproto key")

    async def list_repos(self, request: Request) -> Response:
        """`{repos: [{did, rev}], cursor?}`: the members' repos, by DID."""
        space, cursor = str(_param(request, "space")), _param(request, "cursor", required=False)
        limit = _limit(request)
        await self.credentials.authenticate(request, space)
        with self.net.lock:
            known = self.live_space(space)
            repos = sorted((did, repo.rev) for did, repo in known.repos.items()
                           if did in known.members and repo.rev is not None and (cursor is None or did > cursor))
        out: dict[str, Any] = {"repos": [{"did": did, "rev": rev} for did, rev in repos[:limit]]}
        if len(repos) > limit:
            out["cursor"] = repos[limit - 1][0]
        return JSONResponse(out)

    async def register_notify(self, request: Request) -> Response:
        """`{space, service, endpoint}` → `{expiresAt}`; later writes are pushed to the endpoint."""
        body = await _body(request)
        space, service, endpoint = _string(body, "space"), _string(body, "service"), _string(body, "endpoint")
        await self.credentials.authenticate(request, space)
        if not is_did(service):
            raise HostError(400, "InvalidRequest", "service must be a DID")
        if not endpoint.startswith(("https://", "http://")):
            raise HostError(400, "InvalidRequest", "endpoint must be an http(s) URL")
        expires = time.time() + self.net.notify_lifetime
        with self.net.lock:
            self.live_space(space).registrations[service] = Registration(service, endpoint, expires)
        return JSONResponse({"expiresAt": format_datetime_ms(int(expires * 1000))})
