"""kill -9 at random points, many times, by hand: what was acknowledged, and what was lost.

`--path import`: `engram-index import` of a 3000-record file in batches of 250, killed after a
random number of acknowledged batches plus 0-80 ms, rerun each time on the same data directory;
after every kill each acknowledged record must be stored once and found by its word and vector.
`--path sync`: `engram-index serve` syncing a space of 6 members x 150 memories from the fake
network (tests' SpaceNetwork, answers slowed to 0.2 s), killed when a random share of the space
is indexed; at the end every record of the network must be stored once and indexed.
`--path v5`: `engram-index serve` with a minted supermemory key and the hashing embedder; two
writers change documents through the official SDK (single adds and batches of 2-24, half under
caller ids; resubmissions under caller ids that grow a statement (a new memory version), append
or change nothing; PATCHes of content and of metadata; file uploads; deletes of 1-12 documents;
forgetting a memory by id), each on its own documents, and the server is killed 0.05-1.5 s after
it is up, then served again. After each kill the stopped store must hold every acknowledged
change once and nothing half (a chunk or memory without its document, a record without its
row, a done document without one latest memory per statement); a change cut off is sent again
(adds without an id and uploads may have landed once, or not); after each restart a sample is
checked over HTTP. At the end processing finishes and every live document must be done with its
content, metadata, chunk and latest memories, found by its word and by its text at rank 1, every
deleted one gone from gets, lists and search, every forgotten memory forgotten; and in the
reopened engine by word and by vector.
`--path kindgi`: three writers change facts (write, supersede, verify, delete; erasures and
resumes as the admin) under fresh Idempotency-Keys over HTTP, with keyed retrieves between them,
killed 0.05-1.5 s after the server is up; after each restart every cut-off change is sent again
with its key (it must succeed: replayed if it had happened), 80 acknowledged ones are replayed
(byte-identical, `X-Idempotent-Replay: true`) and 30 facts are checked with the SDK (version
chain, keyword, semantic rank 1); at the end all of them, and no file or kept answer may hold an
erased fact's words or id.

    python bench/crash.py --path import --kills 50
    python bench/crash.py --path sync --kills 10
    python bench/crash.py --path v5 --kills 20
    python bench/crash.py --path kindgi --kills 20
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.reliability.crashkit import SRC, check_acknowledged, import_command, kill_at_random  # noqa: E402
from tests.reliability.records import write_file  # noqa: E402

SPACE = "at://did:plc:rel2rel2rel2rel2rel2rel2/space/garden.engram.space/crash"


def crash_import(kills: int, seed: int) -> list[str]:
    """Kill imports at random; a row of the table."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        file, data = write_file(Path(tmp) / "in.jsonl", 3000), Path(tmp) / "data"
        acknowledged, midway, lost = 0, 0, 0
        for _ in range(kills):
            kill = kill_at_random(import_command(data, SPACE, file, 250), rng, max_acks=12)
            acknowledged = max(acknowledged, kill.through)
            midway += 0 < kill.through < 3000
            try:
                check_acknowledged(data, SPACE, acknowledged, sample=30, seed=rng.randint(0, 10**6))
            except AssertionError as exc:
                lost += 1
                print(f"kill lost something: {exc}")
        subprocess.run(import_command(data, SPACE, file, 250), check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": SRC})
        final = check_acknowledged(data, SPACE, 3000, sample=100)
    return [f"| import | {kills} | {midway} | {acknowledged} acknowledged lines | {lost} | {final} of 3000 once |"]


def crash_sync(kills: int, seed: int) -> list[str]:
    """Kill a syncing server at random shares of the space; a row of the table."""
    from engram_index.collections import Collections
    from engram_index.engine.types import SearchRequest
    from engram_index.testkit.serve import free_port
    from engram_index.testkit.spacenet import SpaceNetwork
    from tests.engram.sync.test_sync_crash import count, start
    from tests.engram.sync.test_sync_e2e import config, memory

    members_n, per = 6, 150
    total = members_n * per
    rng = random.Random(seed)
    landed = 0
    with tempfile.TemporaryDirectory() as tmp, SpaceNetwork() as net:
        data = Path(tmp)
        indexer, authority = net.account(), net.authority_account()
        members = [net.account() for _ in range(members_n)]
        space = net.create_space(members=[authority.did, *(m.did for m in members)], readers=[indexer.did])
        net.write(space, authority.did, "garden.engram.config", "self", config())
        for m, member in enumerate(members):
            net.apply(space, member.did, [("garden.engram.memory", f"3k{m:02d}{i:09d}", memory(f"m{m} note w{m}x{i}"))
                                          for i in range(per)])
        net.set_delay(0.2)
        port = free_port()
        url, did = f"http://127.0.0.1:{port}", f"did:web:127.0.0.1%3A{port}"
        for _ in range(kills):
            target = rng.randint(1, total - 1)
            proc = start(data, port, net, space, (indexer.did, indexer.password))
            deadline = time.monotonic() + 90
            seen = -1
            while time.monotonic() < deadline and not (seen >= target or seen == total):
                seen = count(url, net, space, did)
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            landed += 0 < seen < total
        net.set_delay(0.0)
        proc = start(data, port, net, space, (indexer.did, indexer.password))
        try:
            deadline = time.monotonic() + 120
            while count(url, net, space, did) != total and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(20)
        spaces = Collections(data)
        try:
            info = spaces.info(space)
            ids = [r[0] for r in spaces.store.query("SELECT doc_id FROM documents WHERE space_id=?", (info.id,))]
            index = spaces.index(space)
            words = [f"w{m}x{i}" for m in range(members_n) for i in range(0, per, 15)]
            found = sum(len(spaces.search(space, SearchRequest(mode="keyword", q=w, limit=2, explain=False)).hits) == 1
                        for w in words)
            vectors = len(index.vectors) if index.vectors is not None else 0
        finally:
            spaces.close()
    lost = total - len(set(ids))
    return [f"| sync | {kills} | {landed} | {total} records in the network | {lost} "
            f"| {len(set(ids))} of {total} once ({len(ids) - len(set(ids))} twice), {vectors} vectors, "
            f"{found}/{len(words)} words found |"]


def crash_v5(kills: int, seed: int) -> list[str]:
    """Kill a v5 server while clients change documents and memories; a row of the table."""
    from tests.reliability.crashkit_v5 import V5Crash

    with tempfile.TemporaryDirectory() as tmp:
        run = V5Crash(Path(tmp) / "data", seed=seed)
        for _ in range(kills):
            run.round()
        counts = run.finish(timeout=600)
    for problem in run.problems[:20]:
        print(f"problem: {problem}")
    midway = sum(r.unfinished_at_kill > 0 or r.cut_off > 0 for r in run.rounds)
    statuses: dict[str, int] = {}
    cut: dict[str, int] = {}
    for r in run.rounds:
        for status, n in r.statuses.items():
            statuses[status] = statuses.get(status, 0) + n
        for kind, n in r.cut_kinds.items():
            cut[kind] = cut.get(kind, 0) + n
    doubled = sum("twice" in p for p in run.problems)
    half = sum(p.startswith("half") or "done with" in p for p in run.problems)
    at_kills = ", ".join(f"{s} {n}" for s, n in sorted(statuses.items()) if s != "done")
    changes = ", ".join(f"{k} {n}" for k, n in sorted(run.kinds.items()))
    return [f"| v5 | {kills} | {midway} ({sum(r.unfinished_at_kill for r in run.rounds)} documents unfinished at"
            f" the kills: {at_kills}; {sum(cut.values())} changes cut off: "
            f"{', '.join(f'{k} {n}' for k, n in sorted(cut.items()))}) | {sum(run.kinds.values())} acknowledged"
            f" changes ({changes}) over {counts['acknowledged']} documents ({counts['retried']} cut-off changes"
            f" sent again) | {counts['lost']} | {doubled} doubled, {half} half; {counts['live']} documents done at"
            f" the end ({counts['unacknowledged_stored']} cut-off adds without an id that had landed),"
            f" {counts['deleted']} deleted and gone, {counts['forgotten']} memories forgotten,"
            f" {counts['versions']} memory versions after the first; {counts['problems']} problems |"]


def crash_kindgi(kills: int, seed: int) -> list[str]:
    """Kill a Kindgi server while clients change facts; a row of the table."""
    from tests.reliability.crashkit_kindgi import KindgiCrash

    with tempfile.TemporaryDirectory() as tmp:
        run = KindgiCrash(Path(tmp) / "data", seed=seed)
        for _ in range(kills):
            run.round()
        counts = run.finish()
    for problem in run.problems[:20]:
        print(f"problem: {problem}")
    cut = sum(r.cut_off for r in run.rounds)
    happened = sum(r.had_happened for r in run.rounds)
    kinds: dict[str, int] = {}
    for req in run.acked:
        kinds[req.kind] = kinds.get(req.kind, 0) + 1
    lost = sum("missing" in p or "finds" in p or "revisions" in p for p in run.problems)
    return [f"| kindgi | {kills} | {sum(r.cut_off > 0 for r in run.rounds)} ({cut} changes in flight: {happened}"
            f" had happened and replayed, {cut - happened} ran on retry) | {counts['acknowledged']} acknowledged"
            f" changes ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}); {counts['facts']} facts,"
            f" {counts['live']} live; {sum(r.retrieves for r in run.rounds)} keyed retrieves between them"
            f" | {lost} | {sum(r.replayed for r in run.rounds)} replays checked,"
            f" {counts['problems']} problems |"]


def main() -> None:
    """Run the kills and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", choices=["import", "sync", "v5", "kindgi"], default="import")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    started = time.monotonic()
    paths = {"import": crash_import, "sync": crash_sync, "v5": crash_v5, "kindgi": crash_kindgi}
    rows = paths[args.path](args.kills, args.seed)
    print(f"\n### kill -9: {args.path}, {time.monotonic() - started:.0f} s\n")
    print("| path | kills | landed midway | what was acknowledged | kills that lost something | at the end |")
    print("|---|---:|---:|---|---:|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
