"""Sync in the background: a thread with its own event loop that takes sync requests (from write
notifications, from the periodic poll, at start), coalesces them per space, and runs at most a
few spaces at once; it also keeps our notification registrations from lapsing."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass

from engram_index.engram.identity.did import PLC_DEFAULT, DidResolver
from engram_index.collections import Collections
from engram_index.engram.sync.client import Account, SyncClient, SyncError
from engram_index.engram.sync.syncer import Syncer

log = logging.getLogger("engram_index.engram.sync")

RENEW_NOTIFY_BEFORE_MS = 3600 * 1000


@dataclass(frozen=True)
class SyncConfig:
    """How this node syncs: its account, where DIDs resolve, its public URL, how often it polls."""

    account: Account | None = None
    plc_url: str = PLC_DEFAULT
    public_url: str | None = None
    poll_s: float = 300.0
    did_web_http_localhost: bool = False
    concurrent_spaces: int = 2
    retry_s: float = 30.0  # a repo that failed verification is tried again after this long
    did_min_refresh: float = 5.0  # how often a DID may be re-resolved uncached (a rotated key)
    open_registration: bool = False  # members may ask for their spaces to be indexed (registerSpace)


class SyncRunner:
    """Runs a Syncer on a background thread; `request` may be called from any thread."""

    def __init__(self, spaces: Collections, config: SyncConfig, service_did: str) -> None:
        self.spaces = spaces
        self.config = config
        self.service_did = service_did
        self.resolver = DidResolver(config.plc_url, allow_http_localhost=config.did_web_http_localhost,
                                    min_refresh=config.did_min_refresh)
        self.client = SyncClient(self.resolver, config.account)
        self.syncer = Syncer(spaces, self.client)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pending: dict[str, set[str] | None] = {}
        self._deleting: set[str] = set()
        self._running: set[str] = set()
        self._wake: asyncio.Event | None = None
        self._ready = threading.Event()
        self._stopping = False
        self.completed = 0  # spaces synced since start (tests and status read it)

    def start(self) -> None:
        """Start the thread; every configured space is synced at once."""
        self._thread = threading.Thread(target=self._run, name="sync", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        for space in self.configured():
            self.request(space)

    def stop(self) -> None:
        """Stop after the syncs in progress finish their current repo."""
        self._stopping = True
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)
        if self._thread is not None:
            self._thread.join(30)

    def configured(self) -> list[str]:
        """The spaces this node keeps current."""
        return [space for space, _, _ in self.syncer.state.spaces()]

    async def can_read(self, space: str) -> str | None:
        """Why this node's account cannot read `space` (None when a fresh credential for it was granted).

        Runs on the sync thread's loop, whose HTTP clients and sessions the credential belongs to.
        """
        if self._loop is None:
            return "sync is not running"

        async def fetch() -> str | None:
            try:
                await self.client.credential(space, renew=True)
            except SyncError as exc:
                return str(exc)
            return None

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(fetch(), self._loop))

    def request(self, space: str, repo: str | None = None) -> None:
        """Ask for a sync of one repo of `space`, or of all of it (repo None)."""
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._enqueue, space, repo)

    def _enqueue(self, space: str, repo: str | None) -> None:
        if space in self._pending:
            wanted = self._pending[space]
            if wanted is not None:
                if repo is None:
                    self._pending[space] = None
                else:
                    wanted.add(repo)
        else:
            self._pending[space] = None if repo is None else {repo}
        assert self._wake is not None
        self._wake.set()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._wake = asyncio.Event()
        self._ready.set()
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        assert self._wake is not None
        workers: set[asyncio.Task[None]] = set()
        next_poll = time.monotonic() + self.config.poll_s
        await self._renew_notifications()
        while not self._stopping:
            timeout = max(0.0, next_poll - time.monotonic())
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            if time.monotonic() >= next_poll:
                # The backstop: notifications may be lost; listRepos tells which repos moved.
                next_poll = time.monotonic() + self.config.poll_s
                for space in self.configured():
                    self._enqueue(space, None)
                await self._renew_notifications()
            for space in list(self._deleting - self._running):
                self._deleting.discard(space)
                self.spaces.drop(space, self.syncer.state.forget_space(space))
                log.info("space %s deleted by its authority: its data is gone", space)
            for space in list(self._pending):
                if len(self._running) >= self.config.concurrent_spaces:
                    break
                if space in self._running:
                    continue
                repos = self._pending.pop(space)
                self._running.add(space)
                task = asyncio.create_task(self._sync(space, repos))
                workers.add(task)
                task.add_done_callback(workers.discard)
        for task in list(workers):
            await task

    async def _sync(self, space: str, repos: set[str] | None) -> None:
        try:
            if self.syncer.state.is_configured(space):
                outcomes = await self.syncer.sync_space(space, sorted(repos) if repos is not None else None)
                for failed in (o for o in outcomes if not o.ok):
                    # A key may have rotated, a host may have hiccuped: try again later.
                    asyncio.get_running_loop().call_later(self.config.retry_s, self._enqueue, space, failed.repo)
        except Exception:
            log.exception("sync of %s failed", space)
        finally:
            self._running.discard(space)
            self.completed += 1
            assert self._wake is not None
            self._wake.set()  # a request that came in meanwhile may run now

    async def _renew_notifications(self) -> None:
        """Register (again) with each space's host before the registration lapses."""
        if not self.config.public_url:
            return
        now_ms = int(time.time() * 1000)
        for space in self.configured():
            if self.syncer.state.notify_until(space) - now_ms > RENEW_NOTIFY_BEFORE_MS:
                continue
            try:
                until = await self.client.register_notify(space, self.service_did, self.config.public_url)
                self.syncer.state.set_notify_until(space, until)
            except SyncError as exc:
                log.warning("could not register for notifications of %s: %s", space, exc)

    def delete_space(self, space: str) -> None:
        """A space deleted by its authority: stop syncing it and drop its data once no sync of it runs."""
        self.syncer.state.remove_space(space)
        if self._loop is None:
            self.spaces.drop(space, self.syncer.state.forget_space(space))
            return
        self._loop.call_soon_threadsafe(self._enqueue_delete, space)

    def _enqueue_delete(self, space: str) -> None:
        self._pending.pop(space, None)
        self._deleting.add(space)
        assert self._wake is not None
        self._wake.set()
