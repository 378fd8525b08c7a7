"""Checks before anything is indexed: values against their CIDs, the set hash against the signed
commit, the commit against the author's key; and the JSON wire forms of commits and ops."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import libipld

from engram_index.engram.identity.keys import PublicKey
from engram_index.engram.records import record_cid
from engram_index.engram.sync.car import RepoExport
from engram_index.engram.sync.commit import SignedCommit
from engram_index.engram.sync.lthash import LtHash, element


def _b64(value: Any, name: str) -> bytes:
    if not isinstance(value, dict) or not isinstance(value.get("$bytes"), str):
        raise ValueError(f"{name} is not {{'$bytes': base64}}")
    text = value["$bytes"]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{name} is not base64") from exc


def commit_from_json(value: Any) -> SignedCommit:
    """A signed commit in its JSON form (bytes as `{"$bytes": base64}`)."""
    if not isinstance(value, dict):
        raise ValueError("a commit is an object")
    return SignedCommit.from_ipld({
        "ver": value.get("ver"), "rev": value.get("rev"),
        **{name: _b64(value.get(name), name) for name in ("hash", "ikm", "sig", "mac")},
    })


def commit_to_json(commit: SignedCommit) -> dict[str, Any]:
    """A signed commit in its JSON form."""
    def enc(raw: bytes) -> dict[str, str]:
        return {"$bytes": base64.b64encode(raw).decode().rstrip("=")}

    return {"ver": commit.ver, "hash": enc(commit.hash), "ikm": enc(commit.ikm), "sig": enc(commit.sig),
            "mac": enc(commit.mac), "rev": commit.rev}


@dataclass(frozen=True)
class Op:
    """One entry of a repo's operation log: `cid` None is a delete, `prev` None a create."""

    rev: str
    collection: str
    rkey: str
    cid: str | None
    prev: str | None
    value: dict[str, Any] | None

    @property
    def path(self) -> str:
        """`collection/rkey`."""
        return f"{self.collection}/{self.rkey}"

    @classmethod
    def from_json(cls, value: Any) -> Op:
        """Parse one op of listRepoOps; ValueError when malformed."""
        if not isinstance(value, dict):
            raise ValueError("an op is an object")
        rev, collection, rkey = value.get("rev"), value.get("collection"), value.get("rkey")
        cid, prev, record = value.get("cid"), value.get("prev"), value.get("value")
        if not all(isinstance(x, str) and x for x in (rev, collection, rkey)):
            raise ValueError("an op needs rev, collection and rkey")
        if cid is not None and not isinstance(cid, str) or prev is not None and not isinstance(prev, str):
            raise ValueError("an op's cid and prev are strings or null")
        if record is not None and not isinstance(record, dict):
            raise ValueError("an op's value is an object")
        return cls(str(rev), str(collection), str(rkey), cid, prev, record)


def value_matches(op: Op) -> bool:
    """Whether the op's inlined value re-encodes (DAG-CBOR) to the op's CID."""
    if op.value is None or op.cid is None:
        return False
    try:
        return record_cid(op.value) == op.cid
    except Exception:  # a value that cannot be encoded at all cannot match
        return False


def check_commit(commit: SignedCommit, key: PublicKey | None, space: str, author: str, state: LtHash) -> str | None:
    """None when `commit` is the author's and its hash is `state`'s digest; else what is wrong."""
    if key is None:
        return "the author's DID document has no #atproto key"
    problem = commit.verify(key, space, author)
    if problem:
        return problem
    if commit.hash != state.digest():
        return "the set hash of the records does not match the signed commit"
    return None


def export_state(export: RepoExport) -> LtHash:
    """The set hash of a repo export's index."""
    state = LtHash()
    for path, cid in export.index.items():
        collection, _, rkey = path.partition("/")
        state.add(element(collection, rkey, cid))
    return state


def record_json(block: bytes) -> Any:
    """A record block (DAG-CBOR) in its JSON form: byte strings as `{"$bytes": base64}`."""
    return _to_json(libipld.decode_dag_cbor(block))


def _to_json(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode().rstrip("=")}
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value
