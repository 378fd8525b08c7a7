"""Attacks on the space-credential check, each refused with 401 and its error name, over real HTTP;
and the valid requests, in both signature styles and both curves, accepted."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from engram_index.engram.auth import httpsig, jwt
from engram_index.engram.auth.credentials import CREDENTIAL_TYP
from engram_index.engram.auth.mint import COMPONENTS, SpaceClient, mint_credential
from engram_index.engram.auth.service_auth import mint_service_auth
from engram_index.engram.identity.keys import K256, P256, PrivateKey
from engram_index.testkit.authority import SpaceAuthority

from .network import SERVICE_DID, Network, network


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    with network(tmp_path_factory.mktemp("data")) as n:
        yield n


def search(net: Network, headers: dict[str, str] | list[tuple[str, str]], space: str | None = None) -> httpx.Response:
    return httpx.get(f"{net.url}/xrpc/garden.engram.searchMemories",
                     params={"space": space or net.p256.space(), "q": "server", "mode": "keyword"}, headers=headers)


@dataclass
class Ctx:
    """What an attack starts from: the network, a member's key and a valid credential for the space."""

    net: Network
    key: PrivateKey
    space: str

    @property
    def authority(self) -> SpaceAuthority:
        return self.net.p256

    def credential(self, **kwargs: object) -> str:
        return self.authority.credential(self.space, self.key, **kwargs)

    def signed(self, token: str, *, key: PrivateKey | None = None, audience: str = SERVICE_DID,
               **params: object) -> dict[str, str]:
        values = {"authorization": f"Atproto-Space {token}", "atproto-space-audience": audience}
        return {**values, **httpsig.sign(key or self.key, values, COMPONENTS, **params)}  # type: ignore[arg-type]


def raw_token(header: dict[str, object], claims: dict[str, object], sign: Callable[[bytes], bytes]) -> str:
    """A JWT with exactly this header (no alg filled in), signed by `sign`."""
    head = jwt.b64url_encode(json.dumps(header).encode())
    body = jwt.b64url_encode(json.dumps(claims).encode())
    return f"{head}.{body}.{jwt.b64url_encode(sign(f'{head}.{body}'.encode()))}"


def claims(c: Ctx, **changes: object) -> dict[str, object]:
    now = int(time.time())
    base: dict[str, object] = {"iss": c.authority.did, "sub": c.space, "iat": now, "exp": now + 600,
                               "jti": "j-" + str(now), "cnf": {"kid": c.key.did_key}}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def header(c: Ctx, **changes: object) -> dict[str, object]:
    base: dict[str, object] = {"typ": CREDENTIAL_TYP, "alg": "ES256", "kid": "#atproto_space"}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def by_authority(c: Ctx) -> Callable[[bytes], bytes]:
    return c.authority.credential_key.sign


def tamper_payload(token: str, **changes: object) -> str:
    head, body, sig = token.split(".")
    payload = json.loads(jwt.b64url_decode(body, "x"))
    payload.update(changes)
    return f"{head}.{jwt.b64url_encode(json.dumps(payload).encode())}.{sig}"


def flip_signature(headers: dict[str, str]) -> dict[str, str]:
    raw = bytearray(httpsig.decode_signature_header(headers["signature"]))
    raw[10] ^= 1
    return {**headers, "signature": f"atproto-space=:{base64.b64encode(bytes(raw)).decode()}:"}


ATTACKER = PrivateKey.generate(P256)
OTHER = PrivateKey.generate(P256)

# name → (request headers made from a context, expected error name)
ATTACKS: dict[str, tuple[Callable[[Ctx], dict[str, str] | list[tuple[str, str]]], str]] = {
    "no credentials at all": (lambda c: {}, "AuthRequired"),
    "a Bearer token instead of Atproto-Space": (
        lambda c: {**c.signed(c.credential()), "authorization": "Bearer " + c.credential()}, "AuthRequired"),
    "the Atproto-Space scheme with no token": (
        lambda c: {**c.signed(c.credential()), "authorization": "Atproto-Space"}, "AuthRequired"),
    "two Authorization headers": (
        lambda c: list(c.signed(c.credential()).items()) + [("authorization", "Atproto-Space x.y.z")], "InvalidToken"),
    "no audience header": (
        lambda c: {k: v for k, v in c.signed(c.credential()).items() if k != "atproto-space-audience"},
        "BadSpaceAudience"),
    "an audience that is another service": (
        lambda c: c.signed(c.credential(), audience="did:web:other.example"), "BadSpaceAudience"),
    "an audience with a fragment": (
        lambda c: c.signed(c.credential(), audience=SERVICE_DID + "#atproto_space"), "BadSpaceAudience"),
    "two audience headers": (
        lambda c: list(c.signed(c.credential()).items()) + [("atproto-space-audience", SERVICE_DID)],
        "BadSpaceAudience"),
    "an expired credential": (lambda c: c.signed(c.credential(now=time.time() - 700)), "ExpiredToken"),
    "a credential not valid yet": (lambda c: c.signed(c.credential(now=time.time() + 60)), "InvalidToken"),
    "a credential living longer than an hour": (lambda c: c.signed(c.credential(lifetime=3601)), "InvalidToken"),
    "a credential that expires before it was issued": (
        lambda c: c.signed(raw_token(header(c), claims(c, exp=int(time.time()) - 1), by_authority(c))),
        "InvalidToken"),
    "a credential for another space of the same authority": (
        lambda c: c.signed(c.authority.credential(c.authority.space("other"), c.key)), "InvalidToken"),
    "a credential whose iss is another authority": (
        lambda c: c.signed(raw_token(header(c), claims(c, iss=c.net.k256.did), by_authority(c))), "InvalidToken"),
    "a credential minted by another authority for its own space, sent for ours": (
        lambda c: c.signed(c.net.k256.credential(c.net.k256.space(), c.key)), "InvalidToken"),
    "a forged token signature": (
        lambda c: c.signed(raw_token(header(c), claims(c), lambda data: bytes(64))), "InvalidToken"),
    "a token signed by the attacker's key": (
        lambda c: c.signed(raw_token(header(c), claims(c), ATTACKER.sign)), "InvalidToken"),
    "a stolen credential whose cnf.kid is swapped for the attacker's key": (
        lambda c: c.signed(tamper_payload(c.credential(), cnf={"kid": ATTACKER.did_key}), key=ATTACKER),
        "InvalidToken"),
    "a stolen credential whose sub is swapped": (
        lambda c: c.signed(tamper_payload(c.authority.credential(c.authority.space("x"), c.key), sub=c.space)),
        "InvalidToken"),
    "alg none": (
        lambda c: c.signed(raw_token(header(c, alg="none"), claims(c), lambda data: b"")), "InvalidToken"),
    "alg HS256 keyed with the authority's public key": (
        lambda c: c.signed(raw_token(header(c, alg="HS256"), claims(c), lambda data: hmac.new(
            c.authority.credential_key.multibase.encode(), data, hashlib.sha256).digest())), "InvalidToken"),
    "alg ES256K on a P-256 key (algorithm confusion)": (
        lambda c: c.signed(raw_token(header(c, alg="ES256K"), claims(c), by_authority(c))), "InvalidToken"),
    "alg RS256": (lambda c: c.signed(raw_token(header(c, alg="RS256"), claims(c), by_authority(c))), "InvalidToken"),
    "no typ": (lambda c: c.signed(raw_token(header(c, typ=None), claims(c), by_authority(c))), "InvalidToken"),
    "a delegation token's typ": (
        lambda c: c.signed(raw_token(header(c, typ="atproto-space-delegation+jwt"), claims(c), by_authority(c))),
        "InvalidToken"),
    "kid naming the repo key when the authority has a space key": (
        lambda c: c.signed(c.authority.credential(c.space, c.key, kid="#atproto")), "InvalidToken"),
    "a critical header extension": (
        lambda c: c.signed(raw_token(header(c, crit=["x"]), claims(c), by_authority(c))), "InvalidToken"),
    "no jti": (lambda c: c.signed(raw_token(header(c), claims(c, jti=None), by_authority(c))), "InvalidToken"),
    "no cnf": (lambda c: c.signed(raw_token(header(c), claims(c, cnf=None), by_authority(c))), "InvalidToken"),
    "cnf.kid that is not a did:key": (
        lambda c: c.signed(raw_token(header(c), claims(c, cnf={"kid": "did:plc:abc"}), by_authority(c))),
        "InvalidToken"),
    "cnf.kid that is a secp256k1 key": (
        lambda c: c.signed(raw_token(header(c), claims(c, cnf={"kid": PrivateKey.generate(K256).did_key}),
                                     by_authority(c))), "InvalidToken"),
    "iat as a string": (
        lambda c: c.signed(raw_token(header(c), claims(c, iat=str(int(time.time()))), by_authority(c))),
        "InvalidToken"),
    "a truncated token": (lambda c: c.signed(".".join(c.credential().split(".")[:2])), "InvalidToken"),
    "a token that is not base64url": (lambda c: c.signed("abc$.def!.ghi"), "InvalidToken"),
    "a token with base64 padding": (
        lambda c: c.signed(".".join(p + "==" for p in c.credential().split("."))), "InvalidToken"),
    "a token header that is not JSON": (
        lambda c: c.signed(jwt.b64url_encode(b"{nope") + "." + c.credential().split(".", 1)[1]), "InvalidToken"),
    "a token payload that is a JSON array": (
        lambda c: c.signed(raw_token(header(c), [1, 2], by_authority(c))), "InvalidToken"),  # type: ignore[arg-type]
    "a 9 KiB token": (lambda c: c.signed("a" * 9000 + ".b.c"), "InvalidToken"),
    "an authority the directory does not know": (
        lambda c: c.signed(mint_credential(OTHER, "did:plc:unknownunknownunknown234",
                                           "at://did:plc:unknownunknownunknown234/space/garden.engram.space/main",
                                           c.key.did_key)), "InvalidToken"),
    "no request signature": (
        lambda c: {"authorization": f"Atproto-Space {c.credential()}", "atproto-space-audience": SERVICE_DID},
        "BadSpaceSignature"),
    "Signature-Input without Signature": (
        lambda c: {k: v for k, v in c.signed(c.credential()).items() if k != "signature"}, "BadSpaceSignature"),
    "two Signature headers": (
        lambda c: list(c.signed(c.credential()).items()) + [("signature", "atproto-space=:AAAA:")],
        "BadSpaceSignature"),
    "a signature over authorization only": (
        lambda c: {**c.signed(c.credential()), **httpsig.sign(
            c.key, {"authorization": f"Atproto-Space {c.credential()}"}, ("authorization",))}, "BadSpaceSignature"),
    "a signature over other components too": (
        lambda c: _with_extra_component(c), "BadSpaceSignature"),
    "a signature under another label": (
        lambda c: {**c.signed(c.credential()), **httpsig.sign(
            c.key, {"authorization": f"Atproto-Space {c.credential()}", "atproto-space-audience": SERVICE_DID},
            COMPONENTS, label="sig1")}, "BadSpaceSignature"),
    "a request signed by a key other than cnf.kid": (
        lambda c: c.signed(c.credential(), key=ATTACKER), "BadSpaceSignature"),
    "keyid naming another key": (
        lambda c: c.signed(c.credential(), keyid=OTHER.did_key), "BadSpaceSignature"),
    "an alg parameter other than ecdsa-p256-sha256": (
        lambda c: c.signed(c.credential(), alg="rsa-pss-sha512"), "BadSpaceSignature"),
    "a flipped bit in the request signature": (
        lambda c: flip_signature(c.signed(c.credential())), "BadSpaceSignature"),
    "a Signature header that is not a structured field": (
        lambda c: {**c.signed(c.credential()), "signature": "atproto-space=:not base64:"}, "BadSpaceSignature"),
    "a signature created in the future": (
        lambda c: c.signed(c.credential(), created=int(time.time()) + 60), "BadSpaceSignature"),
    "a signature created ten minutes ago": (
        lambda c: c.signed(c.credential(), created=int(time.time()) - 600), "BadSpaceSignature"),
    "a signature that has expired": (
        lambda c: c.signed(c.credential(), expires=int(time.time()) - 30), "BadSpaceSignature"),
    "an audience changed after signing": (
        lambda c: {**c.signed(c.credential(), audience="did:web:other.example"), "atproto-space-audience": SERVICE_DID},
        "BadSpaceSignature"),
    "a credential swapped after signing": (
        lambda c: {**c.signed(c.credential(jti="first")), "authorization": f"Atproto-Space {c.credential(jti='second')}"},
        "BadSpaceSignature"),
}


def _with_extra_component(c: Ctx) -> dict[str, str]:
    values = {"authorization": f"Atproto-Space {c.credential()}", "atproto-space-audience": SERVICE_DID,
              "x-extra": "1"}
    return {**values, **httpsig.sign(c.key, values, (*COMPONENTS, "x-extra"))}


def test_the_attack_table_has_at_least_forty_attacks() -> None:
    assert len(ATTACKS) >= 40


@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_attack_is_refused_with_401_and_its_error_name(net: Network, name: str) -> None:
    make, error = ATTACKS[name]
    response = search(net, make(Ctx(net, PrivateKey.generate(P256), net.p256.space())))
    assert (response.status_code, response.json()["error"]) == (401, error), response.json()
    assert "Traceback" not in response.text


def test_a_replayed_nonce_is_refused_the_second_time(net: Network) -> None:
    member = net.p256.member(net.p256.space(), SERVICE_DID)
    member.nonce = True
    headers = member.headers()
    assert search(net, headers).status_code == 200
    replay = search(net, headers)
    assert (replay.status_code, replay.json()["error"]) == (401, "BadSpaceSignature")
    assert search(net, member.headers()).status_code == 200  # a fresh nonce passes


def test_a_revoked_credential_is_refused_after_the_authority_says_so(net: Network) -> None:
    member = net.p256.member(net.p256.space(), SERVICE_DID)
    headers = member.headers()  # the same signed headers before and after: what verified is not taken on trust
    assert search(net, headers).status_code == 200
    jti = json.loads(jwt.b64url_decode(member.credential.split(".")[1], "x"))["jti"]
    token = mint_service_auth(net.p256.repo_key, net.p256.did, SERVICE_DID + "#atproto_space_syncer",
                              "com.atproto.space.notifyCredentialRevoked")
    r = httpx.post(f"{net.url}/xrpc/com.atproto.space.notifyCredentialRevoked",
                   json={"space": net.p256.space(), "jti": jti}, headers={"authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    refused = search(net, headers)
    assert (refused.status_code, refused.json()["error"]) == (401, "RevokedToken")


REVOKE = "com.atproto.space.notifyCredentialRevoked"


@pytest.mark.parametrize("case", ["another authority", "wrong lxm", "wrong aud", "expired", "no token",
                                  "signed by the wrong key"])
def test_a_revocation_that_is_not_from_the_space_authority_is_refused(net: Network, case: str) -> None:
    member = net.p256.member(net.p256.space(), SERVICE_DID)
    jti = json.loads(jwt.b64url_decode(member.credential.split(".")[1], "x"))["jti"]
    aud = SERVICE_DID + "#atproto_space_syncer"
    tokens = {
        "another authority": lambda: mint_service_auth(net.k256.repo_key, net.k256.did, aud, REVOKE),
        "wrong lxm": lambda: mint_service_auth(net.p256.repo_key, net.p256.did, aud, "com.atproto.space.notifyWrite"),
        "wrong aud": lambda: mint_service_auth(net.p256.repo_key, net.p256.did, "did:web:other.example", REVOKE),
        "expired": lambda: mint_service_auth(net.p256.repo_key, net.p256.did, aud, REVOKE, now=time.time() - 600),
        "no token": lambda: "",
        "signed by the wrong key": lambda: mint_service_auth(ATTACKER, net.p256.did, aud, REVOKE),
    }
    token = tokens[case]()
    r = httpx.post(f"{net.url}/xrpc/{REVOKE}", json={"space": net.p256.space(), "jti": jti},
                   headers={"authorization": f"Bearer {token}"} if token else {})
    # Authenticated but not the space's authority: 403 Forbidden, as the reference server answers a notification.
    assert r.status_code == (403 if case == "another authority" else 401), r.text
    assert search(net, member.headers()).status_code == 200


VALID = [(curve, style) for curve in ("p256", "k256", "fallback") for style in ("bare", "keyed")]


@pytest.mark.parametrize(("curve", "style"), VALID)
def test_a_member_is_accepted_in_both_signature_styles_and_both_curves(net: Network, curve: str, style: str) -> None:
    authority: SpaceAuthority = getattr(net, curve)
    member = authority.member(authority.space(), SERVICE_DID, style=style)
    response = search(net, member.headers(), space=authority.space())
    assert response.status_code == 200, response.json()
    assert response.json()["memories"][0]["text"] == "deploy the server"


@pytest.mark.parametrize("extra", ["created", "expires", "nonce", "all three", "kid with the DID", "no kid"])
def test_optional_freshness_parameters_and_kid_forms_are_accepted(net: Network, extra: str) -> None:
    a = net.p256
    kid = {"kid with the DID": f"{a.did}#atproto_space", "no kid": None}.get(extra, "#atproto_space")
    key = PrivateKey.generate(P256)
    member = SpaceClient(a.credential(a.space(), key, kid=kid), key, SERVICE_DID, style="keyed",
                         created=extra in ("created", "all three"), nonce=extra in ("nonce", "all three"),
                         expires_in=60 if extra in ("expires", "all three") else None)
    assert search(net, member.headers()).status_code == 200


@pytest.mark.parametrize(("offset", "accepted"), [(-3, True), (-8, False)])
def test_clock_skew_of_five_seconds_is_allowed_at_expiry(net: Network, offset: int, accepted: bool) -> None:
    key = PrivateKey.generate(P256)
    now = time.time()
    token = net.p256.credential(net.p256.space(), key, now=now + offset - 600)  # exp = now + offset
    response = search(net, SpaceClient(token, key, SERVICE_DID).headers())
    assert (response.status_code == 200) is accepted, response.json()


@pytest.mark.parametrize(("offset", "accepted"), [(3, True), (8, False)])
def test_clock_skew_of_five_seconds_is_allowed_at_issue(net: Network, offset: int, accepted: bool) -> None:
    key = PrivateKey.generate(P256)
    token = net.p256.credential(net.p256.space(), key, now=time.time() + offset)  # iat in the future
    response = search(net, SpaceClient(token, key, SERVICE_DID).headers())
    assert (response.status_code == 200) is accepted, response.json()


@pytest.mark.parametrize(("later_s", "signer", "error"), [
    (610, {}, "ExpiredToken"),  # the credential's exp (600 s after iat) and the skew
    (310, {"created": True}, "BadSpaceSignature"),  # the signature's created, older than 300 s
    (70, {"expires_in": 60}, "BadSpaceSignature"),  # the signature's expires
])
def test_the_same_signed_headers_are_refused_once_time_has_run_out_on_them(
        net: Network, later_s: int, signer: dict[str, object], error: str) -> None:
    key = PrivateKey.generate(P256)
    headers = SpaceClient(net.p256.credential(net.p256.space(), key), key, SERVICE_DID, **signer).headers()  # type: ignore[arg-type]
    assert [search(net, headers).status_code for _ in range(2)] == [200, 200]
    clock = net.credentials.clock
    net.credentials.clock = lambda: time.time() + later_s
    try:
        late = search(net, headers)
    finally:
        net.credentials.clock = clock
    assert (late.status_code, late.json()["error"]) == (401, error)


def test_a_members_repeated_request_is_not_checked_again_from_scratch(
        net: Network, monkeypatch: pytest.MonkeyPatch) -> None:
    from engram_index.engram.auth.credentials import SpaceCredentials

    headers = net.p256.member(net.p256.space(), SERVICE_DID).headers()
    assert search(net, headers).status_code == 200

    def again(*args: object) -> None:
        raise AssertionError("the credential's claims were checked again")

    monkeypatch.setattr(SpaceCredentials, "_check_claims", again)
    assert search(net, headers).status_code == 200  # remembered: its time bounds, revocation and key checked


def test_unknown_space_is_said_only_to_a_member(net: Network) -> None:
    unindexed = net.p256.space("never-indexed")
    stranger = search(net, {}, space=unindexed)
    assert (stranger.status_code, stranger.json()["error"]) == (401, "AuthRequired")
    member = net.p256.member(unindexed, SERVICE_DID)
    known = search(net, member.headers(), space=unindexed)
    assert (known.status_code, known.json()["error"]) == (400, "UnknownSpace")


def test_every_query_but_describe_service_needs_a_credential(net: Network) -> None:
    for nsid in ("listMemories", "getSpaceStatus", "getMemoryGraph", "getMemory"):
        r = httpx.get(f"{net.url}/xrpc/garden.engram.{nsid}", params={"space": net.p256.space(), "uri": "x"})
        assert (r.status_code, r.json()["error"]) == (401, "AuthRequired"), nsid
    assert httpx.get(f"{net.url}/xrpc/garden.engram.describeService").status_code == 200


def test_a_rotated_authority_key_is_picked_up_and_the_old_key_refused(tmp_path: Path) -> None:
    with network(tmp_path) as n:
        old = n.p256.member(n.p256.space(), SERVICE_DID).headers()
        assert search(n, old).status_code == 200  # caches the document
        n.p256.rotate()
        fresh = n.p256.member(n.p256.space(), SERVICE_DID)
        assert search(n, fresh.headers()).status_code == 200  # resolved once more, uncached
        stale = search(n, old)
        assert (stale.status_code, stale.json()["error"]) == (401, "InvalidToken")


def test_a_slow_authority_document_is_503_and_a_malformed_one_401(tmp_path: Path) -> None:
    with network(tmp_path, resolver_timeout=1.0) as n:
        slow = n.k256.member(n.k256.space(), SERVICE_DID)
        n.plc.delay = 4.0  # well beyond the resolver's 1 s, even on a loaded machine
        n.credentials.resolver.forget(n.k256.did)
        r = search(n, slow.headers(), space=n.k256.space())
        assert (r.status_code, r.json()["error"]) == (503, "AuthorityUnreachable")
        n.plc.delay = 0.0
        n.plc.malformed.add(n.fallback.did)
        member = n.fallback.member(n.fallback.space(), SERVICE_DID)
        n.credentials.resolver.forget(n.fallback.did)
        r = search(n, member.headers(), space=n.fallback.space())
        assert (r.status_code, r.json()["error"]) == (401, "InvalidToken")
