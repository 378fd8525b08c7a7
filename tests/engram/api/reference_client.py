"""The HTTP requests the reference Python client (haileyok/engram-garden, python/src/engram_garden/)
makes of an index service, rebuilt from its code for tests: it is not on PyPI, so it cannot be
imported. Each method names the client function whose request it reproduces: the same paths,
methods, parameters (lists repeated, values stringified), JSON bodies and headers (lowercase
names, the RFC 9421 signature over authorization and atproto-space-audience with no signature
parameters, r‖s with a low s in standard base64). Responses are parsed as the client parses them.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import httpx
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


class XrpcError(Exception):
    """A non-200 answer, read as the client's session.read_error reads it."""

    def __init__(self, status: int, name: str, message: str) -> None:
        super().__init__(f"{status} {name}: {message}")
        self.status, self.name, self.message = status, name, message


def did_key(key: ec.EllipticCurvePrivateKey) -> str:
    """space.did_key: multicodec 0x1200 + the compressed point, base58btc."""
    raw = b"\x80\x24" + key.public_key().public_bytes(serialization.Encoding.X962,
                                                      serialization.PublicFormat.CompressedPoint)
    n, out = int.from_bytes(raw, "big"), ""
    while n:
        n, r = divmod(n, 58)
        out = _B58[r] + out
    return "did:key:z" + "1" * (len(raw) - len(raw.lstrip(b"\0"))) + out


def sig_headers(key: ec.EllipticCurvePrivateKey, authorization: str, audience: str) -> dict[str, str]:
    """space.create_space_sig_headers for a credentialed request (an audience is set)."""
    sig_input = '("authorization" "atproto-space-audience")'
    base = "\n".join([f'"authorization": {authorization.strip()}', f'"atproto-space-audience": {audience.strip()}',
                      f'"@signature-params": {sig_input}']).encode()
    r, s = decode_dss_signature(key.sign(base, ec.ECDSA(hashes.SHA256())))
    if s > _P256_ORDER // 2:
        s = _P256_ORDER - s
    sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return {"authorization": authorization, "signature-input": f"atproto-space={sig_input}",
            "signature": f"atproto-space=:{base64.b64encode(sig).decode()}:", "atproto-space-audience": audience}


def params_of(params: dict[str, Any] | None) -> dict[str, Any] | None:
    """session._params: booleans as true/false, lists repeated, everything else str()."""
    if not params:
        return None
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, (list, tuple)):
            out[k] = [str(x) for x in v]
        elif v is not None:
            out[k] = str(v)
    return out


def appview_did_of(url: str) -> str:
    """settings.Settings.apply_defaults: the appview's DID is did:web of the URL's host (no port)."""
    return "did:web:" + str(urlparse(url).hostname)


@dataclass
class Agent:
    """agent.Agent for one space: its credential (as getSpaceCredential would return it) and key."""

    appview_url: str
    space: str
    credential: str
    key: ec.EllipticCurvePrivateKey
    appview_did: str = ""
    responses: list[tuple[str, Any]] = field(default_factory=list)  # (nsid, body) of every 200

    def __post_init__(self) -> None:
        self.appview_did = self.appview_did or appview_did_of(self.appview_url)

    def _do(self, method: str, nsid: str, params: dict[str, Any] | None, body: Any) -> Any:
        """spaceclient.Client._send + _do, with signed_headers' headers."""
        headers = sig_headers(self.key, "Atproto-Space " + self.credential, self.appview_did)
        resp = httpx.request(method, self.appview_url.rstrip("/") + "/xrpc/" + nsid, params=params_of(params),
                             json=body if body is not None else None, headers=headers, timeout=30)
        if resp.status_code != 200:
            raise read_error(resp)
        out = resp.json() if resp.content else None
        self.responses.append((nsid, out))
        return out

    def query(self, nsid: str, params: dict[str, Any]) -> dict[str, Any]:
        """agent.Agent._query (spaceclient.Client.query)."""
        return self._do("GET", nsid, params, None) or {}

    def warm(self) -> None:
        """agent.Agent.warm: POST warmSpace with {"space": ...} (spaceclient.Client.procedure)."""
        self._do("POST", "garden.engram.warmSpace", None, {"space": self.space})

    def register(self) -> dict[str, Any]:
        """registerSpace as its lexicon has a member call it: the same credentialed POST as warm."""
        return self._do("POST", "garden.engram.registerSpace", None, {"space": self.space}) or {}

    def recall(self, query: str, vector: str, model: str, digest: str, *, limit: int = 0, author: str = "",
               tags: list[str] | None = None, since: str = "", mode: str = "") -> dict[str, Any]:
        """agent.Agent.recall's searchMemories parameters (q, vector, model, modelDigest, filters);
        `mode` is the one parameter the reference server takes that the agent leaves out."""
        params: dict[str, Any] = {"space": self.space, "q": query, "vector": vector, "model": model,
                                  "modelDigest": digest}
        if limit:
            params["limit"] = min(max(limit, 1), 50)
        if author:
            params["author"] = author
        if since:
            params["since"] = since
        if tags:
            params["tags"] = tags
        if mode:
            params["mode"] = mode
            if mode == "keyword":
                del params["vector"], params["model"], params["modelDigest"]
        return self.query("garden.engram.searchMemories", params)

    def get(self, uri: str) -> dict[str, Any]:
        """agent.Agent.get."""
        return self.query("garden.engram.getMemory", {"space": self.space, "uri": uri})

    def list(self, limit: int = 0, cursor: str = "", author: str = "", tags: list[str] | None = None) -> dict[str, Any]:
        """agent.Agent.list."""
        params: dict[str, Any] = {"space": self.space}
        if limit:
            params["limit"] = min(max(limit, 1), 100)
        if cursor:
            params["cursor"] = cursor
        if author:
            params["author"] = author
        if tags:
            params["tags"] = tags
        return self.query("garden.engram.listMemories", params)

    def indexing(self) -> str:
        """agent.Agent.indexing: getSpaceStatus's access.state ("" when the service does not say)."""
        st = self.query("garden.engram.getSpaceStatus", {"space": self.space})
        return str((st.get("access") or {}).get("state", ""))


def read_error(resp: httpx.Response) -> XrpcError:
    """session.read_error."""
    name, message = "", ""
    try:
        body = resp.json()
        if isinstance(body, dict):
            name, message = str(body.get("error", "")), str(body.get("message", ""))
    except ValueError:
        pass
    if not name:
        name, message = resp.reason_phrase or str(resp.status_code), resp.text[: 64 << 10].strip()
    return XrpcError(resp.status_code, name, message)


def grant_url(appview_url: str) -> str:
    """manage.ManageMixin._grant_url: describeService, unauthenticated, its grantUrl."""
    resp = httpx.get(appview_url.rstrip("/") + "/xrpc/garden.engram.describeService")
    assert resp.status_code == 200, resp.text
    return str(resp.json().get("grantUrl", ""))


# The memoryView fields agent.Memory.from_view reads.
MEMORY_FIELDS = ("uri", "author", "text", "tags", "createdAt", "cid", "indexedAt")
