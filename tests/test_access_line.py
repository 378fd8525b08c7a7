"""The access log's formatter writes exactly uvicorn's line."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from uvicorn.logging import AccessFormatter

from engram_index.server import ACCESS_FORMAT, AccessLine, log_config, served_access_writer


def record(args: object, level: int = logging.INFO, exc_info: object = None) -> logging.LogRecord:
    """An access-log record as uvicorn's request cycle makes it."""
    return logging.LogRecord("uvicorn.access", level, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, exc_info)  # type: ignore[arg-type]


@pytest.mark.parametrize("args", [
    ("127.0.0.1:5000", "GET", "/xrpc/garden.engram.searchMemories?space=at%3A%2F%2Fx&q=a+b", "1.1", 200),
    ("[::1]:80", "POST", "/v1/memory/retrieve", "1.0", 429),
    ("", "DELETE", "/v3/documents/%C3%A9", "1.1", 599),  # no client; a status without a phrase
    ("10.0.0.1:1", "OPTIONS", "/", "1.1", 204),
    ("10.0.0.1:1", "GET", "/x", "1.1", 500),
])
@pytest.mark.parametrize("colors", [False, True])
def test_the_line_is_uvicorns(args: tuple[object, ...], colors: bool) -> None:
    ours, theirs = AccessLine(ACCESS_FORMAT, use_colors=colors), AccessFormatter(ACCESS_FORMAT, use_colors=colors)
    assert ours.format(record(args)) == theirs.format(record(args))
    warning = record(args, logging.WARNING)
    assert ours.format(warning) == theirs.format(record(args, logging.WARNING))


def test_other_records_and_formats_are_formatted_by_uvicorn() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        failure = sys.exc_info()
    args = ("127.0.0.1:5000", "GET", "/", "1.1", 200)
    assert AccessLine(ACCESS_FORMAT).format(record(args, exc_info=failure)) == \
        AccessFormatter(ACCESS_FORMAT).format(record(args, exc_info=failure))
    other = "%(client_addr)s %(status_code)s %(message)s"
    assert AccessLine(other).format(record(args)) == AccessFormatter(other).format(record(args))


def test_the_served_configuration_uses_it() -> None:
    config = log_config()
    assert config["formatters"]["access"]["()"] == "engram_index.server.AccessLine"
    assert config["formatters"]["access"]["fmt"] == ACCESS_FORMAT


@pytest.fixture
def served_log() -> Any:
    """The served logging configuration, its access lines kept in memory; restored afterwards."""
    import io
    import logging.config

    access = logging.getLogger("uvicorn.access")
    saved = (access.handlers[:], access.level, access.propagate, access.disabled)
    logging.config.dictConfig(log_config())
    stream = io.StringIO()
    access.handlers[0].setStream(stream)  # type: ignore[attr-defined]

    def served_only() -> None:  # pytest attaches its capture to every logger during a test: not served
        access.handlers[:] = [h for h in access.handlers if type(h) is logging.StreamHandler]
    yield access, stream, served_only
    access.handlers[:], access.level, access.propagate, access.disabled = saved[0], saved[1], saved[2], saved[3]


@pytest.mark.parametrize("target", ["/xrpc/garden.engram.searchMemories?space=at%3A%2F%2Fx&q=a+b", "/t?" + "v" * 2000])
def test_the_served_writer_writes_the_line_logging_writes(served_log: Any, target: str) -> None:
    access, stream, served_only = served_log
    served_only()
    args = ("127.0.0.1:5000", "GET", target, "1.1", 200)
    access.info('%s - "%s %s HTTP/%s" %d', *args)
    through_logging = stream.getvalue()
    stream.seek(0)
    stream.truncate()
    write = served_access_writer()
    assert write is not None
    write(*args)
    assert stream.getvalue() == through_logging and through_logging.endswith(" 200 OK\n")


def test_any_other_configuration_of_the_access_log_goes_through_logging(served_log: Any) -> None:
    access, _, served_only = served_log
    served_only()
    assert served_access_writer() is not None
    access.handlers[0].formatter.use_colors = True
    assert served_access_writer() is None
    access.handlers[0].formatter.use_colors = False
    access.setLevel(logging.WARNING)
    assert served_access_writer() is None
    access.setLevel(logging.INFO)
    access.addHandler(logging.NullHandler())
    assert served_access_writer() is None
