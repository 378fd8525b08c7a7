"""An acknowledged write is never lost: kill -9 a writing process, reopen, and find every write."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from engram_index.engine.keyword import document_terms
from engram_index.engine.termcounts import TermCounts
from engram_index.engine.types import SearchRequest
from engram_index.collections import Collections
from tests.limits import PATIENCE_S

pytestmark = pytest.mark.long(17)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

URI = "at://did:plc:crash/space/garden.engram.space/s"

WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from pathlib import Path
    from engram_index.engine import keyword
    from engram_index.engine.types import Document, ModelIdentity
    from engram_index.collections import Collections

    keyword.COUNTS_SAVE_S = float(sys.argv[4])  # how often the term counts are saved
    from engram_index.store.sqlite import StoredDocument

    spaces = Collections(Path(sys.argv[1]), commit_interval=0.05)
    spaces.ensure_collection(sys.argv[2], ModelIdentity("m", "d", 8))
    spaces.index(sys.argv[2])
    rng = np.random.default_rng(int(sys.argv[3]))
    n = 0
    while True:
        batch = []
        for _ in range(int(rng.integers(1, 40))):
            vec = rng.standard_normal(8).astype("<f2").tobytes()
            batch.append(StoredDocument(Document(id=f"m{n}", author="did:plc:a",
                text=f"memory word{n} about things", created_ms=n, vector=vec)))
            n += 1
        deletes = [f"m{int(rng.integers(0, n))}"] if n > 50 and rng.random() < 0.3 else []
        # Before the write: a kill between its commit and its ack leaves it landed but unacknowledged,
        # and its delete may have removed an acknowledged write.
        print("try", *deletes, flush=True)
        spaces.write(sys.argv[2], batch, deletes)
        # Acknowledged: the write returned. Tell the parent which ids now exist or not.
        print("ack", batch[0].document.id, batch[-1].document.id, *deletes, flush=True)
    """
)


def counts_saved(data: Path) -> bool:
    """Whether the term counts of the space have been saved at least once."""
    return any(data.glob("spaces/*/keyword/counts/meta.json"))


def run_and_kill(data: Path, seed: int, after_acks: int, save_s: float = 300.0) -> tuple[set[str], set[str], set[str]]:
    """Run the writer (saving term counts every `save_s`) until it has acknowledged `after_acks` batches, then SIGKILL it;
    return the acknowledged writes, the acknowledged deletes, and the deletes of the batch the kill
    cut short (which may or may not have landed).

    With save_s 0 it also waits for a first save of the term counts (a loaded machine may reach the
    acks before the saver has run once), so that the kill lands while saves and writes interleave.
    """
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data), URI, str(seed), str(save_s)],
        stdout=subprocess.PIPE, text=True, env=env,
    )
    written: set[str] = set()
    deleted: set[str] = set()
    trying: set[str] = set()  # the deletes of the batch under way (told before its write, cleared by its ack)
    assert proc.stdout is not None
    deadline = time.monotonic() + PATIENCE_S
    acks = 0

    def note(line: str) -> int:
        kind, *fields = line.split()
        if kind == "try":
            trying.clear()
            trying.update(fields)
            return 0
        first, last, *dels = fields
        written.update(f"m{i}" for i in range(int(first[1:]), int(last[1:]) + 1))
        deleted.update(dels)
        trying.clear()
        return 1

    while (acks < after_acks or (save_s == 0 and not counts_saved(data))) and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acks += note(line)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert acks >= after_acks, "the writer stopped early"
    # The writer ran ahead of this reader: the acks still in the pipe were acknowledged before the
    # kill, and their deletes landed (one may delete a write acknowledged above).
    for line in proc.stdout.read().splitlines(keepends=True):
        if line.endswith("\n"):
            note(line)
    return written, deleted, set(trying)


@pytest.mark.parametrize("seed, acks, save_s", [(1, 3, 300.0), (2, 40, 300.0), (3, 120, 300.0), (5, 120, 0.0)])
def test_every_acknowledged_write_survives_kill_9_and_the_index_agrees(
    tmp_path: Path, seed: int, acks: int, save_s: float
) -> None:
    written, deleted, maybe = run_and_kill(tmp_path, seed, acks, save_s)
    saved = list(tmp_path.glob("spaces/*/keyword/counts/meta.json"))
    if save_s == 0:  # saved while the writes went on: the restart starts from there
        assert saved and json.loads(saved[0].read_text())["seq"] > 0
    spaces = Collections(tmp_path)
    try:
        info = spaces.info(URI)
        index = spaces.index(URI)
        live = {d.id for d in spaces.store.documents(info.id, range(info.next_ord)).values()}
        # Acknowledged writes are all there (deletes may have won over earlier writes, and so may the
        # delete of the batch the kill cut short: it may have landed unacknowledged).
        assert (written - deleted - maybe) <= live
        assert not (deleted & live)
        assert len(index) == len(live) == spaces.store.count(info.id)
        assert index.keyword.num_docs() == len(live)
        assert len(index.vectors) == len(live)
        # Every live memory is findable by its unique word, and no deleted one is.
        for doc_id in list(live)[:: max(1, len(live) // 25)]:
            req = SearchRequest(mode="keyword", q=f"word{doc_id[1:]}", limit=5, explain=False)
            assert [h.document.id for h in index.search(req).hits] == [doc_id]
        for doc_id in deleted:
            req = SearchRequest(mode="keyword", q=f"word{doc_id[1:]}", limit=5, explain=False)
            assert index.search(req).hits == []
        vec = np.ones(8, np.float32)
        got = index.search(SearchRequest(mode="vector", vector=vec, limit=50, explain=False))
        assert {h.document.id for h in got.hits} <= live
        # The term counts (saved earlier or never, then caught up) agree with the records.
        records = spaces.store.documents(info.id, range(info.next_ord))
        fresh = TermCounts()
        fresh.put_many((o, document_terms(d)) for o, d in records.items())
        assert len(index.keyword.counts) == len(fresh) == len(live)
        for terms in (["memory"], ["~thing", "word7", "word70", "word99"]):
            ords = np.arange(info.next_ord)
            assert index.keyword.counts.bm25(terms, ords).tolist() == fresh.bm25(terms, ords).tolist()
    finally:
        spaces.close()


def test_reopening_twice_replays_nothing_the_second_time(tmp_path: Path) -> None:
    run_and_kill(tmp_path, 4, 10)
    first = Collections(tmp_path)
    seq = first.index(URI).keyword.committed_seq
    first.close()
    second = Collections(tmp_path)
    try:
        index = second.index(URI)
        assert index.keyword.committed_seq == seq == second.info(URI).seq
        assert not index.keyword.pending
    finally:
        second.close()
