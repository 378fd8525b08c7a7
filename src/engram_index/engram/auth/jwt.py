"""Compact JWS tokens (JWTs) signed with ES256 or ES256K: strict decoding and minting.

Written here rather than taken from a JWT library because the checks are the point: the
algorithm must match the key named by the token's issuer, `none` and HMAC must be impossible
by construction, and every malformed part must become a clear InvalidToken. The crypto itself
is `cryptography`'s (through identity.keys).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from engram_index.engram.auth.errors import InvalidToken
from engram_index.engram.identity.keys import PrivateKey, PublicKey

MAX_TOKEN_BYTES = 8 * 1024
_B64URL = re.compile(r"^[A-Za-z0-9_-]*$")
SIGNING_ALGS = frozenset({"ES256", "ES256K"})


def b64url_decode(text: str, what: str) -> bytes:
    """Unpadded base64url → bytes; anything else (padding, other alphabets, bad length) is refused."""
    if not _B64URL.match(text) or len(text) % 4 == 1:
        raise InvalidToken(f"{what} is not unpadded base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise InvalidToken(f"{what} is not unpadded base64url") from exc


def b64url_encode(data: bytes) -> str:
    """Bytes → unpadded base64url."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class Jwt:
    """A decoded, not yet verified, JWT."""

    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes

    @property
    def alg(self) -> str:
        """The header's `alg` (checked to be ES256 or ES256K by `decode`)."""
        return str(self.header["alg"])

    def verify(self, key: PublicKey) -> bool:
        """Whether the token is signed by `key` with the algorithm its header names."""
        return key.alg == self.alg and key.verify(self.signing_input, self.signature)


def decode(token: str, *, typ: str | None) -> Jwt:
    """Split and parse a compact JWT; check `typ` (when given) and that `alg` is ES256/ES256K."""
    if len(token) > MAX_TOKEN_BYTES:
        raise InvalidToken(f"the token is longer than {MAX_TOKEN_BYTES} bytes")
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("the token is not a JWT (three base64url parts)")
    header = _json_object(b64url_decode(parts[0], "the token header"), "header")
    claims = _json_object(b64url_decode(parts[1], "the token payload"), "payload")
    signature = b64url_decode(parts[2], "the token signature")
    alg = header.get("alg")
    if alg not in SIGNING_ALGS:
        raise InvalidToken(f"token alg {str(alg)[:20]!r} is not allowed (ES256 or ES256K only)")
    if typ is not None and header.get("typ") != typ:
        raise InvalidToken(f"token typ must be {typ}")
    if "crit" in header:
        raise InvalidToken("token header has crit extensions this service does not understand")
    if len(signature) != 64:
        raise InvalidToken("token signature is not 64 bytes (r‖s)")
    return Jwt(header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), signature)


def encode(header: dict[str, Any], claims: dict[str, Any], key: PrivateKey) -> str:
    """Sign header and claims with `key` (its algorithm is put in the header)."""
    head = b64url_encode(json.dumps({**header, "alg": key.alg}, separators=(",", ":")).encode())
    body = b64url_encode(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = f"{head}.{body}".encode("ascii")
    return f"{head}.{body}.{b64url_encode(key.sign(signing_input))}"


def numeric_date(claims: dict[str, Any], name: str) -> float:
    """A required NumericDate claim (a JSON number, not a boolean or string)."""
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"token claim {name} must be a number of seconds")
    return float(value)


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidToken(f"the token {what} is not JSON") from exc
    if not isinstance(value, dict):
        raise InvalidToken(f"the token {what} is not a JSON object")
    return value
