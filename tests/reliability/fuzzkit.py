"""Contract-driven fuzzing of a served face: generate calls, send them, judge every answer.

A face is one `Face` entry (see faces.py): how to serve it, a hypothesis strategy of calls made
from its contract, and two checks, its error envelope and its success schema. What is judged is
the same for every face: no 5xx (but the temporary ones the face declares), every error in the
face's envelope, every 200 valid against its schema, the server alive and its RSS flat. The raw
HTTP fuzzer below the faces sends mutated request heads and wants a JSON answer, never a reset.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from .rawhttp import exchange
from tests.limits import ROOMY_SERVE_OPTIONS


# How the faces start `engram-index` (bench/heap.py swaps in its memory hooks, in place).
SERVER: list[str] = [sys.executable, "-m", "engram_index.cli"]


def serve_command(*args: str) -> list[str]:
    """`engram-index serve ARGS`, as the faces start it."""
    return [*SERVER, "serve", *ROOMY_SERVE_OPTIONS, *args]


@dataclass(frozen=True)
class Call:
    """One HTTP request: `check` names what a 200 is checked against (for XRPC, the NSID)."""

    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    check: str = ""

    def __str__(self) -> str:
        """A short readable form, for reports."""
        query = "&".join(f"{k}={v[:60]!r}" for k, v in self.params)[:400]
        return f"{self.method} {self.path}?{query} body={(self.body or b'')[:120]!r}"


@dataclass
class Pool:
    """What earlier answers gave (cursors, URIs), for stateful calls that follow them."""

    values: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, value: str, cap: int = 200) -> None:
        """Remember a value of a kind, keeping the newest `cap`."""
        bucket = self.values.setdefault(kind, [])
        if value not in bucket:
            bucket.append(value)
            del bucket[:-cap]

    def pick(self, kind: str, index: int) -> str | None:
        """The `index`-th remembered value of a kind (modulo), or None when there is none."""
        bucket = self.values.get(kind)
        return bucket[index % len(bucket)] if bucket else None


@dataclass
class Served:
    """A running server of a face: its URL, its process id and the pool of values seen."""

    url: str
    pid: int
    pool: Pool = field(default_factory=Pool)
    facts: dict[str, Any] = field(default_factory=dict)  # what the face put in it (spaces, ids)


@dataclass(frozen=True)
class Face:
    """Everything face-specific the fuzzer needs: a new face is one more of these."""

    name: str
    serve: Callable[[Path], AbstractContextManager[Served]]
    calls: Callable[[Served], st.SearchStrategy[Call]]
    envelope_errors: Callable[[Call, int, Any], list[str]]
    output_errors: Callable[[Call, Any], list[str]]
    remember: Callable[[Served, Call, Any], None]
    paths: tuple[str, ...]  # the face's routes, for the raw HTTP fuzzer
    temporary: frozenset[int] = frozenset({503})  # 5xx statuses the face may answer under load
    # A header every error must carry equal to the body's `error.requestId` (Kindgi's X-Request-Id).
    request_id_header: str | None = None


@dataclass
class Tally:
    """What came back, by status and error name, and every violation."""

    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)


# The web page's own files (console/web.py): the one answer that is not JSON, served as what it is.
PAGE_FILES = {"/": "text/html", "/console/app.js": "text/javascript", "/console/app.css": "text/css"}


def _a_page(call: Call, status: int, headers: httpx.Headers | None) -> bool:
    """Whether the answer is one of the web page's files, fetched and served with the file's type."""
    kind = PAGE_FILES.get(call.path)
    if kind is None or call.method not in ("GET", "HEAD") or not 200 <= status < 300 or headers is None:
        return False
    return headers.get("content-type", "").split(";")[0].strip() == kind


def judge(face: Face, call: Call, status: int, raw: bytes, tally: Tally,
          headers: httpx.Headers | None = None) -> list[str]:
    """Every way one answer breaks the rules (empty when it keeps them), counted in the tally."""
    tally.requests += 1
    tally.statuses[status] += 1
    problems: list[str] = []
    if status >= 500 and status not in face.temporary:
        problems.append(f"status {status}")
    body: Any = None
    if call.method != "HEAD" and status != 204 and not _a_page(call, status, headers):
        try:
            body = json.loads(raw)
        except ValueError:
            problems.append("body is not JSON")
    if body is not None:
        if 200 <= status < 300:
            problems += face.output_errors(call, body)
        elif status >= 400:
            problems += face.envelope_errors(call, status, body)
            if face.request_id_header and headers is not None and isinstance(body, dict) and not shared_envelope(body):
                inner = body.get("error")
                given = headers.get(face.request_id_header)
                if not isinstance(inner, dict) or given != inner.get("requestId"):
                    problems.append(f"{face.request_id_header} {given!r} is not the body's requestId")
            if isinstance(body, dict):
                error = body.get("error")  # a name, or Kindgi's {code, …}
                tally.errors[str(error.get("code") if isinstance(error, dict) else error)[:40]] += 1
    if problems:
        tally.violations.append(f"{call} -> {status} {raw[:200]!r}: {problems}")
    return problems


def send(client: httpx.Client, served: Served, call: Call) -> tuple[int, bytes, httpx.Headers]:
    """Send a call; a transport failure is status 0."""
    try:
        r = client.request(call.method, served.url + call.path, params=list(call.params), content=call.body,
                           headers=dict(call.headers))
    except httpx.TransportError:
        return 0, b"", httpx.Headers()
    return r.status_code, r.content, r.headers


def fuzz(face: Face, served: Served, tally: Tally, examples: int, seed: int | None = None) -> None:
    """Run `examples` generated calls (hypothesis shrinks the first violation and raises it)."""
    client = httpx.Client(timeout=30)

    @settings(max_examples=examples, deadline=None, database=None, derandomize=seed is not None,
              suppress_health_check=list(HealthCheck),
              phases=[Phase.generate, Phase.target, Phase.shrink])
    @given(st.data())
    def run(data: st.DataObject) -> None:
        call = data.draw(face.calls(served), label="call")
        status, raw, headers = send(client, served, call)
        problems = judge(face, call, status, raw, tally, headers)
        assert status != 0, f"no answer to {call}: the server is down?"
        assert not problems, f"{call} -> {status} {raw[:300]!r}: {problems}"
        if 200 <= status < 300 and raw and not _a_page(call, status, headers):
            face.remember(served, call, json.loads(raw))

    try:
        run()
    finally:
        client.close()


# -- below the faces: raw HTTP --------------------------------------------------------------

_TOKENS = [b"GET", b"POST", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE", b"PATCH", b"CONNECT", b"G\x00T", b"get"]


def raw_requests(paths: tuple[str, ...]) -> st.SearchStrategy[bytes]:
    """Request heads made from a valid one by breaking one or more parts of it."""
    method = st.sampled_from(_TOKENS) | st.binary(min_size=0, max_size=8)
    target = st.sampled_from([p.encode() for p in paths]) | st.builds(
        lambda p, junk: p.encode() + junk, st.sampled_from(paths), st.binary(max_size=40))
    version = st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2", b"HTTP/1.1 ", b"http/1.1", b""])
    header = st.tuples(st.sampled_from([b"Host", b"Content-Length", b"Transfer-Encoding", b"Connection", b"X-A",
                                        b"Bad Name", b""]) | st.binary(max_size=12),
                       st.sampled_from([b"127.0.0.1", b"0", b"-1", b"x", b"chunked", b"close", b"\xff\xfe"])
                       | st.binary(max_size=20))
    headers = st.lists(header, max_size=5)
    sep = st.sampled_from([b"\r\n", b"\n", b"\r", b"\r\n "])

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        host = [] if draw(st.booleans()) and draw(st.booleans()) else [(b"Host", b"127.0.0.1")]
        lines = [draw(method) + b" " + draw(target) + b" " + draw(version)]
        lines += [name + b": " + value for name, value in host + draw(headers)]
        s = draw(sep)
        return s.join(lines) + b"\r\n\r\n"

    return build()


_TCHAR = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def readable_target(request: bytes) -> str:
    """The request target a server can still read from a head (RFC 9112 §3: a method token, one space,
    an origin-form target up to the first byte that is not visible ASCII), or "" when there is none.

    A malformed head with a readable target under a face's prefix must get that face's envelope;
    only one whose target cannot be read may get the shared (XRPC) one.
    """
    method, space, rest = request.partition(b" ")
    if not method or not space or not set(method) <= _TCHAR or not rest.startswith(b"/"):
        return ""
    end = next((i for i, byte in enumerate(rest) if not 0x21 <= byte <= 0x7E), len(rest))
    return rest[:end].decode("ascii")


def shared_envelope(body: Any) -> bool:
    """Whether a body is the shared (XRPC) envelope: {"error": Name, "message": text}."""
    return isinstance(body, dict) and set(body) <= {"error", "message"} and isinstance(body.get("error"), str)


def fuzz_raw(face: Face, served: Served, tally: Tally, examples: int, seed: int | None = None) -> None:
    """Send mutated request heads; each must get a JSON answer (or, for HEAD/204, none), never a reset."""

    @settings(max_examples=examples, deadline=None, database=None, derandomize=seed is not None,
              suppress_health_check=list(HealthCheck))
    @given(raw_requests(face.paths))
    def run(request: bytes) -> None:
        response = exchange(served.url, request, timeout=15)
        call = Call(request.split(b" ")[0].decode("latin-1")[:10], readable_target(request),
                    (("raw", repr(request[:200])),), check="raw")
        assert not response.reset, f"connection reset for {request[:300]!r}"
        assert response.status, f"no answer to {request[:300]!r}"
        problems = judge(face, call, response.status, response.body, tally,
                         httpx.Headers(response.headers)) if response.status != 200 else []
        if response.status == 200:
            tally.requests += 1
            tally.statuses[200] += 1
        assert not problems, f"{request[:300]!r} -> {response.status} {response.body[:200]!r}: {problems}"

    run()


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB."""
    return float(psutil.Process(pid).memory_info().rss) / 2**20


def settled_rss_mb(pid: int, seconds: float = 6.0) -> float:
    """A process's lowest resident memory over `seconds`, read twice a second.

    Native memory held for a while and let go (the v5 pipeline's and tantivy's threads, glibc's
    arenas until the committer trims them) swings a single reading by tens of MB; what a leak
    raises is the floor.
    """
    low = rss_mb(pid)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.5)
        low = min(low, rss_mb(pid))
    return low


def alive(served: Served, probe: str) -> bool:
    """Whether the server still answers its health probe."""
    try:
        return httpx.get(served.url + probe, timeout=10).status_code == 200
    except httpx.TransportError:
        return False


def rounds(seconds: float, examples: int) -> Iterator[int]:
    """Round numbers until `seconds` have passed (at least one round)."""
    end = time.monotonic() + seconds
    n = 0
    while n == 0 or time.monotonic() < end:
        yield n
        n += 1


def wait_up(url: str, proc: subprocess.Popen[bytes], probe: str = "/xrpc/_health",
            params: dict[str, str] | None = None, up: Callable[[int], bool] = lambda status: status == 200,
            timeout: float = 60) -> None:
    """Wait until a server this suite started answers `probe` with a status `up` accepts."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited"
        try:
            if up(httpx.get(url + probe, params=params, timeout=5).status_code):
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("the server did not get ready")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server this suite started."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
