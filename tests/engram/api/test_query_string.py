"""The garden face's query-string parse reads every query string as Starlette's QueryParams reads it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.datastructures import QueryParams

from engram_index.engram.api.lexicon import QueryString, query_string

PIECES = ["a", "b", "space", "=", "&", "+", "%", "%2", "%2B", "%3D", "%26", "%C3%A9", "%ff", "%zz", ";", " ", "é",
          "\xff", "at%3A%2F%2Fdid%3Aplc%3Ax", "vector", "-_"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=24))
def test_every_query_string_is_read_as_starlette_reads_it(pieces: list[str]) -> None:
    raw = "".join(pieces).encode("latin-1", "replace")
    ours, theirs = QueryString(raw), QueryParams(raw)
    for _ in range(2):  # the second time from the values kept decoded
        for name in {*theirs.keys(), "a", "space", "absent"}:
            assert ours.getlist(name) == theirs.getlist(name), (raw, name)
            assert ours.get(name) == theirs.get(name, ""), (raw, name)
        ours = QueryString(raw)


def test_a_requests_query_string_is_parsed_once_and_kept_in_its_scope() -> None:
    scope = {"query_string": b"space=at%3A%2F%2Fx&q=a+b&q=c"}
    first = query_string(scope)
    assert query_string(scope) is first
    assert first.getlist("q") == ["a b", "c"] and first.get("space") == "at://x"
