"""com.atproto.space.notifyCredentialRevoked: a space's authority tells us to refuse a credential.

The call is authenticated with a service-auth JWT from the authority itself (`lxm` = this
method); the revoked `jti` is refused until the credential would have expired anyway.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.requests import Request

from engram_index.engram.auth.credentials import SpaceCredentials
from engram_index.engram.auth.service_auth import ServiceAuth
from engram_index.bodies import read_body
from engram_index.errors import BadRecord, EngramError, InvalidInput, TooLarge, UnknownMethod
from engram_index.engram.records import parse_space_uri

NSID = "com.atproto.space.notifyCredentialRevoked"
MAX_BODY_BYTES = 16 * 1024


class NotTheAuthority(EngramError):
    """A caller who proved who it is, but is not the space's authority (the reference server's 403 Forbidden)."""

    code = "forbidden"
    status = 403


async def notify_credential_revoked(request: Request) -> dict[str, Any]:
    """Record the revocation of credential `jti` of `space`; answer `{}`."""
    credentials = request.app.state.authenticator
    if not isinstance(credentials, SpaceCredentials):
        raise UnknownMethod(f"{NSID} is not served: this service checks no credentials (--insecure-open)")
    if request.method != "POST":
        raise InvalidInput(f"{NSID} is a procedure: POST a JSON body")
    issuer = await ServiceAuth(credentials.service_did, credentials.resolver).verify(request, NSID)
    body = await json_body(request)
    space, jti, exp = body.get("space"), body.get("jti"), body.get("exp")
    if not isinstance(space, str) or not isinstance(jti, str) or not jti or len(jti) > 256:
        raise InvalidInput("the body needs space (a space URI) and jti (the credential's id)")
    try:
        authority = parse_space_uri(space).authority
    except BadRecord as exc:
        raise InvalidInput(exc.message) from exc
    if authority != issuer:
        raise NotTheAuthority("only the space's authority may revoke its credentials")
    policy = credentials.policy
    latest = time.time() + policy.max_lifetime + policy.skew
    until = latest if isinstance(exp, bool) or not isinstance(exp, (int, float)) else min(float(exp) + policy.skew, latest)
    credentials.state.revoke(issuer, jti, until)
    return {}


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object body, at most MAX_BODY_BYTES."""
    raw = await read_body(request, MAX_BODY_BYTES, TooLarge(f"the body is larger than {MAX_BODY_BYTES} bytes"))
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput("the body is not JSON") from exc
    if not isinstance(value, dict):
        raise InvalidInput("the body is not a JSON object")
    return value
