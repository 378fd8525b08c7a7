"""The faces the reliability suite drives, one entry each: how to serve it, its calls, its checks.

garden.engram's calls are generated from the lexicons the service ships: every query's
parameters, valid and not (types, formats, bounds, knownValues, repeats, unknown names), with
values the served spaces hold (spaces, authors, URIs, cursors from earlier pages) so that calls
reach the handlers. To add a face (v5 under /ns/, Kindgi under /v1/memory/), write its `serve`
(a data directory in, a running server out), a strategy of calls from its request schemas, and
its two checks, then add it to FACES.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from datetime import datetime
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from engram_index.collections import Collections
from engram_index.engine.types import ModelIdentity
from engram_index.engram.api.lexicon import Lexicons, nsids
from engram_index.engram.importer import import_jsonl
from engram_index.engram.records import encode_query_vector
from engram_index.testkit.serve import free_port

from .faces_kindgi import KINDGI
from .faces_v5 import V5
from .fuzzkit import Call, Face, Served, serve_command, stop, wait_up
from .records import AUTHOR, MODEL, line, write_file

SRC = str(Path(__file__).resolve().parents[2] / "src")
LEX = Lexicons.bundled()
SPACE = f"at://{AUTHOR}/space/garden.engram.space/fuzz"
BARE = f"at://{AUTHOR}/space/garden.engram.space/nomodel"  # a space without a model
UNKNOWN = f"at://{AUTHOR}/space/garden.engram.space/absent"
RECORDS = 300
# Error names any XRPC method may answer, beside those its lexicon declares.
XRPC_GENERIC = frozenset({
    "InvalidRequest", "AuthRequired", "InvalidToken", "ExpiredToken", "RevokedToken", "BadSpaceAudience",
    "BadSpaceSignature", "MethodNotImplemented", "RateLimitExceeded", "PayloadTooLarge", "Unavailable",
    "AuthorityUnreachable", "UnknownSpace", "Forbidden",
})
PROCEDURES = ("com.atproto.space.notifyCredentialRevoked", "com.atproto.space.notifyWrite",
              "com.atproto.space.notifySpaceDeleted")


# -- serving ----------------------------------------------------------------------------------


def start_server(data: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    """`engram-index serve --insecure-open` on a loopback port, as an operator runs it."""
    return subprocess.Popen(
        serve_command("--data", str(data), "--port", str(port),
                      "--insecure-open", "--embedder", "none", "--no-access-log", *extra),
        env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_ready(url: str, space: str | None, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Wait until the server answers and, when given, `space` is loaded."""
    if space is None:
        wait_up(url, proc, timeout=timeout)
    else:
        wait_up(url, proc, "/xrpc/garden.engram.searchMemories", {"space": space, "q": "x", "mode": "keyword"},
                lambda status: status != 503, timeout)


@contextmanager
def serve_engram(data: Path) -> Iterator[Served]:
    """A data directory with a space of RECORDS memories and one without a model, served."""
    spaces = Collections(data)
    try:
        spaces.ensure_collection(SPACE, ModelIdentity(*MODEL))
        spaces.ensure_collection(BARE)
        import_jsonl(spaces, SPACE, write_file(data / "fuzz.jsonl", RECORDS))
        import_jsonl(spaces, BARE, write_file(data / "bare.jsonl", 20))
    finally:
        spaces.close()
    port = free_port()
    proc = start_server(data, port, "--rate", "1000000", "--burst", "1000000")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, SPACE, proc)
        served = Served(url, proc.pid, facts={"spaces": [SPACE, BARE]})
        for i in range(0, RECORDS, 7):
            served.pool.add("uri", f"{SPACE}/{AUTHOR}/garden.engram.memory/r{i}")
        yield served
    finally:
        stop(proc)


# -- calls from the lexicons ----------------------------------------------------------------

_JUNK = st.text(max_size=40) | st.sampled_from([
    "", " ", "\x00", "%", "null", "[]", "{}", "-1", "1e309", "NaN", "\u202e", "\ud7ff", "\U0010ffff", "a" * 5000,
])


def _datetimes() -> st.SearchStrategy[str]:
    """RFC 3339 datetimes, with fractions, offsets and the odd leap second."""
    base = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2100, 1, 1))
    zone = st.sampled_from(["Z", "+00:00", "+05:30", "-08:00"])
    frac = st.sampled_from(["", ".1", ".123", ".123456", ".123456789"])
    valid = st.builds(lambda d, f, z: d.strftime("%Y-%m-%dT%H:%M:%S") + f + z, base, frac, zone)
    return valid | st.just("2016-12-31T23:59:60Z")


def _value(name: str, spec: dict[str, Any], served: Served, nsid: str, clean: bool) -> st.SearchStrategy[str]:
    """A query-string value for one lexicon parameter: valid when `clean`, else sometimes not."""
    kind, fmt = spec.get("type"), spec.get("format")
    valid: st.SearchStrategy[str]
    if name == "space":
        valid = st.sampled_from([SPACE, SPACE, SPACE, BARE, UNKNOWN, "at://did:plc:x/space/t/k"])
    elif name == "uri":
        valid = st.integers(0, 10**6).map(lambda i: served.pool.pick("uri", i) or SPACE)
    elif name == "cursor":
        valid = st.integers(0, 10**6).map(lambda i: served.pool.pick(f"cursor:{nsid}", i) or "x") | st.builds(
            lambda raw: base64.urlsafe_b64encode(raw).decode().rstrip("="),
            st.binary(max_size=60) | st.builds(lambda a, b: json.dumps([a, b]).encode(), st.integers(), st.text()))
    elif name == "vector":
        valid = st.builds(lambda dims, seed: encode_query_vector(np.random.default_rng(seed).standard_normal(dims)),
                          st.sampled_from([MODEL[2], MODEL[2], MODEL[2], 4, 1]), st.integers(0, 1000))
    elif name == "model":
        valid = st.sampled_from([MODEL[0], "other"])
    elif name == "modelDigest":
        valid = st.sampled_from([MODEL[1], "sha256:ff"])
    elif name == "q":
        valid = st.sampled_from(["note", "things", "uniq000007x", "note about", "zzz"]) | st.text(max_size=60)
    elif name == "minSimilarity":
        valid = st.sampled_from(["0.4", "1", "0.0001", "0", "1.5", "-0.1", "1e-3", "abc"])
    elif "knownValues" in spec:
        valid = st.sampled_from(spec["knownValues"])
    elif kind == "integer":
        lo, hi = spec.get("minimum", -10), spec.get("maximum", 1000)
        valid = st.integers(lo - 3, hi + 3).map(str)
    elif kind == "boolean":
        valid = st.sampled_from(["true", "false"])
    elif fmt == "did":
        valid = st.sampled_from([AUTHOR, "did:plc:other", "did:web:example.com"])
    elif fmt == "datetime":
        valid = _datetimes()
    elif kind == "string":
        valid = st.sampled_from(["t", "u", "T"]) | st.text(max_size=int(spec.get("maxLength", 64)) // 4 + 1)
    else:
        valid = st.text(max_size=40)
    return valid if clean else st.one_of(valid, valid, valid, _JUNK)


@st.composite
def _query(draw: st.DrawFn, served: Served, nsid: str) -> Call:
    """A GET of one query with lexicon-shaped parameters."""
    props = LEX.main(nsid).get("parameters", {}).get("properties", {})
    clean = draw(st.booleans())  # half the calls keep to the lexicon: they reach the handlers
    params: list[tuple[str, str]] = []
    for name, spec in props.items():
        if name == "space" and draw(st.integers(0, 20)) > 0:
            params.append((name, draw(_value(name, spec, served, nsid, clean))))
            continue
        array = spec.get("type") == "array"
        how = draw(st.sampled_from(["absent", "absent", "one", "one", "one"] + (["many"] if array or not clean else [])))
        item = spec.get("items", spec) if array else spec
        count = {"absent": 0, "one": 1, "many": draw(st.integers(2, 16 if clean else 18))}[how]
        params += [(name, draw(_value(name, item, served, nsid, clean))) for _ in range(count)]
    if not clean and draw(st.integers(0, 4)) == 0:
        params.append((draw(st.text(min_size=1, max_size=10)), draw(_JUNK)))
    params = draw(st.permutations(params))
    method = "GET" if clean else draw(st.sampled_from(["GET"] * 6 + ["HEAD", "POST", "OPTIONS", "DELETE"]))
    return Call(method, f"/xrpc/{nsid}", tuple(params), check=nsid)


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                     max_leaves=12)


@st.composite
def _procedure(draw: st.DrawFn, nsid: str) -> Call:
    """A POST of one procedure with a JSON body shaped like its input (or not)."""
    body = draw(st.fixed_dictionaries({}, optional={"space": st.sampled_from([SPACE, UNKNOWN, "x"]),
                                                    "jti": st.text(max_size=10), "exp": st.integers(),
                                                    "repo": st.sampled_from([AUTHOR, "x"])}) | _JSON)
    raw = json.dumps(body).encode() if draw(st.integers(0, 9)) else draw(st.binary(max_size=60))
    headers = draw(st.sampled_from([(), (("authorization", "Bearer x.y.z"),), (("content-type", "text/plain"),)]))
    return Call(draw(st.sampled_from(["POST"] * 6 + ["GET"])), f"/xrpc/{nsid}", (), raw, headers, check=nsid)


def engram_calls(served: Served) -> st.SearchStrategy[Call]:
    """Every garden.engram query and procedure, and some paths that are none."""
    queries = [_query(served, nsid) for nsid in nsids(LEX, "query")]
    procedures = [_procedure(nsid) for nsid in [*nsids(LEX, "procedure"), *PROCEDURES]]
    stray = st.builds(lambda p, m: Call(m, p), st.sampled_from(["/xrpc/", "/xrpc/garden.engram.nothing",
                                                                 "/xrpc/_health", "/.well-known/did.json", "/"]),
                      st.sampled_from(["GET", "POST", "TRACE"]))
    return st.one_of(*queries, *queries, *procedures, stray)


# -- checks ---------------------------------------------------------------------------------


def xrpc_envelope_errors(call: Call, status: int, body: Any) -> list[str]:
    """How an error body breaks the XRPC envelope: {"error": Name, "message": text}, a declared name."""
    if not isinstance(body, dict) or set(body) - {"error", "message"} or not isinstance(body.get("error"), str):
        return [f"not an XRPC error envelope: {str(body)[:100]}"]
    if not isinstance(body.get("message", ""), str):
        return ["message is not a string"]
    if not call.path.startswith("/xrpc/"):
        return []  # a path of no face: any JSON error of that shape
    declared: set[str] = set()
    if call.check in LEX.docs:
        declared = {e["name"] for e in LEX.main(call.check).get("errors", [])}
    if body["error"] not in declared | XRPC_GENERIC | {"MemoryNotFound", "NoModel"}:
        return [f"error {body['error']!r} is neither declared by {call.check or 'the method'} nor generic"]
    return []


def xrpc_output_errors(call: Call, body: Any) -> list[str]:
    """How a 200 body breaks its method's output schema."""
    if call.check in LEX.docs and "output" in LEX.main(call.check):
        return LEX.output_errors(call.check, body)
    return []


def engram_remember(served: Served, call: Call, body: Any) -> None:
    """Keep cursors and URIs from answers, so that later calls follow them (write, read, page)."""
    if isinstance(body, dict):
        if isinstance(body.get("cursor"), str):
            served.pool.add(f"cursor:{call.check}", body["cursor"])
        memories = body.get("memories")
        for memory in memories[:3] if isinstance(memories, list) else []:
            if isinstance(memory, dict) and isinstance(memory.get("uri"), str):
                served.pool.add("uri", memory["uri"])


ENGRAM = Face(
    name="engram",
    serve=serve_engram,
    calls=engram_calls,
    envelope_errors=xrpc_envelope_errors,
    output_errors=xrpc_output_errors,
    remember=engram_remember,
    paths=tuple(f"/xrpc/{n}" for n in nsids(LEX, "query")) + ("/xrpc/_health",),
    # IndexLoading, KeywordIndexBuilding and EmbedderBusy are 503s the lexicon declares.
    temporary=frozenset({503}),
)

# One Face per face: garden.engram here, v5 (/ns/...) in faces_v5.py, Kindgi (/v1/memory/...) in faces_kindgi.py.
FACES: dict[str, Face] = {"engram": ENGRAM}
FACES["kindgi"] = KINDGI
FACES[V5.name] = V5

__all__ = ["FACES", "ENGRAM", "line"]
