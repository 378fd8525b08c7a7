"""The three faces as bench/load.py drives them: how to fill, serve and call each, and what it answers.

A `Workload` makes the raw bytes of request i (a read, or a write when i falls in the write
share), says which status admits, how the face names a refusal, and what a write's
acknowledgement names (to look it up after the run: nothing acknowledged may be lost).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from engram_index.collections import Collections  # noqa: E402
from engram_index.engine.types import Document, ModelIdentity  # noqa: E402
from engram_index.engram.records import encode_query_vector  # noqa: E402
from engram_index.keys import KeyStore  # noqa: E402
from engram_index.store.sqlite import StoredDocument  # noqa: E402

SPACE = "at://did:plc:load2load2load2load2load2lo/space/garden.engram.space/load"
MODEL = ModelIdentity("m", "sha256:00", 64)
WORDS = ["river", "stone", "cloud", "ember", "maple", "quartz", "delta", "lumen", "orbit", "fjord", "cedar", "basalt"]
NS = "load"
SCOPE = {"tenantId": "acme", "projectId": "web"}
FACES = ("engram", "engram-embed", "v5", "kindgi")
# engram-embed: searches with q alone, which the service embeds (MiniLM), over spaces of many authorities.
EMBED_AUTHORITIES = 64
EMBED_RATE, EMBED_BURST = 2.0, 20.0  # the service's per-authority embedding bucket (engram/api/embedding.py)


def embed_space(k: int) -> str:
    """The space of the k-th authority of the engram-embed workload."""
    return f"at://did:plc:loademb{k:016d}aaaa/space/garden.engram.space/load"


def _text(rng: np.random.Generator, i: int) -> str:
    """Six random words and a word of its own."""
    return " ".join(rng.choice(WORDS, 6)) + f" w{i}"


def _raw(method: str, target: str, body: bytes | None, headers: dict[str, str]) -> bytes:
    """One HTTP/1.1 request's bytes."""
    lines = [f"{method} {target} HTTP/1.1", "host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    if body is not None:
        lines += ["content-type: application/json", f"content-length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


@dataclass
class Workload:
    """What a face is sent under load and how its answers read."""

    face: str
    token: str = ""
    writes: float = 0.0  # share of requests that write
    reads: list[bytes] = field(default_factory=list)

    def is_write(self, i: int) -> bool:
        """Whether request i writes (spread evenly: every 1/writes-th request)."""
        return self.writes > 0 and int((i + 1) * self.writes) > int(i * self.writes)

    def request(self, i: int) -> bytes:
        """The bytes of request i."""
        return self.write(i) if self.is_write(i) else self.reads[i % len(self.reads)]

    def write(self, i: int) -> bytes:
        """A write of its own (a Kindgi fact, a v5 document)."""
        auth = {"authorization": f"Bearer {self.token}"}
        if self.face == "kindgi":
            body = {"type": "note", "scope": SCOPE, "content": f"written under load {i} river"}
            return _raw("POST", "/v1/memory/facts", json.dumps(body).encode(), {**auth, "idempotency-key": f"w{i}"})
        body = {"content": f"written under load {i} river", "id": f"w{i}"}
        return _raw("POST", f"/ns/{NS}/document", json.dumps(body).encode(), auth)

    def acknowledged(self, i: int, status: int, body: bytes) -> str | None:
        """The id a write's answer acknowledges (None for a read or a refusal)."""
        if not self.is_write(i) or status not in (200, 201):
            return None
        return str(json.loads(body)["id"])

    def refusal_name(self, body: bytes) -> str:
        """How the face names an error: XRPC's name, Kindgi's code, v5's error string."""
        try:
            error = json.loads(body).get("error")
        except ValueError:
            return "(not JSON)"
        if self.face == "kindgi":
            return str(error.get("code")) if isinstance(error, dict) else f"(no envelope: {error!r})"
        return str(error)

    def refusal_reason(self, body: bytes) -> str:
        """Which limit refused: the token bucket ("rate"), the requests-at-once cap ("at once"), or embedding."""
        try:
            error = json.loads(body)
        except ValueError:
            return "(not JSON)"
        text = json.dumps(error)
        for needle, reason in (("at once", "at once"), ("a second", "rate"), ("being embedded", "embedder busy"),
                               ("embedded for", "embedding rate")):
            if needle in text:
                return reason
        return "other"

    def lookup(self, ident: str) -> tuple[str, str, dict[str, Any] | None]:
        """The method, path and body that find an acknowledged write."""
        if self.face == "kindgi":
            return "GET", f"/v1/memory/facts/{ident}", None
        return "GET", f"/ns/{NS}/document/{ident}", None


def _kindgi_token(data: Path) -> str:
    """A user's token in one tenant and project, as `engram-index keys create kindgi` mints it."""
    token, _ = KeyStore(data).create("kindgi", {"tenant": "acme", "user": "loader", "orgs": [], "projects": ["web"],
                                                "admin": False})
    return token


def build(face: str, data: Path, n: int, writes: float) -> Workload:
    """Fill what needs no server (the garden space, the keys) and return the face's workload."""
    rng = np.random.default_rng(18)
    if face == "engram":
        spaces = Collections(data)
        try:
            spaces.ensure_collection(SPACE, MODEL)
            for start in range(0, n, 5000):
                spaces.write(SPACE, _memories(SPACE, "did:plc:a", MODEL, rng, range(start, min(n, start + 5000))))
        finally:
            spaces.close()
        return Workload(face, reads=_engram_reads())
    if face == "engram-embed":
        return Workload(face, reads=_embed_space_reads(data, n, rng))
    data.mkdir(parents=True, exist_ok=True)
    if face == "kindgi":
        token = _kindgi_token(data)
    else:
        token, _ = KeyStore(data).create("supermemory", {"namespaces": None})
    work = Workload(face, token, writes)
    work.reads = _reads(face, token)
    return work


def _memories(space: str, author: str, model: ModelIdentity, rng: np.random.Generator,
              numbers: range) -> list[StoredDocument]:
    """Memory records of a space by one author: six random words and a word of its own, a random vector."""
    return [StoredDocument(Document(
        id=f"{space}/{author}/garden.engram.memory/r{i}", author=author, text=_text(rng, i),
        created_ms=1_700_000_000_000 + i, vector=rng.standard_normal(model.dims).astype("<f2").tobytes(),
        metadata={"cid": "bafyreiexample"})) for i in numbers]


def _search(params: dict[str, str]) -> bytes:
    """A searchMemories request's bytes, encoded once so that the client spends little CPU."""
    return _raw("GET", "/xrpc/garden.engram.searchMemories?" + urlencode(params), None, {})


def _engram_reads(count: int = 997) -> list[bytes]:
    """Hybrid searches: two words and a random vector."""
    rng = np.random.default_rng(7)
    return [_search({"space": SPACE, "q": " ".join(rng.choice(WORDS, 2)), "model": MODEL.model,
                     "modelDigest": MODEL.digest, "vector": encode_query_vector(rng.standard_normal(MODEL.dims)),
                     "limit": "10"}) for _ in range(count)]


def _embed_space_reads(data: Path, n: int, rng: np.random.Generator) -> list[bytes]:
    """EMBED_AUTHORITIES spaces of n memories in all, under MiniLM's model, and searches of q alone in turn."""
    from engram_index.embed.local import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    model = embedder.identity
    embedder.close()
    spaces = Collections(data)
    try:
        for k in range(EMBED_AUTHORITIES):
            space = embed_space(k)
            spaces.ensure_collection(space, model)
            spaces.write(space, _memories(space, space.split("/")[2], model, rng, range(n // EMBED_AUTHORITIES)))
    finally:
        spaces.close()
    words = np.random.default_rng(7)
    return [_search({"space": embed_space(i % EMBED_AUTHORITIES), "q": " ".join(words.choice(WORDS, 2)),
                     "limit": "10"}) for i in range(EMBED_AUTHORITIES * 15)]


def _reads(face: str, token: str, count: int = 997) -> list[bytes]:
    """Kindgi retrieves (mode both) or v5 hybrid searches of two random words."""
    rng = np.random.default_rng(7)
    auth = {"authorization": f"Bearer {token}"}
    out = []
    for _ in range(count):
        query = " ".join(rng.choice(WORDS, 2))
        if face == "kindgi":
            body = {"mode": "both", "query": query, "limit": 10}
            out.append(_raw("POST", "/v1/memory/retrieve", json.dumps(body).encode(), auth))
        else:
            out.append(_raw("POST", f"/ns/{NS}/search", json.dumps({"query": query, "limit": 10}).encode(), auth))
    return out


def serve(face: str, data: Path, port: int, rate: float, burst: float) -> subprocess.Popen[bytes]:
    """`engram-index serve` admitting `rate`/`burst` (per space or per key), answering.

    A rate of 1e6 or more is admission off: the cap on requests at once is lifted too.
    """
    embedder = {"engram": "none", "engram-embed": "local"}.get(face, "hashing:64")
    at_once = "256" if rate >= 1e6 else "8"
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram_index.cli", "serve", "--data", str(data), "--port", str(port),
         "--insecure-open", "--embedder", embedder, "--no-access-log", "--rate", str(rate), "--burst", str(burst),
         "--key-rate", str(rate), "--key-burst", str(burst), "--concurrent", at_once, "--key-concurrent", at_once],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if _ready(face, url):
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start")


def _ready(face: str, url: str) -> bool:
    """Whether the face answers (a garden space loaded, the server up)."""
    if face.startswith("engram"):
        space = SPACE if face == "engram" else embed_space(0)
        r = httpx.get(f"{url}/xrpc/garden.engram.getSpaceStatus", params={"space": space}, timeout=5)
        return r.status_code == 200 and not r.json().get("building") and httpx.get(
            f"{url}/xrpc/garden.engram.searchMemories", params={"space": space, "q": "x", "mode": "keyword"},
            timeout=5).status_code == 200
    return httpx.get(f"{url}/xrpc/_health", timeout=5).status_code == 200


def fill(work: Workload, url: str, n: int) -> None:
    """Write n facts or documents through the face (16 at once), and wait until v5 has processed them."""
    if work.face.startswith("engram") or n == 0:
        return
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(18)
    texts = [_text(rng, i) for i in range(n)]
    headers = {"Authorization": f"Bearer {work.token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        def one(i: int) -> None:
            if work.face == "kindgi":
                r = client.post("/v1/memory/facts", json={"type": "note", "scope": SCOPE, "content": texts[i]})
            else:
                r = client.post(f"/ns/{NS}/document", json={"content": texts[i], "id": f"seed{i}"})
            assert r.status_code in (200, 201), r.text

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(one, range(n)))
        if work.face == "v5":
            deadline = time.monotonic() + 600
            for i in range(n - 1, -1, -1):
                while client.get(f"/ns/{NS}/document/seed{i}").json()["system"]["status"] not in ("done", "failed"):
                    if time.monotonic() > deadline:
                        raise SystemExit("the seed documents were not processed in 10 minutes")
                    time.sleep(0.2)
        if work.face == "kindgi":  # the first read loads the tenant's index
            client.post("/v1/memory/retrieve", json={"mode": "both", "query": "river", "limit": 10})
        else:
            client.post(f"/ns/{NS}/search", json={"query": "river", "limit": 10})

def missing(work: Workload, url: str, idents: list[str]) -> list[str]:
    """The acknowledged writes that the face cannot find now."""
    lost = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {work.token}"}, timeout=60) as client:
        for ident in idents:
            method, path, _ = work.lookup(ident)
            if client.request(method, path).status_code != 200:
                lost.append(ident)
    return lost

