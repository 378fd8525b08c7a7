"""Signed commits of permissioned repos: the deniable signature over a context and the MAC that
binds the set hash to it (permissioned-data proposal 0016, "Commit signature").

    ctx = "atproto-space-v1" || u16be-prefixed space, author, rev, ikm
    sig = sign(ctx) with the author's #atproto key (ES256 or ES256K, 64-byte r‖s)
    mac = HMAC-SHA256(key = HKDF-Expand-SHA256(prk = ikm, info = ctx, 32), hash)
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from engram_index.engram.identity.keys import PrivateKey, PublicKey

TAG = b"atproto-space-v1"
VERSION = 1


def context(space: str, author: str, rev: str, ikm: bytes) -> bytes:
    """The domain-separated context that is signed and keys the MAC."""
    out = bytearray(TAG)
    for field in (space.encode(), author.encode(), rev.encode(), ikm):
        if len(field) > 0xFFFF:
            raise ValueError("a commit context field is longer than 65535 bytes")
        out += struct.pack(">H", len(field)) + field
    return bytes(out)


def mac(ikm: bytes, ctx: bytes, digest: bytes) -> bytes:
    """The MAC binding a set-hash digest to a commit context."""
    key = HKDFExpand(hashes.SHA256(), 32, ctx).derive(ikm)
    return hmac.new(key, digest, hashlib.sha256).digest()


@dataclass(frozen=True)
class SignedCommit:
    """`com.atproto.space.defs#signedCommit`."""

    ver: int
    hash: bytes
    ikm: bytes
    sig: bytes
    mac: bytes
    rev: str

    @classmethod
    def make(cls, key: PrivateKey, space: str, author: str, rev: str, digest: bytes) -> SignedCommit:
        """Sign a repo's state digest at revision `rev` (a fresh ikm each time, as the proposal says)."""
        ikm = secrets.token_bytes(32)
        ctx = context(space, author, rev, ikm)
        return cls(VERSION, digest, ikm, key.sign(ctx), mac(ikm, ctx, digest), rev)

    def verify(self, key: PublicKey, space: str, author: str) -> str | None:
        """None when the commit is authentic for this space and author; else what is wrong."""
        if self.ver != VERSION:
            return f"unknown commit version {self.ver}"
        if len(self.hash) != 32 or len(self.ikm) != 32:
            return "a commit's hash and ikm are 32 bytes"
        ctx = context(space, author, self.rev, self.ikm)
        if not key.verify(ctx, self.sig):
            return "the commit signature does not verify with the author's key"
        if not hmac.compare_digest(mac(self.ikm, ctx, self.hash), self.mac):
            return "the commit MAC does not match its hash"
        return None

    def to_ipld(self) -> dict[str, Any]:
        """The DAG-CBOR data model form (bytes as bytes)."""
        return {"ver": self.ver, "hash": self.hash, "ikm": self.ikm, "sig": self.sig, "mac": self.mac,
                "rev": self.rev}

    @classmethod
    def from_ipld(cls, value: Any) -> SignedCommit:
        """Parse the data model form; raises ValueError when fields are missing or mistyped."""
        if not isinstance(value, dict):
            raise ValueError("a signed commit is a map")
        try:
            fields = {name: value[name] for name in ("ver", "hash", "ikm", "sig", "mac", "rev")}
        except KeyError as exc:
            raise ValueError(f"the signed commit has no {exc.args[0]}") from exc
        if not isinstance(fields["ver"], int) or not isinstance(fields["rev"], str):
            raise ValueError("the signed commit's ver or rev has the wrong type")
        for name in ("hash", "ikm", "sig", "mac"):
            if not isinstance(fields[name], bytes):
                raise ValueError(f"the signed commit's {name} is not bytes")
        return cls(**fields)
