"""Hypothesis strategies from a route's own schema: valid values, boundary values and wrong ones.

A schema is the subset of JSON Schema that the official SDKs' pydantic models emit and the v5 route
tables below are written in: `type`, `enum`/`const`, `anyOf`/`oneOf`, `$ref` into `$defs`,
`properties` + `required`, `items` + `minItems`/`maxItems`, `minLength`/`maxLength`,
`minimum`/`maximum`, `format: date-time`, `examples`. What is drawn for each node:

- a valid value of its type, often at a boundary (an edge of its length or range; years 1 and
  9999 with +14:00 and -14:00; 2^63 - 1 and 2^63 + 1 for whole numbers; empty and very long text);
- or, less often, a wrong one: another JSON type, null, a value just past a limit, a lone
  surrogate, a deeply nested array, an unknown key in an object.

`value` draws a valid object or one with a single fault somewhere in it; `sweep` is the exhaustive
half: a valid body with each of its properties, at any depth, set in turn to each of its
`boundaries`; `QUERY_EDGES` are the same for query strings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Schema = dict[str, Any]
BIG = [2**63 - 1, 2**63, 2**63 + 1, -(2**63), -(2**63) - 1, 2**64, 10**20]
TIMES_IN_RANGE = ["0001-01-01T14:00:00+14:00", "9999-12-31T09:59:59-14:00", "2024-02-29T12:00:00Z",
                  "2024-05-01T10:00:00.123+02:00", "2030-01-01T00:00:00Z"]
TIMES_OUT_OF_RANGE = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "0000-01-01T00:00:00Z",
                      "2024-13-01T00:00:00Z", "yesterday", "2024-01-01T00:00:00+25:00", ""]
ODD_TEXT = ["", " ", "\x00", "\ud800", "\udfff x", "é", "日本語", "\u202e", "\U0010ffff", "a" * 5000, "%00", "../x"]
SAFE_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


def _resolve(schema: Schema, root: Schema) -> Schema:
    """A schema with its `$ref` followed (one level at a time, into the root's `$defs`)."""
    while "$ref" in schema:
        schema = root.get("$defs", {})[schema["$ref"].split("/")[-1]]
    return schema


def junk() -> st.SearchStrategy[Any]:
    """Any JSON value of any type, boundaries and nesting included (wrong for most fields)."""
    leaves = st.one_of(st.none(), st.booleans(), st.sampled_from(BIG), st.integers(-5, 5),
                       st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(ODD_TEXT), SAFE_TEXT)
    nested = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["a", "", "id", "type", "\ud800"]), inner, max_size=3), max_leaves=6)
    return st.one_of(leaves, nested, st.just(_deep(300)))


def _deep(n: int) -> Any:
    """An array nested `n` deep."""
    value: Any = []
    for _ in range(n):
        value = [value]
    return value


def _string(schema: Schema) -> st.SearchStrategy[str]:
    """A string within the schema's limits, often at one of them."""
    lo, hi = schema.get("minLength", 0), schema.get("maxLength")
    if schema.get("format") == "date-time":
        return st.sampled_from(TIMES_IN_RANGE)
    top = hi if hi is not None else max(lo, 40)
    edges = [e for e in ("x" * lo, "y" * top, "é" * max(lo, 1)) if lo <= len(e) <= top]
    options: list[st.SearchStrategy[str]] = [st.sampled_from(edges)] if edges else []
    if not schema.get("exact"):
        options.append(SAFE_TEXT.filter(lambda s: lo <= len(s) <= top))
    return st.one_of(options) if options else st.just("x" * lo)


def _wrong_string(schema: Schema) -> st.SearchStrategy[str]:
    """A string just past the schema's limits, not a time, or odd."""
    lo, hi = schema.get("minLength", 0), schema.get("maxLength")
    bad = list(ODD_TEXT)
    if lo:
        bad.append("x" * (lo - 1))
    if hi is not None:
        bad.append("z" * (hi + 1))
    if schema.get("format") == "date-time":  # mostly the instants past what UTC can write back
        return st.sampled_from(TIMES_OUT_OF_RANGE[:2]) | st.sampled_from(TIMES_OUT_OF_RANGE) | st.sampled_from(bad)
    return st.sampled_from(bad)


def _integer(schema: Schema) -> st.SearchStrategy[int]:
    """A whole number within the schema's range, often at an edge of it."""
    lo = schema["exclusiveMinimum"] + 1 if "exclusiveMinimum" in schema else schema.get("minimum", -(2**63))
    hi = schema.get("maximum", 2**63 - 1)
    return st.one_of(st.sampled_from(sorted({lo, hi, max(lo, min(hi, 1)), max(lo, min(hi, 0))})),
                     st.integers(int(lo), int(min(hi, lo + 200))))


def _wrong_number(schema: Schema) -> st.SearchStrategy[Any]:
    """Numbers past the range, fractions, 2^63 and its neighbours."""
    bad: list[Any] = list(BIG) + [1.5, -0.5, 1e308]
    if "minimum" in schema:
        bad.append(schema["minimum"] - 1)
    if "maximum" in schema:
        bad.append(schema["maximum"] + 1)
    return st.sampled_from(bad)


def valid(schema: Schema, root: Schema | None = None, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values the schema takes (the server may still refuse some: ranges it documents elsewhere)."""
    root = root if root is not None else schema
    if "examples" in schema:  # values a route needs to get past its checks (the caller's tenant, a known type)
        return st.sampled_from(schema["examples"])
    schema = _resolve(schema, root)
    if "examples" in schema:
        return st.sampled_from(schema["examples"])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            choices = [s for s in schema[key] if _resolve(s, root).get("type") != "null"] or schema[key]
            # An open enum (`Literal[...] | str`) is valid as its known values: the server takes only those.
            known = [s for s in choices if "enum" in _resolve(s, root)]
            return st.one_of([valid(s, root, depth) for s in known or choices])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([valid({**schema, "type": k}, root, depth) for k in kind if k != "null"])
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return _integer(schema)
    if kind == "number":
        lo, hi = schema.get("minimum", -1e6), schema.get("maximum", 1e6)
        return st.one_of(st.sampled_from([lo, hi]), st.floats(lo, hi, allow_nan=False))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        item = schema.get("items", {})
        lo, hi = schema.get("minItems", 0), schema.get("maxItems", 3)
        return st.lists(valid(item, root, depth + 1), min_size=lo, max_size=min(hi, lo + 3))
    if kind == "object" or "properties" in schema:
        return _object(schema, root, depth, clean=True)
    return junk() if depth < 3 else st.none()


def wrong(schema: Schema, root: Schema, depth: int = 0) -> st.SearchStrategy[Any]:
    """A value the schema refuses, or one at the edge the server must still answer: past a limit, a wrong type."""
    node = _resolve(schema, root)
    for key in ("anyOf", "oneOf"):
        if key in node:
            arms = [_resolve(s, root) for s in node[key] if _resolve(s, root).get("type") != "null"]
            if arms:
                return st.one_of([wrong(a, root, depth) for a in arms])
    kind = node.get("type")
    options: list[st.SearchStrategy[Any]] = [junk()]
    if kind == "string" or "enum" in node:
        options += [_wrong_string(node)] * 3
    if kind in ("integer", "number"):
        options += [_wrong_number(node)] * 3
    if kind == "array":
        item = node.get("items", {})
        too_many = node.get("maxItems", 50) + 1
        options += [st.lists(wrong(item, root, depth + 1), min_size=1, max_size=2), st.just([None] * too_many)]
    if (kind == "object" or "properties" in node) and depth < 4:
        options += [_object(node, root, depth, clean=False)] * 2
    return st.one_of(options)


def value(schema: Schema, root: Schema | None = None, depth: int = 0) -> st.SearchStrategy[Any]:
    """A valid value, or (more often) a valid one with one fault somewhere in it."""
    root = root if root is not None else schema
    node = _resolve(schema, root)
    if node.get("type") == "object" or "properties" in node:
        faulty = _object(node, root, depth, clean=False)
        return st.one_of(valid(node, root, depth), faulty, faulty)
    return st.one_of(valid(node, root, depth), wrong(node, root, depth))


@st.composite
def _object_draw(draw: st.DrawFn, schema: Schema, root: Schema, depth: int, clean: bool) -> dict[str, Any]:
    """An object of every required property and some optional ones; unclean, with one fault: a property
    of a wrong or boundary value (nested ones too), a required one missing, or an unknown key."""
    props: dict[str, Schema] = schema.get("properties", {})
    required = [k for k in schema.get("required", []) if k in props]
    out: dict[str, Any] = {}
    for name, sub in props.items():
        if name in required or draw(st.integers(0, 2)) == 0:
            out[name] = draw(valid(sub, root, depth + 1), label=name)
    if clean:
        return out
    fault = draw(st.sampled_from(["field"] * 6 + ["missing", "unknown"]))
    if fault == "field" and props:
        # Times, whole numbers and nested objects hold the boundaries that reach conversions: chosen more often.
        weighted = [n for n in sorted(props) for _ in range(3 if _convertible(props[n], root) else 1)]
        name = draw(st.sampled_from(weighted), label="faulty")
        out[name] = draw(wrong(props[name], root, depth + 1), label=f"{name} (wrong)")
    elif fault == "missing" and required:
        out.pop(draw(st.sampled_from(required)), None)
    else:
        out[draw(st.sampled_from(["bogus", "", "\ud800", "Type"]))] = draw(junk())
    return out


def _convertible(schema: Schema, root: Schema) -> bool:
    """Whether a property's value is converted by a server (a time, a whole number, an object holding them)."""
    node = _resolve(schema, root)
    arms = [_resolve(a, root) for a in node.get("anyOf", [])] or [node]
    return any(a.get("format") == "date-time" or a.get("type") in ("integer", "object") or "$ref" in a
               or "properties" in a for a in arms)


def _object(schema: Schema, root: Schema, depth: int, clean: bool) -> st.SearchStrategy[dict[str, Any]]:
    """The strategy of `_object_draw`."""
    return _object_draw(schema, root, depth, clean)


def body(schema: Schema) -> st.SearchStrategy[bytes]:
    """A request body from a schema: JSON of a value, or (rarely) bytes that are no JSON at all."""
    encoded = value(schema).map(lambda v: json.dumps(v, allow_nan=False).encode())  # \ud800 goes as its escape
    broken = st.sampled_from([b"", b"{", b"[]", b"null", b"\xff\xfe", b'{"a":1,}', b"1e999", b"[" * 3000])
    return st.one_of(encoded, encoded, encoded, encoded, broken)


def query_value(schema: Schema) -> st.SearchStrategy[str]:
    """A query parameter's text from its schema: its valid forms, edges, and wrong ones."""
    def text(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float) and math.isfinite(v) and v.is_integer():
            return str(int(v))
        return v if isinstance(v, str) else json.dumps(v)

    wrong = st.sampled_from(["", "abc", "-1", "0", "1.5", "1e3", "²", " 1", "٣", "9" * 30, "9" * 5000, "true",
                             "\ud800", "[]", "{", *TIMES_OUT_OF_RANGE, *map(str, BIG)])
    return st.one_of(valid(schema).map(text), valid(schema).map(text), wrong)


def query_string(params: list[tuple[str, str]]) -> str:
    """A query string whose values may hold lone surrogates (sent as the bytes a broken client would send)."""
    return "&".join(f"{quote(k, safe='')}={quote(v, safe='', errors='surrogatepass')}" for k, v in params)


# -- the boundary sweep: each property of a valid body, in turn, at each of its boundaries -----------

def _key(v: Any) -> str:
    """A value's identity for de-duplication."""
    return json.dumps(v, sort_keys=True)


def boundaries(schema: Schema, root: Schema) -> list[Any]:
    """The values at and past the edges of a node: wrong types, times, 64-bit limits, lengths, nesting."""
    node = _resolve(schema, root)
    arms = [_resolve(a, root) for a in node.get("anyOf", node.get("oneOf", []))] or [node]
    out: list[Any] = [None, [], {}, True, "x", 1.5, _deep(300)]
    for arm in arms:
        kind = arm.get("type")
        if arm.get("format") == "date-time":
            out += TIMES_OUT_OF_RANGE[:2] + TIMES_IN_RANGE[:2] + ["yesterday"]
        elif kind == "string" or "enum" in arm:
            out += ["", "\ud800", "é" * 5000] + ([arm["maxLength"] * "z" + "z"] if "maxLength" in arm else [])
        if kind in ("integer", "number"):
            out += [2**63 - 1, 2**63, 2**63 + 1, -(2**63) - 1, 0, -1, 10**20]
        if kind == "array":
            out += [[None] * (arm.get("maxItems", 20) + 1), [{}]]
    seen: set[str] = set()
    return [v for v in out if not (_key(v) in seen or seen.add(_key(v)))]  # type: ignore[func-returns-value]


def sweep(schema: Schema, base: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Bodies that are `base` with one property (at any depth) set to one of its boundaries, named by path."""
    out: list[tuple[str, dict[str, Any]]] = []

    def walk(node: Schema, at: dict[str, Any], path: list[str], rebuild: Any) -> None:
        node = _resolve(node, schema)
        arms = [_resolve(a, schema) for a in node.get("anyOf", [])] or [node]
        props = {k: v for a in arms for k, v in a.get("properties", {}).items()}
        for name, sub in props.items():
            for edge in boundaries(sub, schema):
                out.append((".".join([*path, name]), rebuild({**at, name: edge})))
            inner = at.get(name)
            if isinstance(inner, dict):
                walk(sub, inner, [*path, name], lambda changed, n=name: rebuild({**at, n: changed}))
            elif isinstance(inner, list) and inner and isinstance(inner[0], dict):
                walk(_resolve(sub, schema).get("items", {}) if "items" in _resolve(sub, schema) else
                     next((_resolve(a, schema)["items"] for a in _resolve(sub, schema).get("anyOf", [])
                           if "items" in _resolve(a, schema)), {}),
                     inner[0], [*path, name, "0"], lambda changed, n=name: rebuild({**at, n: [changed]}))

    walk(schema, base, [], lambda changed: changed)
    return out


def encode(value: Any) -> bytes:
    """JSON as a client sends it (a lone surrogate as its escape, which a strict parser refuses)."""
    return json.dumps(value, allow_nan=False).encode()


QUERY_EDGES = ["", "abc", "-1", "0", "1", "1.5", "1e3", "²", " 1", "٣", "9" * 30, "9" * 5000, "true", "false",
               "\ud800", "[]", "{", '{"tenantId": 5}', '{"a\\"b": 1}', '{"x": %s}' % json.dumps(_deep(300)),
               '{"x": 18446744073709551615}', *TIMES_OUT_OF_RANGE, *TIMES_IN_RANGE[:2], *map(str, BIG)]


def check_drawn(draw: Callable[[st.DataObject], Any], send: Callable[[Any], Any],
                problems: Callable[[Any, Any], list[str]], examples: int) -> None:
    """Draw `examples` requests (deterministic seed), send each and fail on the first whose answer has problems."""
    @settings(derandomize=True, max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        call = draw(data)
        answer = send(call)
        found = problems(call, answer)
        assert not found, f"{call} -> {answer.status_code} {answer.text[:300]}: {found}"

    run()
