"""Keys, JWTs and RFC 9421 signatures agree with the Go implementation's interop vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engram_index.engram.auth import httpsig, jwt
from engram_index.engram.auth.errors import BadSpaceSignature, InvalidToken
from engram_index.engram.identity.keys import K256, P256, BadKey, PrivateKey, parse_public_key


@pytest.fixture(scope="module")
def vectors(shared_dir: Path) -> dict[str, Any]:
    return json.loads((shared_dir / "data" / "interop" / "engram-go-vectors.json").read_text())


def test_the_interop_private_key_gives_the_interop_did_key(vectors: dict[str, Any]) -> None:
    assert PrivateKey.from_hex(vectors["privateKeyHex"]).did_key == vectors["didKey"]


def test_every_interop_request_signature_verifies_from_its_headers(vectors: dict[str, Any]) -> None:
    key = parse_public_key(vectors["didKey"])
    for case in vectors["sigs"]:
        headers = case["headers"]
        sig = httpsig.parse(headers["signature-input"], headers["signature"])
        assert key.verify(sig.base(headers), sig.signature)
        assert sig.params.get("keyid", vectors["didKey"]) == vectors["didKey"]


def test_an_interop_signature_fails_when_any_covered_header_changes(vectors: dict[str, Any]) -> None:
    key = parse_public_key(vectors["didKey"])
    headers = vectors["sigs"][1]["headers"]
    sig = httpsig.parse(headers["signature-input"], headers["signature"])
    for name in sig.components:
        assert not key.verify(sig.base({**headers, name: headers[name] + "x"}), sig.signature)


def test_our_signatures_rebuild_the_same_base_as_the_go_signer(vectors: dict[str, Any]) -> None:
    key = PrivateKey.from_hex(vectors["privateKeyHex"])
    case = vectors["sigs"][2]["headers"]
    ours = httpsig.sign(key, case, ("authorization", "atproto-space-audience"))
    assert ours["signature-input"] == case["signature-input"]
    sig = httpsig.parse(ours["signature-input"], ours["signature"])
    assert parse_public_key(vectors["didKey"]).verify(sig.base(case), sig.signature)


@pytest.mark.parametrize("alg", [P256, K256])
def test_a_key_signs_low_s_and_verifies_high_s_too(alg: str) -> None:
    key = PrivateKey.generate(alg)
    public = parse_public_key(key.did_key)
    signature = key.sign(b"data")
    from engram_index.engram.identity.keys import _ORDERS

    order = _ORDERS[alg]
    s = int.from_bytes(signature[32:], "big")
    assert s <= order // 2
    high = signature[:32] + (order - s).to_bytes(32, "big")
    assert public.verify(b"data", signature) and public.verify(b"data", high)
    assert not public.verify(b"other", signature)


@pytest.mark.parametrize("text", ["did:key:zQ3shNope", "did:web:example.com", "z6Mk", "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"])
def test_keys_that_are_not_p256_or_secp256k1_did_keys_are_refused(text: str) -> None:
    with pytest.raises(BadKey):
        parse_public_key(text)


@pytest.mark.parametrize("token", ["", "a.b", "a.b.c.d", "e30.e30.", "e30=.e30.AAAA", "@@.e30.AAAA"])
def test_malformed_jwts_are_invalid_tokens(token: str) -> None:
    with pytest.raises(InvalidToken):
        jwt.decode(token, typ=None)


def test_a_minted_jwt_round_trips_and_verifies_only_with_its_key() -> None:
    key = PrivateKey.generate(K256)
    token = jwt.decode(jwt.encode({"typ": "JWT"}, {"a": 1}, key), typ="JWT")
    assert token.alg == K256 and token.claims == {"a": 1}
    assert token.verify(parse_public_key(key.did_key))
    assert not token.verify(parse_public_key(PrivateKey.generate(K256).did_key))
    assert not token.verify(parse_public_key(PrivateKey.generate(P256).did_key))


@pytest.mark.parametrize(("inputs", "sigs"), [
    ('atproto-space=("authorization")', "other=:AAAA:"),
    ("atproto-space=authorization", "atproto-space=:AAAA:"),
    ('atproto-space=("authorization";x=1)', "atproto-space=:AAAA:"),
    ('atproto-space=("authorization")', "atproto-space=AAAA"),
    ("((((", "atproto-space=:AAAA:"),
])
def test_malformed_signature_headers_are_bad_signatures(inputs: str, sigs: str) -> None:
    with pytest.raises(BadSpaceSignature):
        httpsig.parse(inputs, sigs)
