"""kill -9 at random points, many times, by hand: what was acknowledged, and what was lost.

`--path import`: `engram-index import` of a 3000-record file in batches of 250, killed after a
random number of acknowledged batches plus 0-80 ms, rerun each time on the same data directory;
after every kill each acknowledged record must be stored once and found by its word and vector.
`--path sync`: `engram-index serve` syncing a space of 6 members x 150 memories from the fake
network (tests' SpaceNetwork, answers slowed to 0.2 s), killed when a random share of the space
is indexed; at the end every record of the network must be stored once and indexed.

    python bench/crash.py --path import --kills 50
    python bench/crash.py --path sync --kills 10
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


def main() -> None:
    """Run the kills and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", choices=["import", "sync"], default="import")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    started = time.monotonic()
    rows = crash_import(args.kills, args.seed) if args.path == "import" else crash_sync(args.kills, args.seed)
    print(f"\n### kill -9: {args.path}, {time.monotonic() - started:.0f} s\n")
    print("| path | kills | landed midway | what was acknowledged | kills that lost something | at the end |")
    print("|---|---:|---:|---|---:|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
