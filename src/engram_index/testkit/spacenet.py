"""A fake space network for the sync tests: repo hosts (PDSes) and an authority's space host that
behave like the real services, over real HTTP on loopback, with their DID documents in a FakePlc.

They keep real permissioned repos, fold every write into the repo's LtHash, sign a fresh commit
for every reader, serve real CARs and op logs, mint real delegation tokens and credentials, check
readers' credentials, and push service-auth-signed notifications. The wire is docs/design/sync.md.

    with SpaceNetwork() as net:
        alice, indexer = net.account(), net.account()
        space = net.create_space(members=[alice.did], readers=[indexer.did])
        net.write(space, alice.did, "garden.engram.memory", "3kaaa", {"text": "hi"})

Knobs make a host misbehave the ways the syncer must survive (see the "misbehaviour" methods).
"""

from __future__ import annotations

import copy
import secrets
import threading
import time
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from types import TracebackType
from typing import Any

from engram_index.engram.auth.service_auth import SYNCER_FRAGMENT, mint_service_auth
from engram_index.engram.identity.did import DidResolver
from engram_index.engram.identity.keys import P256, PrivateKey
from engram_index.testkit.authority import SpaceAuthority
from engram_index.testkit.plc import FakePlc, did_document, new_plc_did
from engram_index.testkit.serve import free_port, serving
from engram_index.testkit.spacenet_hosts import AuthorityHost, PdsHost
from engram_index.testkit.spacenet_notify import Delivery, Notifier
from engram_index.testkit.spacenet_repo import Account, LogOp, Repo, Space, TidClock, Write

NOTIFY_WRITE = "com.atproto.space.notifyWrite"
NOTIFY_SPACE_DELETED = "com.atproto.space.notifySpaceDeleted"


def _distinct_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


class SpaceNetwork:
    """A PLC directory, `pds_count` repo hosts and one authority with its space host; use it as a context manager."""

    def __init__(
        self,
        *,
        pds_count: int = 1,
        alg: str = P256,
        credential_lifetime: int = 600,
        notify_lifetime: float = 3600.0,
        space_host_service: bool = True,
    ) -> None:
        """`space_host_service` False publishes the space host as the authority's #atproto_pds only."""
        # One lock for all state: hosts answer on their own threads while the test writes on its own.
        self.lock = threading.RLock()
        self.accounts: dict[str, Account] = {}
        self.spaces: dict[str, Space] = {}
        self.credential_lifetime = credential_lifetime
        self.notify_lifetime = notify_lifetime
        self.lost_notifications = 0
        self.clock = TidClock()
        self.plc = FakePlc()
        plc_port, host_port, *pds_ports = _distinct_ports(2 + pds_count)
        self.plc_url = f"http://127.0.0.1:{plc_port}"
        self.host = AuthorityHost(self, host_port)
        self.pdses = [PdsHost(self, port) for port in pds_ports]
        self.authority = SpaceAuthority(
            self.plc, alg,
            pds=self.host.url if not space_host_service else "https://pds.invalid",
            space_host=self.host.url if space_host_service else None)
        self.notifier = Notifier()
        self._stack = ExitStack()
        self._spaces_made = 0

    def __enter__(self) -> SpaceNetwork:
        """Serve the directory and every host."""
        self.notifier.start()
        try:
            self._stack.enter_context(serving(self.plc.app(), port=int(self.plc_url.rsplit(":", 1)[1]),
                                              probe="/_health"))
            for host in [self.host, *self.pdses]:
                self._stack.enter_context(serving(host.app(), port=host.port))
        except BaseException:
            self.notifier.close()
            self._stack.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        """Deliver what is queued, then stop every server."""
        self.notifier.close()
        self._stack.close()

    # -- identities and spaces ------------------------------------------------------------------

    def account(self, *, pds: int = 0, password: str | None = None, alg: str = P256) -> Account:
        """A new account on repo host `pds`, with its DID document published."""
        did = new_plc_did()
        account = Account(did, f"{did.rsplit(':', 1)[-1]}.test", password or secrets.token_urlsafe(12),
                          PrivateKey.generate(alg), self.pdses[pds].url)
        with self.lock:
            self.accounts[did] = account
        self._publish(account)
        return account

    def authority_account(self, *, pds: int = 0) -> Account:
        """Give the authority a repo (on repo host `pds`), so that it can write the space's config."""
        with self.lock:
            known = self.accounts.get(self.authority.did)
            if known is not None:
                return known
            account = Account(self.authority.did, "authority.test", secrets.token_urlsafe(12),
                              self.authority.repo_key, self.pdses[pds].url)
            self.accounts[account.did] = account
        self.authority.pds = account.pds
        self.authority.publish()
        return account

    def _publish(self, account: Account) -> None:
        self.plc.publish(account.did, did_document(
            account.did, {"#atproto": account.key},
            {"#atproto_pds": ("AtprotoPersonalDataServer", account.pds)}, handle=account.handle))

    def resolver(self) -> DidResolver:
        """A resolver pointed at the network's directory (make one per event loop)."""
        return DidResolver(self.plc_url, min_refresh=0.0)

    def pds_of(self, did: str) -> PdsHost:
        """The repo host of an account."""
        url = self.accounts[did].pds
        return next(pds for pds in self.pdses if pds.url == url)

    def create_space(self, skey: str | None = None, *, members: Iterable[str] = (),
                     readers: Iterable[str] = ()) -> str:
        """A new space of the authority; members may write (and read), readers may get a credential."""
        with self.lock:
            self._spaces_made += 1
            uri = self.authority.space(skey or f"s{self._spaces_made}")
            if uri in self.spaces:
                raise ValueError(f"{uri} exists")
            self.spaces[uri] = Space(uri)
        for did in members:
            self.add_member(uri, did)
        for did in readers:
            self.add_reader(uri, did)
        return uri

    def add_member(self, space: str, did: str) -> None:
        """Let an account write to the space."""
        with self.lock:
            if did not in self.accounts:
                raise KeyError(f"{did} is not an account of this network")
            self._live(space).members.add(did)

    def add_reader(self, space: str, did: str) -> None:
        """Let an account get a credential for the space."""
        with self.lock:
            self._live(space).readers.add(did)

    def _live(self, space: str) -> Space:
        known = self.spaces.get(space)
        if known is None or known.deleted:
            raise KeyError(f"no space {space}")
        return known

    # -- writes -------------------------------------------------------------------------------

    def write(self, space: str, member: str, collection: str, rkey: str, value: dict[str, Any]) -> str:
        """Create or update one record (its JSON form); returns the new rev."""
        return self.apply(space, member, [(collection, rkey, value)])

    def delete(self, space: str, member: str, collection: str, rkey: str) -> str:
        """Delete one record; returns the new rev."""
        return self.apply(space, member, [(collection, rkey, None)])

    def apply(self, space: str, member: str, writes: Sequence[Write]) -> str:
        """Apply writes (value None deletes) atomically at one new rev and notify; returns the rev."""
        with self.lock:
            known = self._live(space)
            if member not in known.members:
                raise PermissionError(f"{member} is not a member of {space}")
            repo = known.repos.setdefault(member, Repo(space, member))
            rev = self.clock.next()
            repo.apply(rev, list(writes))
            body: dict[str, Any] = {"space": space, "repo": member, "repoRev": rev, "spaceRev": self.clock.next()}
            if known.rev is not None:
                body["prevSpaceRev"] = known.rev
            known.rev = body["spaceRev"]
            self._notify(known, NOTIFY_WRITE, body)
        return rev

    def delete_space(self, space: str) -> None:
        """Delete a space: every read answers 404 SpaceNotFound, and registered services are told."""
        with self.lock:
            known = self._live(space)
            known.deleted = True
            self._notify(known, NOTIFY_SPACE_DELETED, {"space": space})
            known.registrations.clear()

    def _notify(self, space: Space, nsid: str, body: dict[str, Any]) -> None:
        now = time.time()
        for registration in list(space.registrations.values()):
            if registration.expires < now:
                continue
            if self.lost_notifications > 0:
                self.lost_notifications -= 1
                self.notifier.record(Delivery(registration.endpoint, nsid, body, None, "lost on purpose"))
                continue
            token = mint_service_auth(self.authority.repo_key, self.authority.did,
                                      f"{registration.service}{SYNCER_FRAGMENT}", nsid)
            self.notifier.send(registration.endpoint, nsid, body, token)

    def flush_notifications(self, timeout: float = 10.0) -> None:
        """Wait until every notification made so far was posted (or failed)."""
        self.notifier.flush(timeout)

    @property
    def deliveries(self) -> list[Delivery]:
        """What became of each notification, in order."""
        return list(self.notifier.deliveries)

    # -- what the hosts hold (the truth a syncer should converge to) ------------------------------

    def records(self, space: str, member: str) -> dict[str, dict[str, Any]]:
        """The member's current records in the space: `collection/rkey` → value (JSON form)."""
        with self.lock:
            repo = self.spaces[space].repos.get(member)
            return {path: copy.deepcopy(r.value) for path, r in (repo.records if repo else {}).items()}

    def repo_rev(self, space: str, member: str) -> str | None:
        """The member's current rev in the space (None before its first write)."""
        with self.lock:
            repo = self.spaces[space].repos.get(member)
            return repo.rev if repo else None

    def registrations(self, space: str) -> dict[str, str]:
        """The services signed up for the space's notifications: service DID → endpoint."""
        with self.lock:
            return {r.service: r.endpoint for r in self.spaces[space].registrations.values()}

    # -- misbehaviour -------------------------------------------------------------------------

    def corrupt_next_commit(self, member: str, times: int = 1) -> None:
        """The next `times` commits served for the member carry a signature that does not verify."""
        with self.lock:
            self.accounts[member].faults.bad_signatures += times

    def sign_wrong_hash(self, member: str, times: int = 1) -> None:
        """The next `times` commits served for the member sign a set hash that is not the records'."""
        with self.lock:
            self.accounts[member].faults.wrong_hashes += times

    def report_wrong_value(self, member: str, times: int = 1) -> None:
        """The next `times` listRepoOps pages with values report one that does not match its cid."""
        with self.lock:
            self.accounts[member].faults.wrong_values += times

    def omit_values(self, member: str, times: int = 1) -> None:
        """The next `times` listRepoOps pages with values leave every value out."""
        with self.lock:
            self.accounts[member].faults.omitted_values += times

    def drop_op(self, space: str, member: str, index: int = -1) -> LogOp:
        """The host loses one op of its log (the newest by default): the log no longer folds to the commit."""
        with self.lock:
            return self.spaces[space].repos[member].log.pop(index)

    def truncate_log(self, space: str, member: str, keep: int = 0) -> None:
        """The host keeps only the newest `keep` revs of the log: an older `since` is SinceNotFound."""
        with self.lock:
            self.spaces[space].repos[member].truncate(keep)

    def rotate_key(self, member: str) -> PrivateKey:
        """Give the member a new #atproto key and publish it; commits from now on are signed with it."""
        with self.lock:
            account = self.accounts[member]
            account.key = PrivateKey.generate(account.key.alg)
        self._publish(account)
        return account.key

    def remove_member(self, space: str, member: str) -> None:
        """Drop a member: gone from listRepos, its repo 404 RepoNotFound, no more writes."""
        with self.lock:
            known = self._live(space)
            known.members.discard(member)
            known.repos.pop(member, None)

    def lose_notifications(self, count: int = 1) -> None:
        """The next `count` notifications are never sent (their spaceRev is still used up)."""
        with self.lock:
            self.lost_notifications += count

    def set_delay(self, seconds: float) -> None:
        """Every host waits this long before each answer (0 to stop)."""
        for host in [self.host, *self.pdses]:
            host.delay = seconds
