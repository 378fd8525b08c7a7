"""The client side of space credentials: what an authority mints and how a member signs a request.

Used by the test kit, by `engram-index dev-credential`, and by our own sync client.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from engram_index.engram.identity.keys import PrivateKey
from engram_index.engram.auth import httpsig, jwt
from engram_index.engram.auth.credentials import AUDIENCE_HEADER, CREDENTIAL_TYP

COMPONENTS = ("authorization", AUDIENCE_HEADER)


def mint_credential(
    authority_key: PrivateKey,
    authority: str,
    space: str,
    holder: str,
    *,
    lifetime: int = 600,
    now: float | None = None,
    kid: str | None = "#atproto_space",
    jti: str | None = None,
    extra_header: dict[str, object] | None = None,
    extra_claims: dict[str, object] | None = None,
) -> str:
    """A space credential for `space`, signed by its `authority`, bound to the holder's did:key."""
    issued = int(time.time() if now is None else now)
    header: dict[str, object] = {"typ": CREDENTIAL_TYP}
    if kid is not None:
        header["kid"] = kid
    claims: dict[str, object] = {
        "iss": authority, "sub": space, "iat": issued, "exp": issued + lifetime,
        "jti": jti or secrets.token_hex(16), "cnf": {"kid": holder},
    }
    return jwt.encode({**header, **(extra_header or {})}, {**claims, **(extra_claims or {})}, authority_key)


@dataclass
class SpaceClient:
    """A member's signer: holds a credential and the P-256 key it is bound to."""

    credential: str
    key: PrivateKey
    audience: str
    style: str = "bare"  # "bare": no signature parameters; "keyed": keyid and alg
    created: bool = False
    nonce: bool = False
    expires_in: int | None = None

    def headers(self, *, now: float | None = None) -> dict[str, str]:
        """The four headers of one signed request."""
        values = {"authorization": f"Atproto-Space {self.credential}", AUDIENCE_HEADER: self.audience}
        stamp = int(time.time() if now is None else now)
        keyed = self.style == "keyed"
        signature = httpsig.sign(
            self.key, values, COMPONENTS,
            keyid=self.key.did_key if keyed else None,
            alg=httpsig.ECDSA_P256 if keyed else None,
            created=stamp if self.created else None,
            expires=stamp + self.expires_in if self.expires_in is not None else None,
            nonce=secrets.token_urlsafe(16) if self.nonce else None,
        )
        return {**values, **signature}


def load_private_key(text: str, alg: str) -> PrivateKey:
    """A key from a file's text: PEM (P-256 or secp256k1), or the secret scalar as 64 hex digits."""
    stripped = text.strip()
    if stripped.startswith("-----BEGIN"):
        return PrivateKey.from_pem(stripped.encode())
    if len(stripped) == 64 and all(ch in "0123456789abcdefABCDEF" for ch in stripped):
        return PrivateKey.from_hex(stripped, alg)
    raise ValueError("the key file must hold a PEM private key or 64 hex digits")


def curl_line(url: str, headers: dict[str, str], params: dict[str, str]) -> str:
    """A copy-pasteable curl command for a GET with these headers and query parameters."""
    from shlex import quote

    parts = ["curl", "-sS", "--get", quote(url)]
    for name, value in params.items():
        parts += ["--data-urlencode", quote(f"{name}={value}")]
    for name, value in headers.items():
        parts += ["-H", quote(f"{name}: {value}")]
    return " ".join(parts)
