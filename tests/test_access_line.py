"""The access log's formatter writes exactly uvicorn's line."""

from __future__ import annotations

import logging

import pytest
from uvicorn.logging import AccessFormatter

from engram_index.server import ACCESS_FORMAT, AccessLine, log_config


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
