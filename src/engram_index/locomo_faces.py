"""LoCoMo through each face as its users drive it: their write path, their search path, over HTTP.

One in-process server on loopback serves the three faces over one data directory. Each face gets
the conversations the way its clients send them and is asked every question with the requests its
clients send (the bodies the official SDKs build; tests/test_locomo_sdk.py checks that the SDKs
give the same answers):

- garden.engram: a space per conversation, filled by the importer (`engram-index import --embed`:
  the authority embeds with the space's declared model), searched by `searchMemories` q + mode
  (the service embeds q for the space's model);
- supermemory v5: a namespace per conversation, a document per turn (`document/batch`, metadata
  naming the turn, speaker and session, `date` the session's), searched by `search` with
  `searchMode`;
- Kindgi: one tenant and project, a thread per conversation, a fact per turn (`observedAt` the
  session's date, the speaker as a participant subject), asked by `retrieve` with `mode`.
Rate limits are lifted: this measures ranking, not admission.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from engram_index.admission import Admission
from engram_index.collections import Collections
from engram_index.embed.base import Embedder
from engram_index.engram.api.embedding import QueryEmbedding
from engram_index.engram.api.limits import SpaceLimits
from engram_index.engram.auth import InsecureOpen
from engram_index.engram.importer import import_jsonl
from engram_index.keys import KeyStore
from engram_index.locomo import Conversation, Question

AUTHORITY = "did:plc:locomoevaluation00000000"
SERVICE_DID = "did:web:localhost"
TENANT = "locomo"
PROJECT = "dev"
LIMIT = 20  # the deepest k scored
FACES: dict[str, tuple[str, ...]] = {
    "garden.engram": ("hybrid", "keyword", "vector"),
    "supermemory": ("hybrid", "chunks", "memories"),
    "kindgi": ("both", "keyword", "semantic"),
}
DEFAULT_MODE = {"garden.engram": "hybrid", "supermemory": "hybrid", "kindgi": "both"}
UNLIMITED = 1e9
Progress = Callable[[str, int, int], None]


def space_uri(conversation: str) -> str:
    """The garden.engram space of one conversation."""
    return f"at://{AUTHORITY}/space/garden.engram.space/{conversation}"


def rkey_of(dia_id: str) -> str:
    """A record key naming the turn (D3:14 -> t-D3-14)."""
    return "t-" + dia_id.replace(":", "-")


def iso(ms: int) -> str:
    """UTC milliseconds as an ISO 8601 date-time."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def import_garden(data: Path, conversations: list[Conversation], embedder: Embedder | None) -> None:
    """Fill one space per conversation with the importer, as `engram-index import --embed` does."""
    spaces = Collections(data)
    try:
        for conv in conversations:
            uri = space_uri(conv.name)
            spaces.ensure_collection(uri, embedder.identity if embedder is not None else None)
            with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as fh:
                for t in conv.turns:
                    fh.write(json.dumps({"rkey": rkey_of(t.dia_id), "text": t.text, "createdAt": iso(t.date_ms),
                                         "tags": [f"speaker:{t.speaker}", f"session:{t.session}"],
                                         "source": f"locomo:{conv.name}"}) + "\n")
                path = Path(fh.name)
            try:
                report = import_jsonl(spaces, uri, path, embedder=embedder)
            finally:
                path.unlink()
            if report.errors:
                raise ValueError(f"{conv.name}: the importer refused lines: {report.errors[:3]}")
    finally:
        spaces.close()


@dataclass
class Served:
    """The running server, the keys of its two key-holding faces, and what each write was named."""

    url: str
    v5_key: str
    kindgi_token: str
    http: httpx.Client
    kindgi_ids: dict[str, str] = field(default_factory=dict)  # fact id -> dia_id

    def _v5(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.v5_key}"}

    def _kindgi(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.kindgi_token}"}

    def _ok(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            raise RuntimeError(f"{response.request.method} {response.request.url.path}: "
                               f"{response.status_code} {response.text[:300]}")
        return response.json()

    # -- writes -----------------------------------------------------------------------------

    def write_v5(self, conv: Conversation, progress: Callable[[int], None]) -> None:
        """One document per turn, 600 a batch (the batch route's limit), then wait until all are done."""
        turns = list(conv.turns)
        ids: list[str] = []
        for start in range(0, len(turns), 600):
            docs: list[dict[str, Any]] = [{"content": t.text, "id": f"{conv.name}_{t.dia_id.replace(':', '_')}", "date": iso(t.date_ms),
                     "metadata": {"diaId": t.dia_id, "speaker": t.speaker, "session": t.session}}
                    for t in turns[start:start + 600]]
            self._ok(self.http.post(f"{self.url}/ns/{conv.name}/document/batch", json={"documents": docs},
                                    headers=self._v5()))
            ids += [str(d["id"]) for d in docs]
        for n, doc_id in enumerate(ids, 1):
            while True:
                status = self._ok(self.http.get(f"{self.url}/ns/{conv.name}/document/{doc_id}",
                                                headers=self._v5()))["system"]["status"]
                if status == "done":
                    break
                if status == "failed":
                    raise RuntimeError(f"v5 document {doc_id} failed")
                time.sleep(0.02)
            progress(n)

    def write_kindgi(self, conv: Conversation, progress: Callable[[int], None]) -> None:
        """One fact per turn in the conversation's thread."""
        for n, t in enumerate(conv.turns, 1):
            body = {"type": "turn", "content": t.text, "observedAt": iso(t.date_ms),
                    "scope": {"tenantId": TENANT, "projectId": PROJECT, "threadId": conv.name,
                              "sessionId": f"session_{t.session}"},
                    "subjects": [{"kind": "participant", "id": t.speaker}]}
            fact = self._ok(self.http.post(f"{self.url}/v1/memory/facts", json=body, headers=self._kindgi()))
            self.kindgi_ids[fact["id"]] = t.dia_id
            progress(n)

    # -- questions --------------------------------------------------------------------------

    def ask(self, face: str, mode: str, question: Question) -> list[str]:
        """The turns one question finds, best first, through one face and mode."""
        if face == "garden.engram":
            answer = self._ok(self.http.get(f"{self.url}/xrpc/garden.engram.searchMemories", params={
                "space": space_uri(question.conversation), "q": question.text, "mode": mode, "limit": LIMIT}))
            rkeys = [m["uri"].rsplit("/", 1)[1] for m in answer["memories"]]
            return [r[2:].replace("-", ":", 1) for r in rkeys]
        if face == "supermemory":
            answer = self._ok(self.http.post(f"{self.url}/ns/{question.conversation}/search", headers=self._v5(),
                                             json={"query": question.text, "searchMode": mode, "limit": LIMIT}))
            return [str(r["metadata"]["diaId"]) for r in answer["results"]]
        answer = self._ok(self.http.post(f"{self.url}/v1/memory/retrieve", headers=self._kindgi(), json={
            "mode": mode, "query": question.text, "limit": LIMIT,
            "scope": {"tenantId": TENANT, "projectId": PROJECT, "threadId": question.conversation}}))
        return [self.kindgi_ids[r["fact"]["id"]] for r in answer["results"]]


@contextmanager
def serve(data: Path, embedder: Embedder | None) -> Iterator[Served]:
    """The three faces on one loopback server over `data`, limits lifted."""
    from engram_index.app import create_app
    from engram_index.testkit.serve import serving

    keys = KeyStore(data)
    v5_key, _ = keys.create("supermemory", {"namespaces": None})
    token, _ = keys.create("kindgi", {"tenant": TENANT, "user": "evaluator", "orgs": [], "projects": [PROJECT],
                                      "admin": False})
    app = create_app(data, SERVICE_DID, authenticator=InsecureOpen(),
                     limits=SpaceLimits(rate=UNLIMITED, burst=UNLIMITED, concurrent=64),
                     key_limits=Admission(rate=UNLIMITED, burst=UNLIMITED, concurrent=64),
                     embedding=QueryEmbedding(embedder, rate=UNLIMITED, burst=UNLIMITED, concurrent=8, queue=64))
    with serving(app) as url, httpx.Client(timeout=60) as http:
        yield Served(url, v5_key, token, http)


def wait_loaded(served: Served, conversations: list[Conversation], timeout_s: float = 120) -> None:
    """Wait until each garden.engram space's index (loaded in the background) answers."""
    for conv in conversations:
        deadline = time.monotonic() + timeout_s
        while served.http.get(f"{served.url}/xrpc/garden.engram.searchMemories", params={
                "space": space_uri(conv.name), "q": "x", "mode": "keyword"}).status_code == 503:
            if time.monotonic() > deadline:
                raise RuntimeError(f"space {conv.name} did not load")
            time.sleep(0.05)


def _step(tell: Progress, what: str, total: int) -> Callable[[int], None]:
    """A progress callback for one stage of `total` steps."""
    return lambda done: tell(what, done, total)


Answers = dict[str, dict[str, list[list[str]]]]  # face -> mode -> per question, the turns found


def answers(conversations: list[Conversation], embedder: Embedder | None, faces: tuple[str, ...],
            progress: Progress | None = None) -> Answers:
    """Load every conversation into each face, ask every question in each mode; the turns each found."""
    tell = progress or (lambda _what, _done, _total: None)
    with tempfile.TemporaryDirectory(prefix="engram-locomo-") as tmp:
        data = Path(tmp)
        if "garden.engram" in faces:
            tell("garden.engram: importing", 0, len(conversations))
            import_garden(data, conversations, embedder)
        with serve(data, embedder) as served:
            for conv in conversations:
                if "supermemory" in faces:
                    served.write_v5(conv, _step(tell, f"supermemory: writing {conv.name}", len(conv.turns)))
                if "kindgi" in faces:
                    served.write_kindgi(conv, _step(tell, f"kindgi: writing {conv.name}", len(conv.turns)))
            if "garden.engram" in faces:
                wait_loaded(served, conversations)
            questions = [q for c in conversations for q in c.questions]
            out: Answers = {}
            for face in faces:
                for mode in FACES[face]:
                    found = out.setdefault(face, {}).setdefault(mode, [])
                    for n, q in enumerate(questions, 1):
                        found.append(served.ask(face, mode, q))
                        tell(f"{face} {mode}", n, len(questions))
            return out


def run(conversations: list[Conversation], embedder: Embedder | None, faces: tuple[str, ...],
        progress: Progress | None = None) -> dict[str, dict[str, Any]]:
    """R@k per face and mode (and per category) of every question (`answers`)."""
    from engram_index.locomo import Scores

    questions = [q for c in conversations for q in c.questions]
    out: dict[str, dict[str, Any]] = {}
    for face, modes in answers(conversations, embedder, faces, progress).items():
        for mode, found in modes.items():
            scores = Scores()
            for returned, q in zip(found, questions):
                scores.add(returned, q)
            out.setdefault(face, {})[mode] = scores.table()
    return out
