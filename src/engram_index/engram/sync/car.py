"""CAR files of permissioned repos: two roots (the signed commit, then the path → CID index) and
the record blocks in index order (permissioned-data proposal 0016, "Repo serialization").

Decoding uses libipld's CAR reader; writing is the few lines of the CARv1 framing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
import libipld

from engram_index.engram.sync.commit import SignedCommit

_CIDV1_DAG_CBOR_SHA256 = bytes([0x01, 0x71, 0x12, 0x20])


def cid_of(block: bytes) -> str:
    """The CIDv1 (dag-cbor, sha-256) of an encoded block."""
    return str(libipld.encode_cid(_CIDV1_DAG_CBOR_SHA256 + hashlib.sha256(block).digest()))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def cid_bytes(cid: str) -> bytes:
    """The binary form of a CIDv1 string (which libipld also takes as a link when encoding)."""
    decoded = libipld.decode_cid(cid)
    parts = (decoded["version"], decoded["codec"], decoded["hash"]["code"], decoded["hash"]["size"])
    return b"".join(_varint(n) for n in parts) + bytes(decoded["hash"]["digest"])


def write_car(commit: SignedCommit, records: dict[str, bytes]) -> bytes:
    """A repo's CAR: `records` maps `collection/rkey` to the record's DAG-CBOR bytes."""
    commit_block = libipld.encode_dag_cbor(commit.to_ipld())
    paths = sorted(records)
    index = {path: cid_of(records[path]) for path in paths}
    # libipld encodes binary CIDs as links (tag 42): the index is a map of links.
    index_block = libipld.encode_dag_cbor({path: cid_bytes(cid) for path, cid in index.items()})
    roots = [cid_of(commit_block), cid_of(index_block)]
    header = libipld.encode_dag_cbor({"version": 1, "roots": [cid_bytes(r) for r in roots]})
    out = bytearray(_varint(len(header)) + header)
    for cid, block in [(roots[0], commit_block), (roots[1], index_block)] + [(index[p], records[p]) for p in paths]:
        framed = cid_bytes(cid) + block
        out += _varint(len(framed)) + framed
    return bytes(out)


@dataclass(frozen=True)
class RepoExport:
    """A decoded repo CAR: its commit, its index (path → CID) and each path's raw record block."""

    commit: SignedCommit
    index: dict[str, str]
    records: dict[str, bytes]


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _read_cid(data: bytes, pos: int) -> tuple[bytes, int]:
    start = pos
    for _ in range(3):  # version, codec, multihash code
        _, pos = _read_varint(data, pos)
    size, pos = _read_varint(data, pos)
    if pos + size > len(data):
        raise ValueError("truncated CID")
    return data[start:pos + size], pos + size


def read_car(data: bytes) -> RepoExport:
    """Decode a repo CAR, checking every block against its CID as it goes; ValueError when malformed.

    The framing is parsed here, not by libipld's CAR reader, so that blocks are hashed as sent
    (that reader hands back decoded values, and re-encoding them could hide a non-canonical block).
    """
    length, pos = _read_varint(data, 0)
    header = libipld.decode_dag_cbor(data[pos:pos + length])
    pos += length
    roots = header.get("roots") if isinstance(header, dict) else None
    if not isinstance(roots, list) or len(roots) != 2 or header.get("version") != 1:
        raise ValueError("a repo CAR is version 1 with two roots (commit, index)")
    blocks: list[tuple[bytes, bytes]] = []
    while pos < len(data):
        length, pos = _read_varint(data, pos)
        end = pos + length
        if end > len(data):
            raise ValueError("truncated block")
        cid, body_start = _read_cid(data, pos)
        body = data[body_start:end]
        if cid[:4] != _CIDV1_DAG_CBOR_SHA256 or cid[4:] != hashlib.sha256(body).digest():
            raise ValueError(f"a block does not match its CID {libipld.encode_cid(cid)}")
        blocks.append((cid, body))
        pos = end
    if len(blocks) < 2 or [blocks[0][0], blocks[1][0]] != roots:
        raise ValueError("the CAR's first blocks are not its roots")
    commit = SignedCommit.from_ipld(libipld.decode_dag_cbor(blocks[0][1]))
    raw_index = libipld.decode_dag_cbor(blocks[1][1])
    if not isinstance(raw_index, dict) or not all(isinstance(v, bytes) for v in raw_index.values()):
        raise ValueError("the CAR's index is not a map of paths to CIDs")
    paths = list(raw_index)
    if paths != sorted(paths):
        raise ValueError("the CAR's index is not in lexicographic order")
    bodies = blocks[2:]
    if [cid for cid, _ in bodies] != [raw_index[p] for p in paths]:
        raise ValueError("the record blocks are missing or not in index order")
    index = {p: str(libipld.encode_cid(raw_index[p])) for p in paths}
    return RepoExport(commit, index, {p: body for p, (_, body) in zip(paths, bodies)})
