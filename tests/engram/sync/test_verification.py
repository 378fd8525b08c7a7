"""The parts of sync verification: the LtHash set hash, signed commits, repo CARs, op values."""

from __future__ import annotations

import libipld
import pytest

from engram_index.engram.identity.keys import K256, P256, PrivateKey, parse_public_key
from engram_index.engram.records import record_cid
from engram_index.engram.sync.car import read_car, write_car
from engram_index.engram.sync.commit import SignedCommit
from engram_index.engram.sync.lthash import LtHash, element
from engram_index.engram.sync.verify import Op, check_commit, commit_from_json, commit_to_json, export_state, value_matches

SPACE = "at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/space/garden.engram.space/main"
AUTHOR = "did:plc:bbbbbbbbbbbbbbbbbbbbbbbb"


def test_the_empty_set_hash_is_sha256_of_2048_zero_bytes() -> None:
    import hashlib

    assert LtHash().digest() == hashlib.sha256(bytes(2048)).digest()


def test_the_lanes_come_from_blake3_xof_little_endian() -> None:
    state = LtHash()
    state.add(b"abc")
    # BLAKE3("abc") begins 6437b3ac…: the first lane is 0x3764, read little-endian.
    assert state.to_bytes()[:4] == bytes.fromhex("6437b3ac")


def test_the_set_hash_depends_only_on_the_set() -> None:
    a, b = LtHash(), LtHash()
    items = [element("c.o", f"r{i}", f"cid{i}") for i in range(20)]
    for item in items:
        a.add(item)
    for item in reversed(items):
        b.add(item)
    b.add(b"extra")
    b.remove(b"extra")
    assert a.digest() == b.digest()
    a.remove(items[3])
    assert a.digest() != b.digest()
    assert LtHash(a.to_bytes()).digest() == a.digest()


@pytest.mark.parametrize("alg", [P256, K256])
def test_a_signed_commit_verifies_and_any_change_breaks_it(alg: str) -> None:
    key = PrivateKey.generate(alg)
    public = parse_public_key(key.did_key)
    state = LtHash()
    state.add(element("garden.engram.memory", "r1", "bafy"))
    commit = SignedCommit.make(key, SPACE, AUTHOR, "3kabc", state.digest())
    assert check_commit(commit, public, SPACE, AUTHOR, state) is None
    assert commit_from_json(commit_to_json(commit)) == commit
    assert check_commit(commit, public, SPACE + "x", AUTHOR, state) is not None
    assert check_commit(commit, public, SPACE, "did:plc:other", state) is not None
    assert check_commit(commit, parse_public_key(PrivateKey.generate(alg).did_key), SPACE, AUTHOR, state) is not None
    forged = SignedCommit(commit.ver, bytes(32), commit.ikm, commit.sig, commit.mac, commit.rev)
    assert "MAC" in (check_commit(forged, public, SPACE, AUTHOR, state) or "")
    assert "set hash" in (check_commit(commit, public, SPACE, AUTHOR, LtHash()) or "")


def _records(n: int) -> dict[str, bytes]:
    return {f"garden.engram.memory/r{i}": libipld.encode_dag_cbor({"text": f"memory {i}"}) for i in range(n)}


def test_a_repo_car_round_trips_and_its_index_folds_to_the_commit_hash() -> None:
    key = PrivateKey.generate(P256)
    records = _records(5)
    state = LtHash()
    from engram_index.engram.sync.car import cid_of

    for path, block in records.items():
        collection, _, rkey = path.partition("/")
        state.add(element(collection, rkey, cid_of(block)))
    export = read_car(write_car(SignedCommit.make(key, SPACE, AUTHOR, "3k", state.digest()), records))
    assert export.records == dict(sorted(records.items()))
    assert check_commit(export.commit, parse_public_key(key.did_key), SPACE, AUTHOR, export_state(export)) is None


def test_a_tampered_car_block_or_order_is_refused() -> None:
    key = PrivateKey.generate(P256)
    car = bytearray(write_car(SignedCommit.make(key, SPACE, AUTHOR, "3k", bytes(32)), _records(3)))
    tampered = bytes(car[:-3]) + b"X" + bytes(car[-2:])
    with pytest.raises(ValueError, match="does not match its CID"):
        read_car(tampered)
    with pytest.raises(ValueError):
        read_car(bytes(car[: len(car) // 2]))
    with pytest.raises(ValueError):
        read_car(b"\x05hello")


def test_an_op_value_must_re_encode_to_its_cid() -> None:
    value = {"$type": "garden.engram.memory", "text": "hello", "createdAt": "2026-01-01T00:00:00.000Z"}
    good = Op("3k", "garden.engram.memory", "r1", record_cid(value), None, value)
    assert value_matches(good)
    assert not value_matches(Op("3k", "garden.engram.memory", "r1", good.cid, None, {**value, "text": "hullo"}))
    assert not value_matches(Op("3k", "garden.engram.memory", "r1", good.cid, None, None))
