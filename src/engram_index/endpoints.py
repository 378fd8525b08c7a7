"""The one endpoint wrapper every face's routes run in: what a route raises, answered in its face's envelope.

A face hands in its `Answers` (how it spells an error of the package, and a 500); an error the face
answers is given to it as it is, anything else is a 500 naming a request id that is in the log with
the traceback. Never a traceback, never plain text. The app's own 500s (envelopes.py) answer here too.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from engram_index.errors import EngramError
from engram_index.search_pool import on_loop

Endpoint = Callable[[Request], Awaitable[Response]]
T = TypeVar("T")

# The threads the faces' synchronous handlers run on (as many as Starlette's run_in_threadpool allows,
# anyio's 40). A hand-off to them and back costs ~30 µs of CPU on uvloop, anyio's ~47
# (`python bench/pool_hop.py`); handlers read no context variables of the request's task.
HANDLER_THREADS = 40
_handlers = ThreadPoolExecutor(HANDLER_THREADS, thread_name_prefix="handler")


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs) on one of the handler threads, from the event loop (a face's synchronous work)."""
    loop = asyncio.get_running_loop()
    # One loop future settled from the thread (run_in_executor chains a second one to the executor's).
    return await on_loop(_handlers.submit(fn, *args, **kwargs), loop)


class JSONAnswer(JSONResponse):
    """A JSON response encoded by orjson: the same compact UTF-8 bytes as the standard library's, ~20x sooner."""

    def render(self, content: Any) -> bytes:
        """Encode the body (non-finite floats and lone surrogates fail here, as they did before)."""
        return orjson.dumps(content)


def new_request_id(request: Request) -> str:
    """A fresh id to name a failure by in the log and in its answer."""
    return uuid.uuid4().hex[:16]


def _every_error(exc: EngramError) -> bool:
    """Every error of the package is answered as it is."""
    return True


@dataclass(frozen=True, slots=True)
class Answers:
    """How one face answers what its routes raise."""

    log: logging.Logger
    error: Callable[[Request, EngramError], Response]  # an error of the package, in the face's envelope
    internal: Callable[[Request, str], Response]  # an unexpected failure, named by the id it was logged under
    request_id: Callable[[Request], str] = new_request_id  # that id
    # Which errors of the package the face answers as they are; the rest are unexpected (a logged 500).
    tells: Callable[[EngramError], bool] = _every_error


def answer(answers: Answers, request: Request, exc: Exception) -> Response:
    """The face's answer to an exception: an error it tells in its envelope, anything else a logged 500."""
    if isinstance(exc, EngramError) and answers.tells(exc):
        return answers.error(request, exc)
    return failed(answers, request, exc)


def failed(answers: Answers, request: Request, exc: BaseException) -> Response:
    """A 500 in the face's envelope naming a request id, logged under that id with the traceback."""
    request_id = answers.request_id(request)
    answers.log.error("request %s failed", request_id, exc_info=exc)
    return answers.internal(request, request_id)


def endpoint(answers: Answers, work: Endpoint) -> Endpoint:
    """An ASGI endpoint running `work`, whose exceptions are answered as the face answers them."""

    async def run(request: Request) -> Response:
        try:
            return await work(request)
        except Exception as exc:  # every failure gets the face's envelope, never a traceback
            return answer(answers, request, exc)

    return run


class FaceRoute(Route):
    """Starlette's Route for an endpoint made by `endpoint` (which answers whatever it raises): requests go
    straight to it, without Starlette's per-route wrapper that would turn what escapes into answers
    (nothing does), a Request object and two coroutines fewer per request."""

    def __init__(self, path: str, run: Endpoint, **options: Any) -> None:
        """A route to `run`, as Route(path, run, **options) would match it."""
        super().__init__(path, run, **options)
        self.app = _direct(run)


def _direct(run: Endpoint) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """The ASGI app answering a request with what `run` returns."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        response = await run(Request(scope, receive, send))
        await response(scope, receive, send)

    return app
