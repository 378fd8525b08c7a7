"""A fake OpenAI-compatible LLM server (and a Cohere/TEI `/rerank`) over real HTTP on loopback.

It speaks the protocol as Ollama, vLLM and llama.cpp do (`GET /v1/models`,
`POST /v1/chat/completions`, OpenAI's error bodies) and answers deterministically by
following the prompts of `engram_index.llm`:

- form-memories: one fact per sentence of the document; a fact whose first two words are
  those of a known memory `updates` it; a sentence opening with "Also" `extends`, and one
  opening with "Therefore" or "So" `derives` from, the known memory sharing most words;
  facts with "always", "born" or "name is" are static;
- rewrite-query: the query without stop words, the query's words reversed, and a repeat of
  the query (which the client must drop);
- rerank and `/rerank`: the share of the query's words found in each text;
- aggregate: the passages' sentences that share a word with the query, in order, once each.

Fault knobs, consumed one request at a time: `fail(n, status)`, `malform(n)` (a body that is
not JSON), `reply(content)` (the next assistant message verbatim), `delay_s`, `fence` (wrap
JSON in prose and a Markdown fence), `json_mode_unsupported` (400 on `response_format`), `rerank_limit` (fewer
/rerank results than asked), and
`api_key` (401 without it). Every request is recorded in `requests`.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from engram_index.testkit.serve import serving

STOP_WORDS = frozenset("a an and are as at be by did do does for from has have how i in is it its me my of on "
                       "or our so that the their this to was we were what when where which who why will with "
                       "you your".split())
_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def words(text: str) -> list[str]:
    """Lower-case words of a text."""
    return _WORD.findall(text.lower())


def overlap(query: str, text: str) -> float:
    """The share of the query's content words (all words if only stop words) found in the text."""
    wanted = {w for w in words(query) if w not in STOP_WORDS} or set(words(query))
    return len(wanted & set(words(text))) / len(wanted) if wanted else 0.0


def sentences(text: str) -> list[str]:
    """The sentences of a text, split after . ! or ?"""
    return [s.strip() for s in _SENTENCE.split(" ".join(text.split())) if s.strip()]


def _section(user: str, start: str, end: str) -> str:
    head, found, rest = user.partition(start)
    return rest.partition(end)[0] if found else ""


def form_memories_answer(user: str) -> dict[str, Any]:
    """The fake's answer to the form-memories prompt (see the module docstring)."""
    known = json.loads(_section(user, "Known memories (JSON):\n", "\n") or "[]")
    document = _section(user, "Document:\n<<<\n", "\n>>>")
    out = []
    for fact in sentences(document):
        relation, target = "new", None
        first = fact.split(None, 1)[0].strip(",").lower() if fact else ""
        if first in ("also", "therefore", "so"):
            best = max(known, key=lambda m: overlap(fact, m["memory"]), default=None)
            if best is not None and overlap(fact, best["memory"]) > 0:
                relation, target = ("extends" if first == "also" else "derives"), best["id"]
        else:
            for memory in known:
                if words(memory["memory"])[:2] == words(fact)[:2] and memory["memory"] != fact:
                    relation, target = "updates", memory["id"]
        static = any(k in fact.lower() for k in ("always", "born", "name is"))
        out.append({"memory": fact, "relation": relation, "target": target, "static": static})
    return {"memories": out}


def rewrite_answer(user: str) -> dict[str, Any]:
    """The fake's rewrites: without stop words, words reversed, and the query itself again."""
    query = user.removeprefix("Query: ").strip()
    content = " ".join(w for w in words(query) if w not in STOP_WORDS)
    return {"rewrites": [content, " ".join(reversed(words(query))), query, content.upper()]}


def _passages(user: str) -> tuple[str, list[dict[str, Any]]]:
    query = user.partition("\n")[0].removeprefix("Query: ")
    return query, json.loads(user.partition("Passages (JSON):\n")[2])


def rerank_answer(user: str) -> dict[str, Any]:
    """The fake's relevance scores: word overlap with the query."""
    query, passages = _passages(user)
    return {"scores": [{"n": p["n"], "score": round(overlap(query, p["text"]), 4)} for p in passages]}


def aggregate_answer(user: str) -> dict[str, Any]:
    """The fake's merged answer: passage sentences sharing a word with the query, once each."""
    query, passages = _passages(user)
    picked: list[str] = []
    for p in passages:
        for s in sentences(p["text"]):
            if overlap(query, s) > 0 and s not in picked:
                picked.append(s)
    return {"answer": " ".join(picked) or "The passages do not answer the query."}


TASKS = {"task: form-memories": form_memories_answer, "task: rewrite-query": rewrite_answer,
         "task: rerank": rerank_answer, "task: aggregate": aggregate_answer}


class FakeLLM:
    """The fake server's state and knobs; `url` is the OpenAI base URL (…/v1), `rerank_url` its /rerank."""

    def __init__(self, model: str = "fake-model") -> None:
        self.model = model
        self.url = ""
        self.rerank_url = ""
        self.api_key: str | None = None
        self.delay_s = 0.0
        self.fence = False
        self.json_mode_unsupported = False
        self.rerank_limit: int | None = None
        self.requests: list[dict[str, Any]] = []
        self._faults: list[tuple[str, Any]] = []
        self._lock = threading.Lock()

    def fail(self, times: int, status: int = 500) -> None:
        """The next `times` requests answer `status` with an OpenAI error body."""
        with self._lock:
            self._faults += [("status", status)] * times

    def malform(self, times: int = 1) -> None:
        """The next `times` requests answer 200 with a body that is not JSON."""
        with self._lock:
            self._faults += [("malformed", None)] * times

    def reply(self, content: str) -> None:
        """The next chat completion's assistant message is `content`, verbatim."""
        with self._lock:
            self._faults.append(("reply", content))

    def reset(self) -> None:
        """Forget the requests and the knobs (between tests sharing one server)."""
        with self._lock:
            self._faults.clear()
            self.requests.clear()
        self.api_key, self.delay_s, self.fence, self.json_mode_unsupported = None, 0.0, False, False
        self.rerank_limit = None

    def chats(self) -> list[dict[str, Any]]:
        """The bodies of the chat completion requests received so far."""
        return [r["body"] for r in self.requests if r["path"] == "/v1/chat/completions"]

    def _next_fault(self) -> tuple[str, Any] | None:
        with self._lock:
            return self._faults.pop(0) if self._faults else None

    async def _front(self, request: Request) -> tuple[Any, Response | None, tuple[str, Any] | None]:
        """Record the request, apply delay, auth and faults; the body, an early response, the fault."""
        try:
            body = await request.json() if request.method == "POST" else None
        except ValueError:
            body = None  # answered 400 by the route, as the real servers do
        with self._lock:
            self.requests.append({"path": request.url.path, "body": body,
                                  "authorization": request.headers.get("authorization")})
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return body, _error(401, "Incorrect API key provided", "invalid_api_key"), None
        fault = self._next_fault()
        if fault and fault[0] == "status":
            return body, _error(fault[1], "The server had an error while processing your request", "server_error"), None
        if fault and fault[0] == "malformed":
            return body, PlainTextResponse("<html>502 Bad Gateway", media_type="application/json"), None
        return body, None, fault

    async def models(self, request: Request) -> Response:
        _, early, _ = await self._front(request)
        return early or JSONResponse({"object": "list", "data": [
            {"id": self.model, "object": "model", "created": 0, "owned_by": "fake"}]})

    async def chat(self, request: Request) -> Response:
        body, early, fault = await self._front(request)
        if early:
            return early
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body.get("model"):
            return _error(400, "'model' and 'messages' are required", "invalid_request_error")
        if body["model"] != self.model:
            return _error(404, f"The model `{body['model']}` does not exist", "model_not_found")
        if self.json_mode_unsupported and "response_format" in body:
            return _error(400, "response_format is not supported by this server", "invalid_request_error")
        system = next((m["content"] for m in body["messages"] if m.get("role") == "system"), "")
        user = next((m["content"] for m in reversed(body["messages"]) if m.get("role") == "user"), "")
        if fault and fault[0] == "reply":
            content = fault[1]
        else:
            task = next((f for marker, f in TASKS.items() if marker in system), None)
            answer = task(user) if task else {"answer": "I do not know this task."}
            content = json.dumps(answer)
            if self.fence:
                content = f"Sure! Here is the JSON you asked for:\n```json\n{content}\n```\nAnything else?"
        return JSONResponse({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(words(system + user)), "completion_tokens": len(words(content)),
                      "total_tokens": len(words(system + user + content))},
        })

    async def rerank(self, request: Request) -> Response:
        body, early, _ = await self._front(request)
        if early:
            return early
        if isinstance(body, dict) and isinstance(body.get("texts"), list):  # TEI
            scored = [{"index": i, "score": overlap(body["query"], t)} for i, t in enumerate(body["texts"])]
            return JSONResponse(sorted(scored, key=lambda r: -r["score"])[:self.rerank_limit])
        if not isinstance(body, dict) or not isinstance(body.get("documents"), list) or "query" not in body:
            return JSONResponse({"message": "query and documents are required"}, status_code=400)
        docs = [d["text"] if isinstance(d, dict) else d for d in body["documents"]]
        results = sorted(({"index": i, "relevance_score": overlap(body["query"], d)} for i, d in enumerate(docs)),
                         key=lambda r: -float(r["relevance_score"]))
        top_n = min(body.get("top_n") or len(docs), self.rerank_limit or len(docs))
        return JSONResponse({"id": "rerank-1", "results": results[:top_n], "meta": {"api_version": {"version": "2"}}})

    def app(self) -> Starlette:
        """The Starlette app serving this fake."""
        return Starlette(routes=[
            Route("/v1/models", self.models),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/rerank", self.rerank, methods=["POST"]),
            Route("/v1/rerank", self.rerank, methods=["POST"]),
        ])


def _error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": code, "param": None, "code": code}},
                        status_code=status)


@contextmanager
def fake_llm_server(model: str = "fake-model") -> Iterator[FakeLLM]:
    """Serve a FakeLLM on a free loopback port until the block ends."""
    fake = FakeLLM(model)
    with serving(fake.app(), probe="/v1/models") as url:
        fake.url, fake.rerank_url = f"{url}/v1", f"{url}/rerank"
        fake.requests.clear()  # the readiness probe is not a test's request
        yield fake
