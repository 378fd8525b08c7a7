"""Credential-check benchmark: the cost of one `authenticate` call, in process.

A FakePlc directory serves the authority's DID document over real loopback HTTP. With the
document in the resolver's cache: "repeat" checks requests from 16 members in turn (a member reuses
its credential and, without a nonce, its signature headers: the steady state), "unseen" checks a
new member's first request each time (both signatures verified); "cold" also forgets the document,
so each check fetches and parses it. The part rows time the two signature checks alone. Each
figure is the median (and p99) of --n runs.

    python bench/auth.py [--n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from starlette.requests import Request  # noqa: E402

from engram_index.engram.auth import httpsig, jwt  # noqa: E402
from engram_index.engram.auth.credentials import CREDENTIAL_TYP, SpaceCredentials  # noqa: E402
from engram_index.engram.auth.state import AuthState  # noqa: E402
from engram_index.engram.identity.did import DidResolver  # noqa: E402
from engram_index.engram.identity.keys import K256, P256, parse_public_key  # noqa: E402
from engram_index.testkit.authority import SpaceAuthority  # noqa: E402
from engram_index.testkit.plc import FakePlc  # noqa: E402
from engram_index.testkit.serve import serving  # noqa: E402

AUDIENCE = "did:web:index.example"


def request(headers: dict[str, str], space: str) -> Request:
    """A Starlette request as the server would build it."""
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "GET", "path": "/xrpc/garden.engram.searchMemories",
                    "query_string": f"space={space}".encode(), "headers": raw})


async def timed(n: int, step: Callable[[], Awaitable[object]]) -> list[float]:
    """Milliseconds per call of `step`, n times."""
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await step()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    """Run and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    plc = FakePlc()
    rows: list[tuple[str, list[float]]] = []
    with serving(plc.app(), probe="/_health") as plc_url, tempfile.TemporaryDirectory() as tmp:
        for alg in (P256, K256):
            authority = SpaceAuthority(plc, alg)
            space = authority.space()
            resolver = DidResolver(plc_url)
            checker = SpaceCredentials(AUDIENCE, resolver, AuthState(Path(tmp) / f"auth-{alg}.sqlite"))
            members = [authority.member(space, AUDIENCE, style="keyed") for _ in range(16)]
            for member in members:
                member.nonce = False
            prepared = [request(m.headers(), space) for m in members]
            newcomers = [request(authority.member(space, AUDIENCE).headers(), space) for _ in range(args.n)]

            async def run() -> None:
                i = 0

                async def cached() -> object:
                    nonlocal i
                    i += 1
                    return await checker.authenticate(prepared[i % len(prepared)], space)

                async def cold() -> object:
                    nonlocal i
                    i += 1
                    resolver.forget(authority.did)
                    return await checker.authenticate(prepared[i % len(prepared)], space)

                async def unseen() -> object:
                    nonlocal i
                    i += 1
                    return await checker.authenticate(newcomers[i % len(newcomers)], space)

                await cached()
                rows.append((f"{alg}: check, repeat request, document cached", await timed(args.n, cached)))
                i = 0
                rows.append((f"{alg}: check, unseen credential, document cached", await timed(args.n, unseen)))
                rows.append((f"{alg}: check, document fetched (cold)", await timed(max(args.n // 10, 50), cold)))

                token_text = members[0].credential
                key = authority.credential_key
                public = parse_public_key(key.did_key)

                async def decode_verify() -> object:
                    return jwt.decode(token_text, typ=CREDENTIAL_TYP).verify(public)  # not memoised

                headers = members[0].headers()

                async def http_signature() -> object:
                    sig = httpsig.parse(headers["signature-input"], headers["signature"])
                    return parse_public_key(members[0].key.did_key).verify(sig.base(headers), sig.signature)

                rows.append((f"{alg}:   part: JWT decode + verify", await timed(args.n, decode_verify)))
                rows.append(("  part: RFC 9421 parse + verify (P-256)", await timed(args.n, http_signature)))

            asyncio.run(run())
    table = Table(title=f"authenticate() cost, ms (n={args.n})")
    for column in ("what", "p50", "p99"):
        table.add_column(column, justify="right" if column != "what" else "left")
    for name, values in rows:
        values.sort()
        table.add_row(name, f"{statistics.median(values):.3f}", f"{values[int(len(values) * 0.99) - 1]:.3f}")
    Console().print(table)


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
