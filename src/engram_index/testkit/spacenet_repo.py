"""The state of the fake space network: accounts, spaces, and each member's repo in a space (its
records, op log, running set hash and paging), with the faults a test can arm on a repo host.

Nothing here speaks HTTP; `spacenet_hosts` serves it and `spacenet` drives it.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import libipld

from engram_index.engram.identity.keys import PrivateKey
from engram_index.engram.records import _to_ipld, is_rkey, record_cid, tid_from
from engram_index.engram.sync.car import write_car
from engram_index.engram.sync.commit import SignedCommit
from engram_index.engram.sync.lthash import LtHash, element

# One write of a batch: (collection, rkey, value in JSON form), value None for a delete.
Write = tuple[str, str, dict[str, Any] | None]


class TidClock:
    """Strictly increasing TIDs for revs, shared by every repo and space of one network."""

    def __init__(self) -> None:
        self._last = 0
        self._clock_id = secrets.randbelow(1024)
        self._lock = threading.Lock()

    def next(self) -> str:
        """A TID later than every one handed out before."""
        with self._lock:
            # Several writes in one microsecond must still get distinct, ordered revs.
            self._last = max(self._last + 1, time.time_ns() // 1000)
            return tid_from(self._last, self._clock_id)


def encode_record(value: dict[str, Any]) -> tuple[str, bytes]:
    """A JSON-form record's CID and DAG-CBOR block, converted exactly as `records.record_cid` does."""
    return record_cid(value), libipld.encode_dag_cbor(_to_ipld(value))


@dataclass(frozen=True, slots=True)
class LogOp:
    """One entry of a repo's op log: `cid` None is a delete, `prev` None a create."""

    rev: str
    collection: str
    rkey: str
    cid: str | None
    prev: str | None

    @property
    def path(self) -> str:
        """`collection/rkey`."""
        return f"{self.collection}/{self.rkey}"


@dataclass
class Faults:
    """Misbehaviour armed on one member's repo host; each counter is how many more times to misbehave."""

    bad_signatures: int = 0  # commits served with a signature that does not verify
    wrong_hashes: int = 0  # commits served signing a set hash other than the records'
    wrong_values: int = 0  # listRepoOps pages whose first inlined value does not match its cid
    omitted_values: int = 0  # listRepoOps pages with every value left out


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record as the repo holds it: its CID, its DAG-CBOR block and its JSON form."""

    cid: str
    block: bytes
    value: dict[str, Any]


class SinceNotFound(Exception):
    """`since` is older than the op log still reaches."""


class Repo:
    """One member's permissioned repo in one space."""

    def __init__(self, space: str, did: str) -> None:
        self.space, self.did = space, did
        self.records: dict[str, StoredRecord] = {}
        self.log: list[LogOp] = []
        self.state = LtHash()
        self.rev: str | None = None
        # The newest rev whose ops were truncated away: the oldest `since` still answerable.
        self.floor: str | None = None

    def apply(self, rev: str, writes: list[Write]) -> list[LogOp]:
        """Apply a batch atomically at `rev`; ValueError (and no change) when any write is invalid."""
        if self.rev is not None and rev <= self.rev:
            raise ValueError(f"rev {rev} is not after the repo's rev {self.rev}")
        if not writes:
            raise ValueError("a commit needs at least one write")
        encoded: list[tuple[str, str, dict[str, Any] | None, tuple[str, bytes] | None]] = []
        paths: set[str] = set()
        for collection, rkey, value in writes:
            path = f"{collection}/{rkey}"
            if "/" in collection or not collection or not is_rkey(rkey):
                raise ValueError(f"not a record path: {path!r}")
            if path in paths:
                raise ValueError(f"{path} is written twice in one commit")
            paths.add(path)
            if value is None and path not in self.records:
                raise ValueError(f"there is no record at {path} to delete")
            # Encode every value before changing anything, so that a bad one leaves the repo as it was.
            encoded.append((collection, rkey, value, encode_record(value) if value is not None else None))
        ops: list[LogOp] = []
        for collection, rkey, value, cid_block in encoded:
            path = f"{collection}/{rkey}"
            old = self.records.pop(path, None)
            if old is not None:
                self.state.remove(element(collection, rkey, old.cid))
            cid = None
            if value is not None and cid_block is not None:
                cid, block = cid_block
                self.state.add(element(collection, rkey, cid))
                self.records[path] = StoredRecord(cid, block, copy.deepcopy(value))
            ops.append(LogOp(rev, collection, rkey, cid, old.cid if old else None))
        self.log.extend(ops)
        self.rev = rev
        return ops

    def truncate(self, keep: int) -> None:
        """Forget all but the ops of the newest `keep` revs."""
        revs = sorted({op.rev for op in self.log})
        dropped = revs[:max(0, len(revs) - keep)]
        if dropped:
            self.floor = dropped[-1]
            self.log = [op for op in self.log if op.rev > self.floor]

    def ops_after(self, since: str | None, limit: int) -> tuple[list[LogOp], bool]:
        """The next page of ops after `since` (whole revs, about `limit` ops) and whether it is the last."""
        if self.floor is not None and (since is None or since < self.floor):
            raise SinceNotFound(f"the op log of {self.did} no longer reaches back to {since or 'the start'}")
        pending = [op for op in self.log if since is None or op.rev > since]
        page: list[LogOp] = []
        for op in pending:
            # A page never splits a rev: its last rev is the cursor, passed back as an exclusive `since`.
            if len(page) >= limit and op.rev != page[-1].rev:
                break
            page.append(op)
        return page, len(page) == len(pending)

    def value_of(self, op: LogOp) -> dict[str, Any] | None:
        """The op's value when it is still the path's current one (only current values are inlined)."""
        current = self.records.get(op.path)
        if op.cid is None or current is None or current.cid != op.cid:
            return None
        return copy.deepcopy(current.value)

    def commit(self, key: PrivateKey, faults: Faults) -> SignedCommit:
        """A fresh signed commit of the current state (a new ikm each time), with any armed fault."""
        if self.rev is None:
            raise ValueError("an empty repo has no commit")
        digest = self.state.digest()
        if faults.wrong_hashes > 0:
            faults.wrong_hashes -= 1
            digest = hashlib.sha256(b"not the set hash" + digest).digest()
        commit = SignedCommit.make(key, self.space, self.did, self.rev, digest)
        if faults.bad_signatures > 0:
            faults.bad_signatures -= 1
            commit = dataclasses.replace(commit, sig=commit.sig[:-1] + bytes([commit.sig[-1] ^ 1]))
        return commit

    def car(self, commit: SignedCommit) -> bytes:
        """The repo CAR for `commit`."""
        return write_car(commit, {path: record.block for path, record in self.records.items()})


@dataclass
class Account:
    """An account: a did:plc whose `#atproto` key its PDS holds, and a password for sessions."""

    did: str
    handle: str
    password: str
    key: PrivateKey
    pds: str  # the URL of its repo host
    faults: Faults = field(default_factory=Faults)


@dataclass(frozen=True)
class Registration:
    """A service that asked to be notified of a space's writes, until `expires` (unix seconds)."""

    service: str
    endpoint: str
    expires: float


@dataclass
class Space:
    """A space of the authority: who may write, who may read, the members' repos, the push sign-ups."""

    uri: str
    members: set[str] = field(default_factory=set)
    readers: set[str] = field(default_factory=set)
    repos: dict[str, Repo] = field(default_factory=dict)
    registrations: dict[str, Registration] = field(default_factory=dict)
    rev: str | None = None  # the spaceRev of the last notification
    deleted: bool = False
