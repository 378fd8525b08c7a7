"""Running the service under uvicorn: in one process, or in worker processes sharing one listening socket."""

from __future__ import annotations

import contextlib
import copy
import http
import logging
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import uvicorn
from starlette.types import ASGIApp
from uvicorn.config import LOGGING_CONFIG
from uvicorn.logging import AccessFormatter
from uvicorn.supervisors import Multiprocess

from engram_index.exchange import AccessWriter
from engram_index.metrics import MULTIPROC_ENV
from engram_index.protocol import (
    BODY_MIN_RATE, BODY_TIMEOUT, HEAD_TIMEOUT, MAX_REQUEST_HEAD_BYTES, EnvelopeFor, ServeConfig, plain_envelopes,
)

log = logging.getLogger("uvicorn.error")

MAX_CONNECTIONS = 1000  # open connections per process; one more is answered 503 and closed
IDLE_TIMEOUT = 5  # seconds an idle keep-alive connection stays open
MAX_LOGGED_TARGET = 512  # characters of a request target written to the access log
# Seconds a worker process may take to answer the supervisor's health check (uvicorn's default: 5)
# before it is killed and replaced: a worker busy loading indexes, or on a loaded machine, is slow to
# answer, not dead, and killing it only starts the load again.
WORKER_HEALTHCHECK_TIMEOUT = 30


class BoundedAccessLog(logging.Filter):
    """Cut the request target of an access-log line to MAX_LOGGED_TARGET characters, saying how much was cut."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Shorten the target argument (uvicorn logs client, method, target, version, status)."""
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and len(args[2]) > MAX_LOGGED_TARGET:
            record.args = (args[0], args[1], bounded_target(args[2]), args[3], args[4])
        return True


def bounded_target(target: str) -> str:
    """A request target cut to MAX_LOGGED_TARGET characters, saying how much was cut."""
    if len(target) <= MAX_LOGGED_TARGET:
        return target
    return f"{target[:MAX_LOGGED_TARGET]}…[{len(target) - MAX_LOGGED_TARGET} more characters]"


ACCESS_FORMAT = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'  # uvicorn's
# Each status and its phrase as uvicorn's access line spells it ("<code> <phrase>"; an unknown code: "<code> ").
_STATUS_TEXT = {int(status): f"{int(status)} {status.phrase}" for status in http.HTTPStatus}


class AccessLine(AccessFormatter):
    """uvicorn's access-log formatter, writing the same line without copying each record twice.

    uvicorn's copies the record once per formatter class and looks the status phrase up in an enum:
    a line cost 12.6 µs to log, 5.9 µs with this one (docs/design/service.md). Coloured lines, lines
    with a traceback and any other format are still uvicorn's own.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The line for one answered request: `INFO:     client - "METHOD target HTTP/v" code phrase`."""
        args = record.args
        if (self.use_colors or record.exc_info or record.stack_info or self._fmt != ACCESS_FORMAT
                or not isinstance(args, tuple) or len(args) != 5 or not isinstance(args[4], int)):
            return super().format(record)
        return self.line(record.levelname, args[0], args[1], args[2], args[3], int(args[4]))

    def line(self, level: str, client: object, method: object, target: object, version: object, status: int) -> str:
        """The line of one answered request at `level`."""
        text = _STATUS_TEXT.get(status) or f"{status} "
        return f'{level}:{" " * (8 - len(level))} {client} - "{method} {target} HTTP/{version}" {text}'


def served_access_writer() -> AccessWriter | None:
    """A writer of the access log's lines straight to its stream, when the log is configured as served.

    What logging does for a line (finding the caller's frame, a LogRecord with the time, thread and
    process, the filters, the formatter) cost ~35 µs of CPU a request in a served search, its caches
    cold after the engine's work (docs/design/service.md); this writes the same line under the
    handler's lock for a few. Any other configuration (another handler or formatter, colours, a
    level above INFO, propagation, a filter of the logger's own) gets None: lines go through logging.
    """
    logger = logging.getLogger("uvicorn.access")
    if logger.disabled or logger.filters or logger.propagate or len(logger.handlers) != 1 \
            or not logger.isEnabledFor(logging.INFO):
        return None
    handler = logger.handlers[0]
    formatter = handler.formatter
    if (type(handler) is not logging.StreamHandler or handler.level > logging.INFO
            or not all(isinstance(f, BoundedAccessLog) for f in handler.filters)
            or not isinstance(formatter, AccessLine) or formatter.use_colors or formatter._fmt != ACCESS_FORMAT):
        return None
    bounded = bool(handler.filters)

    def write(client: str, method: str, target: str, version: str, status: int) -> None:
        line = formatter.line("INFO", client, method, bounded_target(target) if bounded else target, version, status)
        with handler.lock or contextlib.nullcontext():
            try:
                stream = handler.stream  # (its stream may be set again: setStream)
                stream.write(line + handler.terminator)
                stream.flush()
            except RecursionError:
                raise
            except Exception:  # as logging does: say so on stderr, go on serving
                handler.handleError(logging.makeLogRecord({"msg": line}))

    return write


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with the access log's lines bounded (and formatted by AccessLine)."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"bounded": {"()": "engram_index.server.BoundedAccessLog"}}
    config["handlers"]["access"]["filters"] = ["bounded"]
    config["formatters"]["access"]["()"] = "engram_index.server.AccessLine"
    return config


def uvicorn_options(access_log: bool = True) -> dict[str, Any]:
    """The uvicorn settings every way of serving shares (access_log: a line per request)."""
    # Our own HTTP/1.1 connection on httptools' C parser (engram_index.protocol): every valid request
    # head reaches the app (a 256 KiB head, so that an oversized query gets the face's 413), what
    # it refuses is answered in JSON, connections are capped. No WebSocket upgrade: no face has one.
    # uvloop's event loop (libuv): a search's two thread hand-offs (to a search thread and back)
    # and the loop's own turns cost less CPU than asyncio's (docs/design/service.md, 0.4-0.9 ms a search).
    return {"log_level": "info", "http": "engram_index.protocol:JsonHttpProtocol", "loop": "uvloop", "ws": "none",
            "head_limit": MAX_REQUEST_HEAD_BYTES, "access_log": access_log,
            "access_writer": served_access_writer, "limit_concurrency": MAX_CONNECTIONS, "timeout_keep_alive": IDLE_TIMEOUT,
            "head_timeout": HEAD_TIMEOUT, "body_timeout": BODY_TIMEOUT, "body_min_rate": BODY_MIN_RATE,
            "log_config": log_config()}


def tcp_listener(host: str, port: int) -> socket.socket:
    """A bound, inheritable TCP socket for worker processes to accept on, with Nagle off on its connections.

    asyncio turns TCP_NODELAY on for accepted connections only when the listening socket says it
    is TCP (proto IPPROTO_TCP); the socket uvicorn binds for its workers leaves proto at 0, so
    every keep-alive response after the first would wait for the client's delayed ACK (about
    40 ms on Linux; uvicorn issue 3149). Naming the protocol here keeps Nagle off.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def run(app: ASGIApp, host: str, port: int, *, access_log: bool = True,
        envelopes: EnvelopeFor = plain_envelopes) -> None:
    """Serve an app in this process until interrupted (errors before any route in `envelopes`)."""
    uvicorn.Server(ServeConfig(app, host=host, port=port, envelopes=envelopes, **uvicorn_options(access_log))).run()


def run_workers(factory: str, workers: int, host: str, port: int, *, access_log: bool = True,
                envelopes: EnvelopeFor = plain_envelopes) -> None:
    """Serve the app that `factory` ("module:function") builds in `workers` processes, until interrupted."""
    config = ServeConfig(
        factory, factory=True, workers=workers, host=host, port=port, envelopes=envelopes,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_TIMEOUT, **uvicorn_options(access_log)
    )
    listener = tcp_listener(host, port)
    log.info("serving on http://%s:%d with %d worker processes", host, listener.getsockname()[1], workers)
    made = metrics_directory()
    try:
        Multiprocess(config, sockets=[listener]).run()
    except KeyboardInterrupt:
        pass
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def metrics_directory() -> str | None:
    """Point the workers' metrics at one directory, emptied (the one named in the environment, or a new one).

    Set before the workers start, so that each imports prometheus-client in multiprocess mode and
    a scrape answered by any worker counts all of them. Returns the directory made here (removed at exit).
    """
    named = os.environ.get(MULTIPROC_ENV)
    if named:
        path = Path(named)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):  # a previous run's values would be added to this one's
            stale.unlink()
        return None
    made = tempfile.mkdtemp(prefix="engram-metrics-")
    os.environ[MULTIPROC_ENV] = made
    return made
