"""kill -9 of a served Kindgi face while clients write facts, then check every acknowledged write.

`KindgiCrash` mints tokens (a user's and the tenant admin's), serves a data directory with
`engram-index serve` (the hashing embedder) and runs rounds: writers send fact writes,
supersedes, verifies, deletes and (as the admin) one-fact erasures and resumes of them over HTTP,
each under a fresh `Idempotency-Key`, and keep every 2xx answer byte for byte, with keyed
retrieves between them (whose kept answers must not keep an erased fact's words); the server is
killed -9 at a random moment and served again. Then a request the kill cut off is sent again with
its key and body: it must succeed (its key is free, not held in flight forever), as a replay when
it had happened and as a first run when it had not, and so exactly once. Every acknowledged
request is replayed: the same status and bytes with `X-Idempotent-Replay: true`, writing nothing.
The facts are then read with the official SDK: exactly the live ones, each at its version with
its whole chain, found by its current word (keyword) and its content (semantic, rank 1), no
superseded or deleted word found, and an erased fact (once its erasure, resumed after a restart,
completes) gone from gets, revisions and every retrieve.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson
from kindgi.client import Kindgi

from engram_index.keys import KeyStore
from tests.limits import ServeProcess

from .crashkit_v5 import UNLIMITED, kill_while_writing, word

SCOPE = {"tenantId": "acme", "projectId": "web"}
PREFIX = "/v1/memory"
EMBEDDER = "hashing:256"
SUBJECTS = ("river", "stone", "cloud", "lamp", "bridge", "meadow", "anchor")


def content(n: int) -> str:
    """Write number `n`'s content, around the word only it holds."""
    return f"{word(n)} remembers the {SUBJECTS[n % 7]} near the {SUBJECTS[(n // 7) % 7]}"


@dataclass
class Request:
    """One change sent under an Idempotency-Key, and its answer once acknowledged."""

    kind: str  # write / supersede / verify / delete / erase / resume, or retrieve (no change)
    method: str
    path: str
    key: str
    body: bytes
    fact: str | None  # None for a write until it is answered
    number: int | None  # the content number a write or supersede brings
    status: int | None = None
    answer: bytes | None = None
    admin: bool = False  # sent with the admin's token (an erasure)


@dataclass
class Fact:
    """What the acknowledged writes made of one fact."""

    numbers: list[int]  # the content number of each version (a verify repeats the last)
    deleted: bool = False
    erased: str | None = None  # the erasure that removes it

    @property
    def version(self) -> int:
        """Its current version."""
        return len(self.numbers)


@dataclass
class Round:
    """What one kill did."""

    acknowledged: int = 0
    cut_off: int = 0  # requests in flight at the kill
    retrieves: int = 0  # keyed retrieves answered (not changes: their kept answers are what is checked)
    had_happened: int = 0  # of those, answered after the restart as replays
    replayed: int = 0  # acknowledged requests replayed and checked after the restart


@dataclass
class KindgiCrash:
    """A data directory served again and again, and the changes it acknowledged."""

    data: Path
    seed: int = 18
    facts: dict[str, Fact] = field(default_factory=dict)
    acked: list[Request] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Mint the token and prepare the server (not started)."""
        self.data.mkdir(parents=True, exist_ok=True)
        keys = KeyStore(self.data)
        self.token, _ = keys.create(
            "kindgi", {"tenant": "acme", "user": "alice", "orgs": [], "projects": ["web"], "admin": False})
        self.admin, _ = keys.create("kindgi", {"tenant": "acme", "user": None, "orgs": [], "projects": [], "admin": True})
        self.server = ServeProcess(self.data, "--embedder", EMBEDDER, *UNLIMITED)
        self.rng = random.Random(self.seed)
        self._next = 0
        self._lock = threading.Lock()
        self._cut: list[Request] = []
        self._owned: dict[str, int] = {}  # fact -> the writer that changes it (one at a time per fact)

    def http(self) -> httpx.Client:
        """A plain HTTP client holding the token (the answer's bytes and headers are what is checked)."""
        return httpx.Client(base_url=self.server.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=60)

    # -- one round -------------------------------------------------------------------------------

    def round(self, writers: int = 3, max_delay: float = 1.5, replay_sample: int = 40) -> Round:
        """Serve, settle what the last kill cut off, check, write until a random moment, kill -9."""
        done = Round()
        self.server.start()
        try:
            if self.rounds:
                self._settle(self.rounds[-1])
                self._replay(self.rounds[-1], replay_sample)
                self.check(sample=30)
        except BaseException:  # never leave the server running behind a failed check
            self.server.kill()
            raise
        stop = threading.Event()
        threads = [threading.Thread(target=self._write, args=(w, writers, random.Random(self.rng.random()), stop, done))
                   for w in range(writers)]
        kill_while_writing(self.server, self.rng, max_delay, stop, threads)
        done.cut_off = len(self._cut)
        self.rounds.append(done)
        return done

    def _number(self) -> int:
        """A fresh content number."""
        with self._lock:
            self._next += 1
            return self._next

    def _request(self, rng: random.Random, writer: int, writers: int) -> Request:
        """The next change one writer makes: a new fact, or a change to one of its live facts."""
        with self._lock:
            mine = [f for f, fact in self.facts.items() if not fact.deleted and hash(f) % writers == writer]
        key = str(uuid.uuid4())
        if rng.random() < 0.15:
            # A keyed retrieve (the SDK sends a key with each): its answer is kept behind it, and one
            # naming a fact that an erasure removes meanwhile must be withheld, not kept with its words.
            body = {"mode": "list", "limit": 50} if rng.random() < 0.5 else {
                "mode": "keyword", "query": word(rng.randint(1, max(1, self._next))), "limit": 10}
            return Request("retrieve", "POST", f"{PREFIX}/retrieve", key, orjson.dumps(body), None, None)
        with self._lock:
            erasures = [(f, fact.erased) for f, fact in self.facts.items() if fact.erased]
        if erasures and rng.random() < 0.03:
            fact_id, erasure = rng.choice(erasures)
            return Request("resume", "POST", f"{PREFIX}/erasures/{erasure}/resume", key, b"{}", fact_id, None,
                           admin=True)
        pick = rng.random()
        if not mine or pick < 0.45:
            n = self._number()
            body = {"type": "note", "scope": SCOPE, "content": content(n)}
            return Request("write", "POST", f"{PREFIX}/facts", key, orjson.dumps(body), None, n)
        fact = rng.choice(mine)
        if pick < 0.75:
            n = self._number()
            return Request("supersede", "POST", f"{PREFIX}/facts/{fact}/supersede", key,
                           orjson.dumps({"content": content(n)}), fact, n)
        if pick < 0.88:
            return Request("verify", "POST", f"{PREFIX}/facts/{fact}/verify", key, b"{}", fact, None)
        if pick < 0.96:
            return Request("delete", "DELETE", f"{PREFIX}/facts/{fact}", key, b"", fact, None)
        return Request("erase", "POST", f"{PREFIX}/erasures", key, orjson.dumps({"factId": fact}), fact, None,
                       admin=True)

    def _write(self, writer: int, writers: int, rng: random.Random, stop: threading.Event, done: Round) -> None:
        """Send changes until stopped or cut off by the kill."""
        with self.http() as client:
            while not stop.is_set():
                req = self._request(rng, writer, writers)
                try:
                    answer = self._send(client, req)
                except httpx.TransportError:  # the server died under it: not acknowledged
                    if req.kind != "retrieve":  # a read cut off has nothing to settle
                        with self._lock:
                            self._cut.append(req)
                    return
                if answer.status_code >= 300:
                    self.problems.append(f"{req.kind} refused: {answer.status_code} {answer.text[:200]}")
                    return
                if req.kind == "retrieve":
                    done.retrieves += 1
                    continue
                self._acknowledge(req, answer)
                done.acknowledged += 1

    def _send(self, client: httpx.Client, req: Request) -> httpx.Response:
        """Send one change with its key."""
        headers = {"Idempotency-Key": req.key}
        if req.admin:
            headers["Authorization"] = f"Bearer {self.admin}"
        if req.body:
            headers["Content-Type"] = "application/json"
        return client.request(req.method, req.path, content=req.body or None, headers=headers)

    def _acknowledge(self, req: Request, answer: httpx.Response) -> None:
        """Apply an acknowledged change to what the facts must be."""
        fact = orjson.loads(answer.content)
        with self._lock:
            req.status, req.answer = answer.status_code, answer.content
            if req.kind == "write":
                req.fact = fact["id"]
                self.facts[fact["id"]] = Fact([req.number or 0])
            elif req.kind == "erase":
                known = self.facts[req.fact or ""]
                known.deleted, known.erased = True, fact["id"]
            elif req.kind == "delete":
                self.facts[fact["id"]].deleted = True
            elif req.kind == "resume":  # it changes no fact: its answer must replay, or be withheld
                if fact.get("status") not in ("pending", "running", "completed", "failed"):
                    self.problems.append(f"a resume answered {fact}")
            else:
                known = self.facts[fact["id"]]
                known.numbers.append(req.number if req.number is not None else known.numbers[-1])
                if fact.get("version") != known.version:
                    self.problems.append(f"{req.kind} of {fact['id']} answered version {fact.get('version')},"
                                         f" {known.version} expected")
            self.acked.append(req)

    def _settle(self, last: Round) -> None:
        """Send each cut-off change again with its key: once, and never held in flight."""
        with self.http() as client:
            for req in self._cut:
                answer = self._send(client, req)
                if req.kind == "erase" and answer.status_code == 409 and \
                        answer.json()["error"]["code"] == "idempotency-key-replay-withheld":
                    # It had committed and run: an erasure withholds the kept answers naming its
                    # fact, its own included (a completed erasure keeps no identifier).
                    with self._lock:
                        known = self.facts[req.fact or ""]
                        known.deleted, known.erased = True, ""
                    last.had_happened += 1
                    continue
                if answer.status_code >= 300:
                    self.problems.append(f"a cut-off {req.kind} retried with its key: {answer.status_code}"
                                         f" {answer.text[:200]}")
                    continue
                last.had_happened += answer.headers.get("X-Idempotent-Replay") == "true"
                self._acknowledge(req, answer)
        self._cut = []

    def _replay(self, last: Round, sample: int) -> None:
        """Replay acknowledged changes: byte-identical answers marked as replays.

        Those naming an erased fact are withheld once the erasure has run (409
        idempotency-key-replay-withheld: the erased words are not sent again, and the change does not
        run again); until then they replay like the others.
        """
        chosen = self.acked[-sample:] + self.rng.sample(self.acked, min(sample, len(self.acked)))
        with self.http() as client:
            for req in chosen:
                again = self._send(client, req)
                erased = req.fact is not None and self.facts[req.fact].erased is not None
                if erased and again.status_code == 409:
                    code = again.json()["error"]["code"]
                    if code != "idempotency-key-replay-withheld":
                        self.problems.append(f"replay of an erased fact's {req.kind} answered 409 {code}")
                    last.replayed += 1
                    continue
                if (again.status_code, again.content) != (req.status, req.answer):
                    self.problems.append(f"replay of a {req.kind} answered {again.status_code} {again.text[:120]},"
                                         f" not the kept answer")
                elif again.headers.get("X-Idempotent-Replay") != "true":
                    self.problems.append(f"replay of a {req.kind} is not marked X-Idempotent-Replay")
                last.replayed += 1

    # -- checks ----------------------------------------------------------------------------------

    def check(self, sample: int | None = None) -> None:
        """The facts as the SDK reads them: exactly the live ones, at their versions, found both ways."""
        client = Kindgi(base_url=self.server.url, token=self.token, max_retries=0)
        self._wait_erasures()
        listed: list[str] = []
        cursor = None
        while True:
            page = client.memory.list_facts(limit=100, cursor=cursor)
            listed += [str(f.id) for f in page.data]
            if not page.has_more:
                break
            cursor = page.next_cursor
        live = {f for f, fact in self.facts.items() if not fact.deleted}
        if len(listed) != len(set(listed)) or set(listed) != live:
            self.problems.append(f"listed {len(listed)} facts ({len(set(listed))} distinct), {len(live)} live:"
                                 f" extra {sorted(set(listed) - live)[:3]} missing {sorted(live - set(listed))[:3]}")
        ids = sorted(self.facts)
        for fact_id in ids if sample is None else self.rng.sample(ids, min(sample, len(ids))):
            self._check_fact(client, fact_id, self.facts[fact_id])

    def _wait_erasures(self, timeout: float = 60) -> None:
        """Wait until every acknowledged erasure has completed (one a kill cut short resumes at start)."""
        admin = Kindgi(base_url=self.server.url, token=self.admin, max_retries=0)
        deadline = time.monotonic() + timeout
        while any(e.status != "completed" for e in admin.memory.list_erasures(limit=100).data):
            if time.monotonic() > deadline:  # (one whose answer was withheld has no id to wait on)
                self.problems.append("erasures still running")
                return
            time.sleep(0.1)
        for fact_id, fact in self.facts.items():
            if not fact.erased:
                continue
            while (status := admin.memory.get_erasure(fact.erased).status) != "completed":
                if status == "failed" or time.monotonic() > deadline:
                    self.problems.append(f"the erasure of {fact_id} is {status}")
                    break
                time.sleep(0.1)

    def _check_fact(self, client: Kindgi, fact_id: str, fact: Fact) -> None:
        """One fact: its chain of versions, its current word found, its older and deleted words not."""
        if fact.erased is not None:
            self._check_erased(client, fact_id, fact)
            return
        chain = [r.version for r in client.memory.list_fact_revisions(fact_id).data] if not fact.deleted else []
        if not fact.deleted and chain != list(range(fact.version, 0, -1)):
            self.problems.append(f"{fact_id}: revisions {chain}, {fact.version} acknowledged")
        now = fact.numbers[-1]
        found = [str(r.fact.id) for r in client.memory.retrieve(mode="keyword", query=word(now)).results]
        if found != ([] if fact.deleted else [fact_id]):
            self.problems.append(f"{fact_id} ({'deleted' if fact.deleted else 'live'}): {word(now)} finds {found}")
        for old in set(fact.numbers[:-1]) - {now}:
            if client.memory.retrieve(mode="keyword", query=word(old)).results:
                self.problems.append(f"{fact_id}: the superseded {word(old)} is still found")
        if not fact.deleted:
            near = client.memory.retrieve(mode="semantic", query=content(now), limit=3).results
            if not near or str(near[0].fact.id) != fact_id or near[0].fact.version != fact.version:
                self.problems.append(f"{fact_id}: its content finds {[(str(r.fact.id), r.score) for r in near]}")

    def _check_erased(self, client: Kindgi, fact_id: str, fact: Fact) -> None:
        """An erased fact: no get, no revisions, none of its words or contents found."""
        with self.http() as http:
            for path in (f"{PREFIX}/facts/{fact_id}", f"{PREFIX}/facts/{fact_id}/revisions"):
                if (code := http.get(path).status_code) != 404:
                    self.problems.append(f"erased {fact_id}: GET {path} is {code}")
        for n in set(fact.numbers):
            if client.memory.retrieve(mode="keyword", query=word(n)).results:
                self.problems.append(f"erased {fact_id}: {word(n)} is still found")
            near = client.memory.retrieve(mode="semantic", query=content(n), limit=3).results
            if any(str(r.fact.id) == fact_id for r in near):
                self.problems.append(f"erased {fact_id}: its content is still found")

    def _check_scrubbed(self) -> None:
        """The stopped data directory: no row names an erased fact, and no file holds its words."""
        erased = [f for f, fact in self.facts.items() if fact.erased is not None]
        with sqlite3.connect(self.data / "records.sqlite") as db:
            for fact_id in erased:
                for table, where in (("kindgi_idempotency", "instr(body, ?) > 0"), ("kindgi_revisions", "fact_id=?"),
                                     ("kindgi_subjects", "fact_id=?")):
                    if db.execute(f"SELECT count(*) FROM {table} WHERE {where}", (fact_id,)).fetchone()[0]:
                        self.problems.append(f"erased {fact_id} is still in {table}")
        left = b"".join(p.read_bytes() for p in self.data.rglob("*") if p.is_file())
        for fact_id in erased:
            for n in set(self.facts[fact_id].numbers):
                if word(n).encode() in left:
                    where = [str(p.relative_to(self.data)) for p in self.data.rglob("*")
                             if p.is_file() and word(n).encode() in p.read_bytes()]
                    self.problems.append(f"erased {fact_id}: {word(n)} is still in the data directory ({where})")

    def finish(self) -> dict[str, int]:
        """Serve once more, settle, replay every acknowledged change, check every fact; the counts."""
        self.server.start()
        try:
            last = self.rounds[-1] if self.rounds else Round()
            self._settle(last)
            self._replay(last, len(self.acked))
            self.check()
        finally:
            self.server.kill()
        self._check_scrubbed()
        return {"acknowledged": len(self.acked), "facts": len(self.facts),
                "live": sum(not f.deleted for f in self.facts.values()),
                "erased": sum(f.erased is not None for f in self.facts.values()), "problems": len(self.problems),
                "replayable": sum(r.fact is None or self.facts[r.fact].erased is None for r in self.acked)}
