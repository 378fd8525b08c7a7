"""A real HTTP server on a loopback port that answers as Ollama and OpenAI-compatible servers do.

Each request takes the next behaviour from `plan` (answer normally when it is empty), so a
test can script "a 500, then success" or "too slow". Every request is recorded.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

DIGEST_HEX = "0a109f422b47e3a30ba2b10eca18548e944e8a23073ee3f3e947efcf3c45e59f"
OTHER_HEX = "b" * 64
SLOW_S = 1.0


def raw_vector(text: str, dims: int) -> list[float]:
    """The provider's (unnormalised) embedding of a text: deterministic in the text."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return [float(v) for v in np.random.default_rng(seed).normal(size=dims)]


class FakeProvider:
    """Ollama's /api/tags and /api/embed and OpenAI's /v1/embeddings, scripted per request."""

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.plan: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                provider.handle(self, None)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                provider.handle(self, json.loads(self.rfile.read(length)))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self.lock:
            self.plan.clear()
            self.requests.clear()

    def posts(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "POST"]

    def handle(self, h: BaseHTTPRequestHandler, body: Any) -> None:
        with self.lock:
            behaviour = self.plan.pop(0) if self.plan else "ok"
            self.requests.append({"method": h.command, "path": h.path, "body": body,
                                  "authorization": h.headers.get("authorization")})
        if behaviour == "slow":
            time.sleep(SLOW_S)
        if behaviour == "drop":  # close the connection without an answer
            h.close_connection = True
            return
        if behaviour in ("500", "503"):
            return send(h, int(behaviour), {"error": "model runner has unexpectedly stopped"})
        if behaviour == "429":
            return send(h, 429, {"error": {"message": "Rate limit reached", "type": "requests"}}, {"Retry-After": "0"})
        if behaviour == "malformed":
            return send_raw(h, 200, b'{"embeddings": [[0.1, 0.2')
        if h.path == "/api/tags":
            return send(h, 200, {"models": [
                {"name": "all-minilm:latest", "model": "all-minilm:latest", "digest": OTHER_HEX, "size": 45960996},
                {"name": "nomic-embed-text:latest", "model": "nomic-embed-text:latest", "digest": DIGEST_HEX,
                 "size": 274302450, "details": {"format": "gguf", "family": "nomic-bert"}},
            ]})
        if h.path == "/api/embed" and behaviour == "404":
            return send(h, 404, {"error": f"model \"{body['model']}\" not found, try pulling it first"})
        if h.path == "/v1/embeddings" and behaviour == "401":
            return send(h, 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                           "code": "invalid_api_key"}})
        texts = body["input"] if isinstance(body, dict) else []
        rows = [raw_vector(t, self.dims) for t in texts]
        if behaviour == "dims":
            rows[-1] = rows[-1] + [0.5]
        elif behaviour == "zero":
            rows[0] = [0.0] * self.dims
        elif behaviour == "short":
            rows = rows[:-1]
        if h.path == "/api/embed":
            return send(h, 200, {"model": body["model"], "embeddings": rows, "total_duration": 14143917,
                                 "load_duration": 1019500, "prompt_eval_count": 8})
        if h.path == "/v1/embeddings":
            data = [{"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)]
            if behaviour == "shuffled":
                data.reverse()
            elif behaviour == "dup-index":
                data[-1]["index"] = 0
            return send(h, 200, {"object": "list", "data": data, "model": body["model"],
                                 "usage": {"prompt_tokens": 8, "total_tokens": 8}})
        send(h, 404, {"error": "not found"})


def send(h: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    send_raw(h, status, json.dumps(body).encode(), headers)


def send_raw(h: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
    h.send_response(status)
    h.send_header("Content-Type", "application/json; charset=utf-8")
    h.send_header("Content-Length", str(len(data)))
    for key, value in (headers or {}).items():
        h.send_header(key, value)
    h.end_headers()
    h.wfile.write(data)
