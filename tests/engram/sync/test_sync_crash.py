"""A crash in the middle of a sync loses nothing and indexes nothing twice: kill -9 a real
`engram-index serve` while it pulls a space, start it again, and compare with the network."""

from __future__ import annotations

import pytest
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from engram_index.engine.types import SearchRequest
from engram_index.collections import Collections
from engram_index.engram.syncstate import SyncState
from engram_index.testkit.serve import free_port
from engram_index.testkit.spacenet import SpaceNetwork

from .test_sync_e2e import config, memory
from tests.limits import serve_command

pytestmark = pytest.mark.long(23)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

SRC = str(Path(__file__).resolve().parents[3] / "src")
MEMBERS, PER_MEMBER = 6, 150


def start(data: Path, port: int, net: SpaceNetwork, space: str, account: tuple[str, str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": SRC, "ENGRAM_SPACES": space,
           "ENGRAM_SYNC_ACCOUNT": account[0], "ENGRAM_SYNC_PASSWORD": account[1]}
    return subprocess.Popen(
        serve_command(sys.executable, data, port,
         "--service-did", f"did:web:127.0.0.1%3A{port}", "--plc-url", net.plc_url, "--embedder", "none",
         "--poll-interval", "3600"),
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def count(url: str, net: SpaceNetwork, space: str, did: str) -> int:
    try:
        r = httpx.get(f"{url}/xrpc/garden.engram.getSpaceStatus", params={"space": space},
                      headers=net.authority.member(space, did).headers(), timeout=5)
    except httpx.TransportError:
        return -1
    return int(r.json()["memories"]) if r.status_code == 200 else -1


def test_a_sync_killed_midway_resumes_without_losing_or_doubling_anything(tmp_path: Path) -> None:
    with SpaceNetwork() as net:
        indexer = net.account()
        authority = net.authority_account()
        members = [net.account() for _ in range(MEMBERS)]
        space = net.create_space(members=[authority.did, *(m.did for m in members)], readers=[indexer.did])
        net.write(space, authority.did, "garden.engram.config", "self", config())
        for m, member in enumerate(members):
            net.apply(space, member.did, [("garden.engram.memory", f"3k{m:02d}{i:09d}", memory(f"m{m} note {i}"))
                                          for i in range(PER_MEMBER)])
        net.set_delay(0.4)  # each answer takes a while, so the kill lands between repos
        port = free_port()
        url, did = f"http://127.0.0.1:{port}", f"did:web:127.0.0.1%3A{port}"
        proc = start(tmp_path, port, net, space, (indexer.did, indexer.password))
        seen = -1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen = count(url, net, space, did)
            if 0 < seen < MEMBERS * PER_MEMBER:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert 0 < seen < MEMBERS * PER_MEMBER, f"the kill did not land mid-sync ({seen})"
        net.set_delay(0.0)
        proc = start(tmp_path, port, net, space, (indexer.did, indexer.password))
        try:
            deadline = time.monotonic() + 60
            while count(url, net, space, did) != MEMBERS * PER_MEMBER:
                assert time.monotonic() < deadline, "the sync did not finish after the restart"
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(20)
    spaces = Collections(tmp_path)
    try:
        info = spaces.info(space)
        assert spaces.store.count(info.id) == MEMBERS * PER_MEMBER
        ids = [row[0] for row in spaces.store.query("SELECT doc_id FROM documents WHERE space_id=?", (info.id,))]
        assert len(ids) == len(set(ids)) == MEMBERS * PER_MEMBER  # each record once
        state = SyncState(spaces.store)
        for member in members:
            position = state.position(space, member.did)
            assert position is not None and position.rev is not None and position.problem is None
            assert len(state.paths(space, member.did)) == PER_MEMBER
        result = spaces.search(space, SearchRequest(mode="keyword", q="note", limit=50))
        assert len(result.hits) == 50
    finally:
        spaces.close()
