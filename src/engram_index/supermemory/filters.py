"""The v5 FilterExpression: every validation rule of the grammar, and exact evaluation over metadata.

A filter is a predicate `{field, operator, value, caseSensitive?}` or a group `{operator: and|or,
operands: 1-200}`, nested at most 5 levels. Fields name metadata keys literally (a `.` is part of
the key). A negative operator (neq, notContains, arrayNotContains) also holds where the key is
absent; every positive one needs the key, with a value of the operator's type.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from engram_index.supermemory.errors import Invalid, Path, invalid

MAX_DEPTH = 5
MAX_OPERANDS = 200
FIELD = re.compile(r"[a-zA-Z0-9_.-]+")
LEGACY = {
    "AND": "use {\"operator\": \"and\", \"operands\": [...]}",
    "OR": "use {\"operator\": \"or\", \"operands\": [...]}",
    "key": "use field",
    "filterType": "v5 predicates name an explicit operator",
    "negate": "use neq, notContains or arrayNotContains",
    "numericOperator": "use gt, gte, lt or lte",
    "ignoreCase": "use caseSensitive: false",
}
STRING_OPS = {"eq", "neq", "contains", "notContains"}
NUMBER_OPS = {"gt", "gte", "lt", "lte"}
ARRAY_OPS = {"arrayContains", "arrayNotContains"}
OPERATORS = STRING_OPS | NUMBER_OPS | ARRAY_OPS

Predicate = Callable[[Mapping[str, Any]], bool]


def _is_number(value: Any) -> bool:
    """A JSON number (not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate(value: Any, path: Path | None = None, depth: int = 1) -> dict[str, Any]:
    """Check a FilterExpression and return it unchanged (Invalid naming the first problem)."""
    path = path or ["filter"]
    if not isinstance(value, dict):
        raise invalid("a filter must be an object", *path)
    for key in value:
        if key in LEGACY:
            raise invalid(f"legacy filter key {key!r}: {LEGACY[key]}", *path, key)
    if depth > MAX_DEPTH:
        raise invalid(f"filters nest at most {MAX_DEPTH} levels", *path)
    if "operands" in value:
        return _group(value, path, depth)
    return _predicate(value, path)


def _group(value: dict[str, Any], path: Path, depth: int) -> dict[str, Any]:
    """Check an and/or group."""
    extra = set(value) - {"operator", "operands"}
    if extra:
        raise invalid(f"unknown key {sorted(extra)[0]!r} in a filter group", *path, sorted(extra)[0])
    if not isinstance(value.get("operator"), str) or value["operator"] not in ("and", "or"):
        raise invalid("a filter group's operator must be and or or", *path, "operator")
    operands = value["operands"]
    if not isinstance(operands, list) or not operands:
        raise invalid("operands must be a non-empty array", *path, "operands")
    if len(operands) > MAX_OPERANDS:
        raise invalid(f"a filter group holds at most {MAX_OPERANDS} operands", *path, "operands")
    for i, operand in enumerate(operands):
        validate(operand, [*path, "operands", i], depth + 1)
    return value


def _predicate(value: dict[str, Any], path: Path) -> dict[str, Any]:
    """Check one predicate: closed, a known operator, a value of its type."""
    extra = set(value) - {"field", "operator", "value", "caseSensitive"}
    if extra:
        raise invalid(f"unknown key {sorted(extra)[0]!r} in a filter predicate", *path, sorted(extra)[0])
    for key in ("field", "operator", "value"):
        if key not in value or value[key] is None:
            raise invalid("is required", *path, key)
    name, op, operand = value["field"], value["operator"], value["value"]
    if not isinstance(name, str) or not 1 <= len(name) <= 128 or not FIELD.fullmatch(name):
        raise invalid("field must be 1-128 characters of a-z, A-Z, 0-9, _, . and -", *path, "field")
    # A set lookup hashes its key: a list or object operator must be refused before it, not crash it.
    if not isinstance(op, str) or op not in OPERATORS:
        raise invalid(f"unknown operator {op!r}"[:200], *path, "operator")
    if op in ("eq", "neq"):
        ok = isinstance(operand, (str, bool)) or _is_number(operand)
        kind = "a string, number or boolean"
    elif op in NUMBER_OPS:
        ok, kind = _is_number(operand), "a number"
    else:
        ok, kind = isinstance(operand, str), "a string"
    if not ok:
        raise invalid(f"{op} takes {kind}", *path, "value")
    if "caseSensitive" in value:
        takes = op in ("contains", "notContains") or (op in ("eq", "neq") and isinstance(operand, str))
        if not takes:
            raise invalid(f"caseSensitive applies to string eq, neq, contains and notContains, not {op}", *path,
                          "caseSensitive")
        if not isinstance(value["caseSensitive"], bool):
            raise invalid("caseSensitive must be a boolean", *path, "caseSensitive")
    return value


def compile_filter(expr: Mapping[str, Any]) -> Predicate:
    """A function that says whether a metadata map passes a (validated) filter."""
    if "operands" in expr:
        parts = [compile_filter(o) for o in expr["operands"]]
        if expr["operator"] == "and":
            return lambda md: all(p(md) for p in parts)
        return lambda md: any(p(md) for p in parts)
    name, op, value = expr["field"], expr["operator"], expr["value"]
    sensitive = expr.get("caseSensitive", True)
    fold: Callable[[str], str] = (lambda s: s) if sensitive else str.casefold
    negated = {"neq": "eq", "notContains": "contains", "arrayNotContains": "arrayContains"}.get(op)
    if negated is not None:
        inner = _positive(name, negated, value, fold)
        return lambda md: not inner(md)
    return _positive(name, op, value, fold)


def _positive(name: str, op: str, value: Any, fold: Callable[[str], str]) -> Predicate:
    """The predicate of a positive operator."""
    if op == "eq":
        if isinstance(value, str):
            want = fold(value)
            return lambda md: isinstance(md.get(name), str) and fold(md[name]) == want
        if isinstance(value, bool):
            return lambda md: isinstance(md.get(name), bool) and md[name] == value
        return lambda md: _is_number(md.get(name)) and md[name] == value
    if op in NUMBER_OPS:
        compare: dict[str, Callable[[float], bool]] = {
            "gt": lambda x: x > value, "gte": lambda x: x >= value,
            "lt": lambda x: x < value, "lte": lambda x: x <= value,
        }
        test = compare[op]
        return lambda md: _is_number(md.get(name)) and test(md[name])
    if op == "contains":
        want = fold(value)
        return lambda md: isinstance(md.get(name), str) and want in fold(md[name])
    want = value.casefold()  # arrayContains: exact member, case-insensitive
    return lambda md: isinstance(md.get(name), list) and any(
        isinstance(v, str) and v.casefold() == want for v in md[name])


def parse(value: Any) -> dict[str, Any] | None:
    """A request's `filter` checked (None when absent)."""
    if value is None:
        return None
    try:
        return validate(value)
    except RecursionError:
        raise Invalid([(f"filters nest at most {MAX_DEPTH} levels", ["filter"])]) from None
