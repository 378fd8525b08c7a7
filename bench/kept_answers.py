"""The cost of the write-behind's erasure check: kept retrieve answers written with and without it.

Kindgi keeps a keyed retrieve's answer behind its response and writes those of the next 0.2 s in
one transaction (kindgi/idempotency.py). Each answer names the facts it holds, and the writer
withholds, inside that transaction, one naming a fact whose rows are gone (erased). This fills a
fresh store with --facts facts (one revision row each), then writes batches of --batch answers
naming --names facts each, alternating the plain INSERT and the checking one, and prints the
median thread CPU ms per batch and per answer for each (the transaction's commit included).

    python bench/kept_answers.py [--facts 100000] [--batch 200] [--names 10] [--rounds 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent / "src"))

from engram_index.kindgi.idempotency import _INSERT, _Behind  # noqa: E402
from engram_index.kindgi.schema import migrate  # noqa: E402
from engram_index.store.sqlite import Statement, Store  # noqa: E402

TENANT = "acme"


def fill(store: Store, n: int) -> list[str]:
    """n facts of one tenant, one current revision each; their ids."""
    ids = [str(uuid.uuid4()) for _ in range(n)]
    for start in range(0, n, 5000):
        store.execute([("INSERT INTO kindgi_revisions(tenant, fact_id, version, type, created_ms, first_ms, current,"
                        " body) VALUES (?, ?, 1, 'note', 0, 0, 1, '{}')", (TENANT, fid))
                       for fid in ids[start:start + 5000]])
    return ids


def batch(ids: list[str], size: int, names: int, checked: bool) -> list[Statement]:
    """One write-behind transaction's statements: `size` answers naming `names` random facts each."""
    out: list[Statement] = []
    for _ in range(size):
        named = tuple(random.sample(ids, names))
        body = ('{"results":[' + ",".join(f'{{"fact":{{"id":"{f}","content":"{"x" * 200}"}}}}' for f in named)
                + "]}").encode()
        row = (uuid.uuid4().hex, "0" * 64, 200, "application/json", body, int(time.time() * 1000))
        out.append(_Behind(row, (TENANT, named)).statement() if checked else (_INSERT, row))
    return out


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--names", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    random.seed(7)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "records.sqlite")
        migrate(store)
        ids = fill(store, args.facts)
        times: dict[bool, list[float]] = {False: [], True: []}
        for round_ in range(args.rounds):
            for checked in ((False, True) if round_ % 2 == 0 else (True, False)):
                statements = batch(ids, args.batch, args.names, checked)
                start = time.thread_time()
                store.execute(statements)
                times[checked].append((time.thread_time() - start) * 1000)
        store.close()
    print(f"{args.facts:,} facts, batches of {args.batch} answers naming {args.names} facts each,"
          f" {args.rounds} batches per way (median thread CPU)")
    print("| write | ms per batch | ms per answer |")
    print("|---|---:|---:|")
    for checked, label in ((False, "plain INSERT"), (True, "INSERT withholding answers naming erased facts")):
        median = statistics.median(times[checked])
        print(f"| {label} | {median:.2f} | {median / args.batch:.4f} |")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
