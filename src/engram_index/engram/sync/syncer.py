"""Pulling a space's member repos into the store, verified before anything is indexed.

Per repo: with a position, the op log since it (each current value must re-encode to its CID,
the ops folded into our set hash must give the signed commit's hash, the commit must verify
with the author's key — resolved once more on failure); without one, or when any of that fails,
the whole repo as a CAR, verified the same way. What still fails is not indexed: the repo keeps
its last verified position and its problem shows in getSpaceStatus. A repo's position advances
only in the transaction that writes its records.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import libipld

from engram_index.engine.types import ModelIdentity
from engram_index.errors import BadRecord
from engram_index.engram.identity.did import ResolveError
from engram_index.engram.identity.keys import PublicKey
from engram_index.engram.records import MAX_DIMS, parse_memory, parse_space_uri
from engram_index.collections import Collections
from engram_index.store.base import StoredDocument
from engram_index.engram.syncstate import PathChange, SyncState
from engram_index.engram.sync.car import read_car
from engram_index.engram.sync.client import SyncClient, SyncError
from engram_index.engram.sync.commit import SignedCommit
from engram_index.engram.sync.lthash import LtHash, element
from engram_index.engram.sync.verify import Op, check_commit, export_state, value_matches

log = logging.getLogger("engram_index.engram.sync")

MEMORY = "garden.engram.memory"
CONFIG = "garden.engram.config"
GONE = frozenset({"RepoNotFound", "RepoDeactivated", "RepoTakendown"})


@dataclass(frozen=True)
class RepoOutcome:
    """What one repo's sync did."""

    repo: str
    ok: bool
    full: bool = False
    changed: int = 0
    problem: str | None = None


class Syncer:
    """Syncs spaces into a data directory through a SyncClient."""

    def __init__(self, spaces: Collections, client: SyncClient, *, clock: Callable[[], float] = time.time) -> None:
        self.spaces = spaces
        self.client = client
        self.state = SyncState(spaces.store)
        self.clock = clock
        self._model_changed: set[str] = set()

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def sync_space(self, space: str, repos: list[str] | None = None) -> list[RepoOutcome]:
        """Bring `space` (or only `repos` of it) up to date; members no longer listed are removed."""
        authority = parse_space_uri(space).authority
        self.spaces.ensure_collection(space)
        outcomes: list[RepoOutcome] = []
        if repos is None:
            try:
                listed = await self.client.list_repos(space)
            except SyncError as exc:
                if exc.name == "SpaceNotFound":
                    log.info("space %s was deleted at its host: dropping it", space)
                    self.drop_space(space)
                    return []
                self.state.space_synced(space, str(exc), self._now_ms())
                return []
            known = {repo: self.state.position(space, repo) for repo in self.state.repos(space)}
            for gone in sorted(set(known) - {did for did, _ in listed}):
                self.remove_repo(space, gone)
            # The authority's repo first: its config says which vectors to index.
            order = sorted(listed, key=lambda item: item[0] != authority)
            repos = [did for did, rev in order
                     if known.get(did) is None or known[did].rev != rev or known[did].problem]  # type: ignore[union-attr]
        pending = sorted(repos, key=lambda r: r != authority)
        done: set[str] = set()
        while pending:
            repo = pending.pop(0)
            done.add(repo)
            outcomes.append(await self.sync_repo(space, repo))
            if space in self._model_changed:
                # The authority's config moved to another model: every other repo is read again.
                self._model_changed.discard(space)
                pending = [r for r in self.state.repos(space) if r not in done]
        failed = [o for o in outcomes if not o.ok]
        self.state.space_synced(space, f"{len(failed)} repo(s) failed verification" if failed else None,
                                self._now_ms())
        return outcomes

    async def sync_repo(self, space: str, repo: str) -> RepoOutcome:
        """Bring one member repo up to date: incrementally when possible, else whole."""
        position = self.state.position(space, repo)
        if position is None or position.rev is None or position.state is None:
            return await self._full(space, repo, reparse=position is not None)
        try:
            ops, commit = await self.client.list_repo_ops(space, repo, position.rev)
        except SyncError as exc:
            if exc.name in GONE:
                return self.remove_repo(space, repo)
            log.info("ops of %s in %s unavailable (%s): fetching the whole repo", repo, space, exc)
            return await self._full(space, repo)
        if commit is None:
            return await self._full(space, repo)
        paths = self.state.paths(space, repo)
        state = LtHash(position.state)
        changes: dict[str, tuple[str | None, dict[str, Any] | None]] = {}
        for op in ops:
            old = changes[op.path][0] if op.path in changes else paths.get(op.path)
            if old is not None:
                state.remove(element(op.collection, op.rkey, old))
            if op.cid is not None:
                state.add(element(op.collection, op.rkey, op.cid))
            changes[op.path] = (op.cid, op.value)
        for path, (cid, value) in changes.items():
            if cid is not None and not (value is not None and value_matches(_op(path, cid, value))):
                log.info("ops of %s in %s: %s has no value matching its CID: fetching the whole repo",
                         repo, space, path)
                return await self._full(space, repo)
        problem = await self._check(commit, space, repo, state)
        if problem:
            log.info("ops of %s in %s do not verify (%s): fetching the whole repo", repo, space, problem)
            return await self._full(space, repo)
        changed = self._apply(space, repo, commit.rev, state, changes)
        return RepoOutcome(repo, True, changed=changed)

    async def _full(self, space: str, repo: str, *, reparse: bool = False) -> RepoOutcome:
        """Fetch, verify and apply the whole repo (a CAR); on failure index nothing and say why."""
        try:
            export = read_car(await self.client.get_repo(space, repo))
        except SyncError as exc:
            if exc.name in GONE:
                return self.remove_repo(space, repo)
            return self._failed(space, repo, str(exc))
        except ValueError as exc:
            return self._failed(space, repo, f"the repo export is malformed: {exc}")
        state = export_state(export)
        problem = await self._check(export.commit, space, repo, state)
        if problem:
            return self._failed(space, repo, problem)
        held = self.state.paths(space, repo)
        changes: dict[str, tuple[str | None, dict[str, Any] | None]] = {}
        for path, cid in export.index.items():
            if reparse or held.get(path) != cid:
                # The DAG-CBOR data model as is (bytes as bytes): the block was checked against its CID.
                value = libipld.decode_dag_cbor(export.records[path])
                changes[path] = (cid, value if isinstance(value, dict) else None)
        for path in held.keys() - export.index.keys():
            changes[path] = (None, None)
        changed = self._apply(space, repo, export.commit.rev, state, changes)
        return RepoOutcome(repo, True, full=True, changed=changed)

    async def _check(self, commit: SignedCommit, space: str, repo: str, state: LtHash) -> str | None:
        """Verify a commit with the author's key; on failure resolve the key once more (it may have rotated)."""
        problem = check_commit(commit, await self._key(repo, fresh=False), space, repo, state)
        if problem and "set hash" not in problem:
            problem = check_commit(commit, await self._key(repo, fresh=True), space, repo, state)
        return problem

    async def _key(self, repo: str, *, fresh: bool) -> PublicKey | None:
        try:
            return (await self.client.resolver.resolve(repo, fresh=fresh)).key("#atproto")
        except ResolveError:
            return None

    def _failed(self, space: str, repo: str, problem: str) -> RepoOutcome:
        log.warning("not indexing %s in %s: %s", repo, space, problem)
        self.state.repo_failed(space, repo, problem, self._now_ms())
        return RepoOutcome(repo, False, full=True, problem=problem)

    def _apply(
        self, space: str, repo: str, rev: str, state: LtHash,
        changes: dict[str, tuple[str | None, dict[str, Any] | None]],
    ) -> int:
        """Write the verified changes and the new position in one transaction; returns records changed."""
        uri = parse_space_uri(space)
        config = changes.get(f"{CONFIG}/self")
        if repo == uri.authority and config is not None and config[1] is not None:
            self._apply_config(space, config[1])
        info = self.spaces.info(space)
        model, next_model = info.model, info.next_model
        now = self._now_ms()
        puts: list[StoredDocument] = []
        deletes: list[str] = []
        paths: dict[str, PathChange] = {}
        for path, (cid, value) in changes.items():
            collection, _, rkey = path.partition("/")
            if collection != MEMORY:
                paths[path] = PathChange(cid)
                continue
            doc_id = uri.record_uri(repo, MEMORY, rkey)
            if cid is None or value is None:
                deletes.append(doc_id)
                paths[path] = PathChange(cid)
                continue
            try:
                parsed = parse_memory(value, space=uri, author=repo, rkey=rkey, model=model, now_ms=now, cid=cid,
                                      next_model=next_model)
            except BadRecord as exc:
                deletes.append(doc_id)  # an earlier, valid version must not stay searchable
                paths[path] = PathChange(cid, exc.message)
                continue
            puts.append(StoredDocument(parsed.document, parsed.skip_reason))
            paths[path] = PathChange(cid)
        result = self.spaces.write(space, puts, deletes,
                                   also=self.state.advance(space, repo, rev, state.to_bytes(), paths, now))
        return len(result.changes)

    def _apply_config(self, space: str, value: dict[str, Any]) -> None:
        """Take the authority's garden.engram.config: the model to index, the one it moves to, the prefixes.

        A switch to the declared `next` model swaps in the vectors already indexed for it (no window
        without vector search); any other change of model reads every repo again whole.
        """
        identity = _model(value)
        if identity is None:
            log.warning("the config of %s is not valid: keeping the model it had", space)
            return
        upcoming = _model(value.get("next")) if isinstance(value.get("next"), dict) else None
        info = self.spaces.info(space)
        doc_prefix, query_prefix = value.get("documentPrefix"), value.get("queryPrefix")
        prefixes = (doc_prefix if isinstance(doc_prefix, str) else "", query_prefix if isinstance(query_prefix, str) else "")
        reread = False
        if info.model is not None and identity != info.model:
            if info.next_model == identity:
                log.info("%s switches to its next model %s", space, identity.model)
                self.spaces.switch_model(space)
                info = self.spaces.info(space)
            else:
                log.info("the model of %s changed (%s → %s): re-reading every repo", space, info.model, identity)
                reread = True
        self.spaces.ensure_collection(space, identity, *prefixes)
        if upcoming != info.next_model:
            self.spaces.set_next_model(space, upcoming)
            # Memories already held were read without their nextEmbedding: read them again.
            reread = reread or upcoming is not None
        if reread:
            self.state.reset_space(space)
            self._model_changed.add(space)

    def remove_repo(self, space: str, repo: str) -> RepoOutcome:
        """A member who left: their memories go, with their position."""
        uri = parse_space_uri(space)
        memories = [uri.record_uri(repo, MEMORY, path.partition("/")[2])
                    for path in self.state.paths(space, repo) if path.startswith(MEMORY + "/")]
        result = self.spaces.write(space, [], memories, also=self.state.forget_repo(space, repo))
        log.info("%s left %s: %d memories removed", repo, space, len(result.changes))
        return RepoOutcome(repo, True, changed=len(result.changes))

    def drop_space(self, space: str) -> None:
        """A deleted space: every copy of its data goes (its records and its repos' positions, together)."""
        self.spaces.drop(space, self.state.forget_space(space))


def _model(value: Any) -> ModelIdentity | None:
    """A `defs#model` ({model, modelDigest, dims}), or None when it is not one."""
    if not isinstance(value, dict):
        return None
    model, digest, dims = value.get("model"), value.get("modelDigest"), value.get("dims")
    if not (isinstance(model, str) and isinstance(digest, str) and isinstance(dims, int)
            and not isinstance(dims, bool) and 1 <= dims <= MAX_DIMS):
        return None
    return ModelIdentity(model, digest, dims)


def _op(path: str, cid: str, value: dict[str, Any]) -> Op:
    collection, _, rkey = path.partition("/")
    return Op("", collection, rkey, cid, None, value)
