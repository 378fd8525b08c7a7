"""A small validator for closed JSON bodies and query strings: types, limits, patterns, unknown keys.

Each spec checks one value at a path and returns it (or raises Invalid naming the path). An
optional field sent as JSON null counts as absent, except in the fields that say null clears.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from engram_index.supermemory.errors import Invalid, Path, invalid

Check = Callable[[Any, Path], Any]


def _type_name(value: Any) -> str:
    """The JSON type of a value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def string(min_len: int = 0, max_len: int | None = None, pattern: str | None = None) -> Check:
    """A string of min_len..max_len characters, matching pattern when given."""
    rx = re.compile(pattern) if pattern else None

    def check(value: Any, path: Path) -> str:
        if not isinstance(value, str):
            raise invalid(f"expected a string, got {_type_name(value)}", *path)
        if len(value) < min_len:
            raise invalid(f"must be at least {min_len} characters", *path)
        if max_len is not None and len(value) > max_len:
            raise invalid(f"must be at most {max_len} characters", *path)
        if rx is not None and not rx.fullmatch(value):
            raise invalid(f"must match {pattern}", *path)
        return value

    return check


def integer(lo: int | None = None, hi: int | None = None) -> Check:
    """An integer (a JSON number without a fraction) within [lo, hi]."""

    def check(value: Any, path: Path) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise invalid(f"expected an integer, got {_type_name(value)}", *path)
        if isinstance(value, float) and not value.is_integer():
            raise invalid("expected an integer", *path)
        number = int(value)
        if lo is not None and number < lo:
            raise invalid(f"must be at least {lo}", *path)
        if hi is not None and number > hi:
            raise invalid(f"must be at most {hi}", *path)
        return number

    return check


def number(lo: float | None = None, hi: float | None = None) -> Check:
    """A finite JSON number within [lo, hi]."""

    def check(value: Any, path: Path) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise invalid(f"expected a number, got {_type_name(value)}", *path)
        if lo is not None and value < lo:
            raise invalid(f"must be at least {lo}", *path)
        if hi is not None and value > hi:
            raise invalid(f"must be at most {hi}", *path)
        return float(value)

    return check


def boolean(value: Any, path: Path) -> bool:
    """A JSON boolean."""
    if not isinstance(value, bool):
        raise invalid(f"expected a boolean, got {_type_name(value)}", *path)
    return value


def one_of(*choices: str) -> Check:
    """One of the given strings."""

    def check(value: Any, path: Path) -> str:
        if not isinstance(value, str) or value not in choices:
            raise invalid(f"must be one of {', '.join(choices)}", *path)
        return value

    return check


def array(item: Check, min_len: int = 0, max_len: int | None = None, unique: bool = False) -> Check:
    """An array of min_len..max_len items, each checked by `item`."""

    def check(value: Any, path: Path) -> list[Any]:
        if not isinstance(value, list):
            raise invalid(f"expected an array, got {_type_name(value)}", *path)
        if len(value) < min_len:
            raise invalid(f"must hold at least {min_len} item{'s' if min_len != 1 else ''}", *path)
        if max_len is not None and len(value) > max_len:
            raise invalid(f"must hold at most {max_len} items", *path)
        out = [item(v, [*path, i]) for i, v in enumerate(value)]
        if unique and len({repr(v) for v in out}) != len(out):
            raise invalid("items must be unique", *path)
        return out

    return check


# The instants a time may name: those ISO 8601 can write back in UTC (years 0001-9999).
_FIRST = datetime(1, 1, 1, tzinfo=timezone.utc)
_LAST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)
# The whole numbers SQLite and orjson both hold (a JSON body's larger ones arrive as floats).
INT64 = (-(2**63), 2**63 - 1)


def timestamp(value: Any, path: Path) -> str:
    """An ISO 8601 date or date-time string whose UTC instant falls within years 1-9999."""
    text = string(1, 64)(value, path)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise invalid("must be an ISO 8601 date or date-time", *path) from None
    aware = when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
    # Comparing aware times never overflows; converting one past year 9999 (or before 1) in UTC would.
    if not _FIRST <= aware <= _LAST:
        raise invalid("must fall within years 1-9999 in UTC", *path)
    return str(text)


def metadata_value(value: Any, path: Path) -> Any:
    """A metadata value: string, finite number, boolean or array of strings."""
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, int) and INT64[0] <= value <= INT64[1] or isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise invalid("a metadata value must be a string, number (whole ones within 64 bits), boolean or array of "
                  "strings", *path)


def metadata_map(value: Any, path: Path) -> dict[str, Any]:
    """A map of metadata keys to metadata values."""
    if not isinstance(value, dict):
        raise invalid(f"expected an object, got {_type_name(value)}", *path)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not 1 <= len(key) <= 128 or not re.fullmatch(r"[a-zA-Z0-9_.-]+", key):
            raise invalid("metadata keys are 1-128 characters of a-z, A-Z, 0-9, _, . and -", *path, key)
        out[key] = metadata_value(item, [*path, key])
    return out


@dataclass(frozen=True)
class Obj:
    """A closed object: the listed fields only, the required ones present; null means absent
    except for the fields in `clears` (there null is kept, meaning "clear")."""

    fields: Mapping[str, Check]
    required: frozenset[str] = frozenset()
    clears: frozenset[str] = frozenset()
    non_empty: bool = False
    hints: Mapping[str, str] = field(default_factory=dict)

    def __call__(self, value: Any, path: Path) -> dict[str, Any]:
        """Check an object and return its present fields."""
        if not isinstance(value, dict):
            raise invalid(f"expected an object, got {_type_name(value)}", *path)
        issues: list[tuple[str, Path]] = []
        out: dict[str, Any] = {}
        for key, item in value.items():
            check = self.fields.get(key)
            if check is None:
                hint = self.hints.get(key)
                issues.append((f"unknown key {key!r}" + (f": {hint}" if hint else ""), [*path, key]))
                continue
            if item is None:
                if key in self.clears:
                    out[key] = None
                continue
            try:
                out[key] = check(item, [*path, key])
            except Invalid as exc:
                issues.extend(exc.issues)
        for key in sorted(self.required - out.keys()):
            if not any(p[: len(path) + 1] == [*path, key] for _, p in issues):
                issues.append(("is required", [*path, key]))
        if issues:
            raise Invalid(issues)
        if self.non_empty and not out:
            raise invalid("must set at least one field", *path)
        return out


def parse_query(params: Sequence[tuple[str, str]], allowed: Mapping[str, Check],
                repeatable: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Check a query string: only the allowed names, each once unless repeatable (comma lists too)."""
    out: dict[str, Any] = {}
    seen: dict[str, list[str]] = {}
    for name, value in params:
        if name not in allowed:
            raise invalid(f"unknown query parameter {name!r}", "query", name)
        seen.setdefault(name, []).append(value)
    for name, values in seen.items():
        if name in repeatable:
            items = [part.strip() for v in values for part in v.split(",") if part.strip()]
            out[name] = allowed[name](items, ["query", name])
        elif len(values) > 1:
            raise invalid("given more than once", "query", name)
        else:
            out[name] = allowed[name](values[0], ["query", name])
    return out


def query_int(lo: int, hi: int) -> Check:
    """An integer sent as query text."""

    def check(value: Any, path: Path) -> int:
        if not isinstance(value, str) or not re.fullmatch(r"[0-9]{1,9}", value):
            raise invalid("expected an integer", *path)
        return int(integer(lo, hi)(int(value), path))

    return check
