"""A face's synchronous work runs on the handler threads: its answer, or its error, reaches the route."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engram_index.endpoints import in_thread


def test_work_runs_on_a_handler_thread_and_its_answer_or_error_comes_back() -> None:
    def work(a: int, *, b: int) -> tuple[int, str]:
        return a + b, threading.current_thread().name

    def broken() -> None:
        raise ValueError("no")

    async def run() -> tuple[int, str]:
        with pytest.raises(ValueError, match="no"):
            await in_thread(broken)
        return await in_thread(work, 1, b=2)

    total, thread = asyncio.run(run())
    assert total == 3 and thread.startswith("handler") and thread != threading.current_thread().name


def test_a_face_route_answers_with_its_endpoint_and_takes_the_methods_a_route_takes() -> None:
    from starlette.responses import PlainTextResponse
    from starlette.routing import Match, Route

    from engram_index.endpoints import FaceRoute

    async def run(request: object) -> PlainTextResponse:
        return PlainTextResponse("ok")

    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    ours, theirs = FaceRoute("/x", run), Route("/x", run)
    assert ours.methods == theirs.methods == {"GET", "HEAD"}
    for method in ("GET", "HEAD", "POST"):
        scope = {"type": "http", "method": method, "path": "/x", "root_path": ""}
        assert ours.matches(scope)[0] == theirs.matches(scope)[0]
    asyncio.run(ours.handle({"type": "http", "method": "GET", "path": "/x", "headers": []}, receive, send))
    assert sent[0]["status"] == 200 and sent[1]["body"] == b"ok"
    assert theirs.matches({"type": "http", "method": "POST", "path": "/x", "root_path": ""})[0] is Match.PARTIAL
