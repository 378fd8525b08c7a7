"""Public keys as AT Protocol names them (did:key, Multikey) and ECDSA checks on raw r‖s signatures.

Parsing of did:key and Multikey strings comes from the `atproto` SDK (atproto_crypto). The
verification itself calls `cryptography` directly, for two reasons the SDK cannot meet:
its verifier refuses high-S signatures, which RFC 9421 clients (Go's crypto/ecdsa among them)
produce half the time, and it rebuilds the key object on every call, which costs more than the
check itself on the hot path. A signature's malleability does not weaken authentication: no
replay cache here is keyed on signature bytes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from atproto_crypto.did import format_did_key, get_did_key, parse_did_key, parse_multikey
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

P256 = "ES256"
K256 = "ES256K"
_CURVES: dict[str, ec.EllipticCurve] = {P256: ec.SECP256R1(), K256: ec.SECP256K1()}
_ORDERS = {
    P256: 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551,
    K256: 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141,
}


class BadKey(ValueError):
    """A key string that is not a supported did:key or Multikey."""


@dataclass(frozen=True, slots=True)
class PublicKey:
    """An ECDSA public key with the JWT algorithm it signs with (ES256 or ES256K)."""

    alg: str
    key: ec.EllipticCurvePublicKey
    did_key: str

    def verify(self, data: bytes, signature: bytes) -> bool:
        """Whether `signature` (64 bytes r‖s, as JWS and RFC 9421 send it) signs `data` with SHA-256."""
        if len(signature) != 64:
            return False
        r = int.from_bytes(signature[:32], "big")
        s = int.from_bytes(signature[32:], "big")
        order = _ORDERS[self.alg]
        if not (0 < r < order and 0 < s < order):
            return False
        try:
            self.key.verify(encode_dss_signature(r, s), data, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return False
        return True


@functools.lru_cache(maxsize=4096)
def parse_public_key(did_key: str) -> PublicKey:
    """The key named by a `did:key:z…` string; cached, since the same keys come back on every request."""
    try:
        parsed = parse_did_key(did_key)
        return _public_key(parsed.jwt_alg, parsed.key_bytes, did_key)
    except Exception as exc:  # the SDK raises several unrelated types for bad input
        raise BadKey(f"not a P-256 or secp256k1 did:key: {did_key[:80]!r}") from exc


@functools.lru_cache(maxsize=4096)
def key_from_method(method_type: str, multibase: str) -> PublicKey:
    """The key of a DID document's verification method (Multikey or the 2019 key types); cached,
    since checking a Multikey decompresses its point (~0.06 ms, twice a request otherwise)."""
    try:
        did_key = get_did_key(method_type, multibase)
        if did_key is None:
            raise BadKey(f"unsupported verification method type {method_type!r}")
        if method_type == "Multikey":
            parse_multikey(multibase)
        return parse_public_key(did_key)
    except BadKey:
        raise
    except Exception as exc:
        raise BadKey(f"bad verification method key {multibase[:80]!r}") from exc


def _public_key(alg: str, point: bytes, did_key: str) -> PublicKey:
    if alg not in _CURVES:
        raise BadKey(f"unsupported key algorithm {alg}")
    return PublicKey(alg, ec.EllipticCurvePublicKey.from_encoded_point(_CURVES[alg], point), did_key)


@dataclass(frozen=True)
class PrivateKey:
    """An ECDSA signing key (for the test kit, dev credentials and our own sync client)."""

    alg: str
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def generate(cls, alg: str = P256) -> PrivateKey:
        """A fresh random key on the curve of `alg`."""
        return cls(alg, ec.generate_private_key(_CURVES[alg]))

    @classmethod
    def from_hex(cls, hex_scalar: str, alg: str = P256) -> PrivateKey:
        """The key whose secret scalar is this big-endian hex string."""
        return cls(alg, ec.derive_private_key(int(hex_scalar, 16), _CURVES[alg]))

    @classmethod
    def from_pem(cls, pem: bytes) -> PrivateKey:
        """A PEM (PKCS#8 or SEC1) P-256 or secp256k1 private key."""
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise BadKey("not an elliptic-curve private key")
        for alg, curve in _CURVES.items():
            if key.curve.name == curve.name:
                return cls(alg, key)
        raise BadKey(f"unsupported curve {key.curve.name}")

    def to_hex(self) -> str:
        """The secret scalar as 64 hex digits."""
        return f"{self.key.private_numbers().private_value:064x}"

    @property
    def did_key(self) -> str:
        """This key's public half as a did:key."""
        point = self.key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return str(format_did_key(self.alg, point))

    @property
    def multibase(self) -> str:
        """This key's public half as a Multikey `publicKeyMultibase` value."""
        return self.did_key.removeprefix("did:key:")

    def sign(self, data: bytes) -> bytes:
        """A low-S 64-byte r‖s ECDSA/SHA-256 signature, as atproto requires of its signers."""
        r, s = decode_dss_signature(self.key.sign(data, ec.ECDSA(hashes.SHA256())))
        order = _ORDERS[self.alg]
        if s > order // 2:
            s = order - s
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
