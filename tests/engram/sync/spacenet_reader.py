"""The reading side of the sync wire, written the way a syncer reads, for testing the fake network:
resolve hosts from DID documents, get a credential, sign reads, fold ops, verify commits."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engram_index.engram.auth import httpsig, jwt
from engram_index.engram.auth.mint import SpaceClient
from engram_index.engram.auth.service_auth import ServiceAuth
from engram_index.engram.identity.did import DidDoc, parse_document
from engram_index.engram.identity.keys import P256, PrivateKey, PublicKey
from engram_index.engram.records import parse_space_uri
from engram_index.engram.sync.commit import SignedCommit
from engram_index.engram.sync.lthash import LtHash, element
from engram_index.engram.sync.verify import Op, commit_from_json
from engram_index.testkit.serve import serving
from engram_index.testkit.spacenet import SpaceNetwork
from engram_index.testkit.spacenet_repo import Account

SERVICE_DID = "did:web:indexer.test"
# One client for the whole suite: making an httpx client costs more than a loopback request.
HTTP = httpx.Client()


def resolve(net: SpaceNetwork, did: str) -> DidDoc:
    """A DID document, fetched from the network's directory (uncached, so rotations show at once)."""
    response = HTTP.get(f"{net.plc_url}/{did}")
    response.raise_for_status()
    return parse_document(did, response.content, 0.0)


def audience(url: str) -> str:
    """The did:web a reader signs for when calling `url` (a port as %3A<port>)."""
    return "did:web:" + urlsplit(url).netloc.replace(":", "%3A")


def space_host(net: SpaceNetwork, space: str) -> str:
    """The space host named by the authority's DID document."""
    doc = resolve(net, parse_space_uri(space).authority)
    url = doc.service("#atproto_space_host") or doc.service("#atproto_pds")
    assert url is not None
    return url


def repo_host(net: SpaceNetwork, did: str) -> tuple[str, PublicKey]:
    """A member's repo host and the #atproto key its commits must verify with."""
    doc = resolve(net, did)
    url, key = doc.service("#atproto_pds"), doc.key("#atproto")
    assert url is not None and key is not None
    return url, key


def delegation_token(account: Account, space: str) -> str:
    """createSession then getDelegationToken on the account's own PDS."""
    session = HTTP.post(f"{account.pds}/xrpc/com.atproto.server.createSession",
                         json={"identifier": account.handle, "password": account.password})
    session.raise_for_status()
    token = HTTP.get(f"{account.pds}/xrpc/com.atproto.space.getDelegationToken", params={"space": space},
                      headers={"authorization": f"Bearer {session.json()['accessJwt']}"})
    token.raise_for_status()
    return str(token.json()["token"])


def request_credential(host: str, token: str, key: PrivateKey, *, keyid: str | None = None) -> httpx.Response:
    """POST getSpaceCredential with the delegation token and an RFC 9421 signature by `key`."""
    values = {"authorization": f"Bearer {token}"}
    signature = httpsig.sign(key, values, ("authorization",), keyid=keyid or key.did_key)
    return HTTP.post(f"{host}/xrpc/com.atproto.space.getSpaceCredential", headers={**values, **signature})


@dataclass
class Reader:
    """A credential for one space and the P-256 key it is bound to; signs each read for its host."""

    net: SpaceNetwork
    space: str
    credential: str
    key: PrivateKey

    @classmethod
    def sign_in(cls, net: SpaceNetwork, account: Account, space: str) -> Reader:
        """The whole flow: session, delegation token, a fresh key, getSpaceCredential."""
        key = PrivateKey.generate(P256)
        response = request_credential(space_host(net, space), delegation_token(account, space), key)
        response.raise_for_status()
        credential = str(response.json()["credential"])
        assert jwt.decode(credential, typ="atproto-space-credential+jwt").claims["cnf"]["kid"] == key.did_key
        return cls(net, space, credential, key)

    def headers(self, url: str) -> dict[str, str]:
        """The credential headers of one read at `url`."""
        return SpaceClient(self.credential, self.key, audience(url), style="keyed").headers()

    def get(self, url: str, nsid: str, **params: str) -> httpx.Response:
        """A signed GET of an XRPC query."""
        return HTTP.get(f"{url}/xrpc/{nsid}", params={"space": self.space, **params}, headers=self.headers(url))

    def list_repos(self) -> list[dict[str, Any]]:
        """Every page of listRepos."""
        host, repos, cursor = space_host(self.net, self.space), [], None
        while True:
            page = self.get(host, "com.atproto.space.listRepos", limit="2",
                            **({"cursor": cursor} if cursor else {}))
            page.raise_for_status()
            repos += page.json()["repos"]
            cursor = page.json().get("cursor")
            if cursor is None:
                return repos

    def ops(self, did: str, since: str | None = None, limit: int = 100) -> tuple[list[Op], SignedCommit]:
        """Every page of listRepoOps after `since`, and the commit of the last page."""
        host, _ = repo_host(self.net, did)
        ops: list[Op] = []
        while True:
            response = self.get(host, "com.atproto.space.listRepoOps", repo=did, limit=str(limit),
                                **({"since": since} if since else {}))
            response.raise_for_status()
            page = response.json()
            ops += [Op.from_json(op) for op in page["ops"]]
            if "commit" in page:
                assert "cursor" not in page
                return ops, commit_from_json(page["commit"])
            since = page["cursor"]


def fold(state: LtHash, ops: list[Op]) -> LtHash:
    """Apply ops to a set hash as a syncer does: take out what each replaced, add what it wrote."""
    for op in ops:
        if op.prev is not None:
            state.remove(element(op.collection, op.rkey, op.prev))
        if op.cid is not None:
            state.add(element(op.collection, op.rkey, op.cid))
    return state


@dataclass
class Receiver:
    """A service's notification endpoint: keeps what arrives with a service-auth token it accepts."""

    url: str
    received: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (method, issuer, body)
    refused: list[str] = field(default_factory=list)

    def bodies(self, space: str, nsid: str = "com.atproto.space.notifyWrite") -> list[dict[str, Any]]:
        """What arrived for one space and method, in order."""
        return [body for method, _, body in self.received if method == nsid and body.get("space") == space]


@contextmanager
def receiver(net: SpaceNetwork) -> Iterator[Receiver]:
    """Serve a receiver for SERVICE_DID on loopback."""
    auth = ServiceAuth(SERVICE_DID, net.resolver())
    lock = threading.Lock()
    box: list[Receiver] = []

    def handler(nsid: str) -> Any:
        async def endpoint(request: Request) -> Response:
            token = request.headers.get("authorization", "").removeprefix("Bearer ")
            try:
                issuer = await auth.verify_token(token, nsid)
                if jwt.decode(token, typ=None).claims["aud"] != f"{SERVICE_DID}#atproto_space_syncer":
                    raise ValueError("not addressed to the syncer")
            except Exception as exc:
                with lock:
                    box[0].refused.append(repr(exc))
                return JSONResponse({"error": "AuthRequired"}, status_code=401)
            body = await request.json()
            with lock:
                box[0].received.append((nsid, issuer, body))
            return JSONResponse({})
        return endpoint

    methods = ("com.atproto.space.notifyWrite", "com.atproto.space.notifySpaceDeleted")
    app = Starlette(routes=[Route(f"/xrpc/{m}", handler(m), methods=["POST"]) for m in methods])
    with serving(app, probe="/") as url:
        box.append(Receiver(url))
        yield box[0]
