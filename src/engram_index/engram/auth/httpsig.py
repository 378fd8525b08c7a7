"""RFC 9421 HTTP message signatures over request headers: parsing, the signature base, signing.

Structured fields are parsed by `http-sfv` (RFC 8941); the signature base and the policy
(which label, which components, which parameters) are ours.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from http_sfv.dictionary import Dictionary
from http_sfv.item import InnerList, Item

from engram_index.engram.auth.errors import BadSpaceSignature
from engram_index.engram.identity.keys import PrivateKey

LABEL = "atproto-space"
ECDSA_P256 = "ecdsa-p256-sha256"
MAX_HEADER_BYTES = 4096


@dataclass(frozen=True, slots=True)
class SignatureInput:
    """One labelled signature from a request: covered components, parameters and the signature bytes."""

    components: tuple[str, ...]
    params: dict[str, object]
    params_value: str
    signature: bytes

    def base(self, values: dict[str, str]) -> bytes:
        """The signature base (RFC 9421 §2.5) of these components with their header values."""
        lines = [f'"{name}": {values[name].strip()}' for name in self.components]
        lines.append(f'"@signature-params": {self.params_value}')
        return "\n".join(lines).encode("utf-8")


def parse(signature_input: str, signature: str, label: str = LABEL) -> SignatureInput:
    """The signature labelled `label` in a request's Signature-Input and Signature headers."""
    if len(signature_input) > MAX_HEADER_BYTES or len(signature) > MAX_HEADER_BYTES:
        raise BadSpaceSignature("the signature headers are too long")
    inputs, sigs = Dictionary(), Dictionary()
    try:
        inputs.parse(signature_input.encode("ascii"))
        sigs.parse(signature.encode("ascii"))
    except (ValueError, UnicodeEncodeError) as exc:
        raise BadSpaceSignature("Signature-Input or Signature is not a structured-field dictionary") from exc
    if label not in inputs or label not in sigs:
        raise BadSpaceSignature(f"no signature labelled {label}")
    members = inputs[label]
    if not isinstance(members, InnerList):
        raise BadSpaceSignature(f"Signature-Input {label} is not an inner list of components")
    components: list[str] = []
    for item in members:
        if not isinstance(item.value, str) or item.params:
            raise BadSpaceSignature("covered components must be plain header names")
        components.append(item.value)
    sig_item = sigs[label]
    if not isinstance(sig_item, Item) or not isinstance(sig_item.value, bytes):
        raise BadSpaceSignature(f"Signature {label} is not a byte sequence")
    params = {str(k): v for k, v in members.params.items()}
    return SignatureInput(tuple(components), params, str(members), bytes(sig_item.value))


def sign(
    key: PrivateKey,
    values: dict[str, str],
    components: tuple[str, ...],
    *,
    keyid: str | None = None,
    alg: str | None = None,
    created: int | None = None,
    expires: int | None = None,
    nonce: str | None = None,
    label: str = LABEL,
) -> dict[str, str]:
    """The Signature-Input and Signature headers signing `components` of `values` with `key`."""
    inner = InnerList([Item(name) for name in components])
    for name, value in (("created", created), ("expires", expires), ("keyid", keyid),
                        ("alg", alg), ("nonce", nonce)):
        if value is not None:
            inner.params[name] = value
    params_value = str(inner)
    parsed = SignatureInput(tuple(components), {}, params_value, b"")
    signature = key.sign(parsed.base(values))
    return {
        "signature-input": f"{label}={params_value}",
        "signature": f"{label}=:{base64.b64encode(signature).decode('ascii')}:",
    }


def decode_signature_header(text: str) -> bytes:
    """The bytes of a `label=:base64:` value (for tests that tamper with signatures)."""
    try:
        return base64.b64decode(text.split("=", 1)[1].strip(":"), validate=True)
    except (IndexError, binascii.Error) as exc:
        raise BadSpaceSignature("not a signature header") from exc
