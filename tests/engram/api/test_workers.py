"""serve --workers: indexes caught up by the parent, then served read-only by several processes."""

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from engram_index.engine.types import Document, ModelIdentity
from engram_index.errors import StorageError
from engram_index.collections import Collections
from engram_index.store.sqlite import StoredDocument

from engram_index.testkit.authority import SpaceAuthority
from engram_index.testkit.plc import FakePlc

from .server import free_port, serving
from tests.limits import serve_command

pytestmark = pytest.mark.long(15)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

SERVICE_DID = "did:web:index.example"

SPACE = "at://did:plc:work234work234work234wor/space/garden.engram.space/s"
SRC = str(Path(__file__).resolve().parents[3] / "src")


def seed(data: Path) -> None:
    spaces = Collections(data)
    spaces.ensure_collection(SPACE, ModelIdentity("m", "d", 4))
    spaces.write(SPACE, [StoredDocument(Document(id=f"{SPACE}/did:plc:a/garden.engram.memory/r{i}", author="did:plc:a",
                                                  text=f"worker note {i}", created_ms=i)) for i in range(20)])
    spaces.close()  # the keyword index is left behind the records: the parent must catch up


def test_two_worker_processes_check_credentials_and_serve_searches_after_the_parent_catches_up(
    tmp_path: Path,
) -> None:
    seed(tmp_path)
    port = free_port()
    plc = FakePlc()
    authority = SpaceAuthority(plc, did=SPACE.split("/")[2])
    with serving(plc.app(), probe="/_health") as plc_url:
        proc = subprocess.Popen(
            serve_command(sys.executable, tmp_path, port,
             "--service-did", SERVICE_DID, "--plc-url", plc_url, "--workers", "2", "--embedder", "none"),
            env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        try:
            url = f"http://127.0.0.1:{port}/xrpc/garden.engram.searchMemories"
            params = {"space": SPACE, "q": "worker note"}
            member = authority.member(SPACE, SERVICE_DID)
            deadline, answers = time.monotonic() + 60, []
            while time.monotonic() < deadline and len(answers) < 20:
                try:
                    r = httpx.get(url, params=params, headers=member.headers())
                    if r.status_code == 200:
                        answers.append(r.json())
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
            assert len(answers) == 20, proc.stderr.read(4000) if proc.poll() is not None else "no answers"
            assert all(a["mode"] == "keyword" and len(a["memories"]) == 10 for a in answers)
            assert httpx.get(url, params=params).status_code == 401
            member.nonce = True
            once = member.headers()
            # Whichever worker a replay reaches, the nonce store they share refuses it.
            statuses = [httpx.get(url, params=params, headers=once).status_code for _ in range(4)]
            assert statuses == [200, 401, 401, 401]
            children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
            assert len(children) >= 2
        finally:
            proc.terminate()
            proc.wait(20)


def test_a_read_only_data_directory_refuses_writes_and_an_index_behind_its_records(tmp_path: Path) -> None:
    seed(tmp_path)
    reader = Collections(tmp_path, read_only=True)
    try:
        with pytest.raises(StorageError, match="open it for writing first"):
            reader.index(SPACE)
        with pytest.raises(StorageError, match="read-only"):
            reader.write(SPACE, [])
    finally:
        reader.close()
    writer = Collections(tmp_path)
    writer.catch_up()
    writer.close()
    first, second = Collections(tmp_path, read_only=True), Collections(tmp_path, read_only=True)  # readers share
    try:
        assert len(first.index(SPACE)) == 20 and len(second.index(SPACE)) == 20
        with pytest.raises(StorageError, match="in use"):
            Collections(tmp_path)  # but a writer must wait for them
    finally:
        first.close()
        second.close()


def test_read_only_processes_map_the_vectors_the_writer_saved_and_rebuild_them_when_records_moved_on(
    tmp_path: Path,
) -> None:
    seed(tmp_path)
    writer = Collections(tmp_path)
    writer.write(SPACE, [StoredDocument(Document(id=f"{SPACE}/did:plc:a/garden.engram.memory/v{i}", author="did:plc:a",
                                                  text=f"vector note {i}", created_ms=100 + i,
                                                  vector=np.eye(4, dtype="<f2")[i].tobytes())) for i in range(4)])
    writer.catch_up()  # what serve --workers does before starting its workers
    expected = writer.index(SPACE).vectors.search(np.ones(4, np.float32), 4)  # type: ignore[union-attr]
    writer.close()
    reader = Collections(tmp_path, read_only=True)
    try:
        vectors = reader.index(SPACE).vectors
        assert vectors is not None and vectors.mapped
        got = vectors.search(np.ones(4, np.float32), 4)
        assert got.ords.tolist() == expected.ords.tolist() and got.sims.tolist() == expected.sims.tolist()
        assert len(reader.index(SPACE)) == 24
    finally:
        reader.close()
    writer = Collections(tmp_path)
    writer.write(SPACE, [StoredDocument(Document(id=f"{SPACE}/did:plc:a/garden.engram.memory/w", author="did:plc:a",
                                                  text="late note", created_ms=200,
                                                  vector=np.ones(4, dtype="<f2").tobytes()))])
    writer.index(SPACE)
    writer.close()  # the keyword index caught up; the saved vectors are now behind the records
    reader = Collections(tmp_path, read_only=True)
    try:
        vectors = reader.index(SPACE).vectors
        assert vectors is not None and not vectors.mapped and len(vectors) == 5
    finally:
        reader.close()
