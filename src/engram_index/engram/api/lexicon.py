"""Lexicon-driven checks: query parameters in, responses out, from the JSON files in lexicons/.

One generic validator for every endpoint: types, formats (did, datetime, at-uri, cid),
minimum/maximum, maxLength (UTF-8 bytes for strings, items for arrays), maxGraphemes and
knownValues. A query parameter's knownValues are treated as closed: a value the service does
not know cannot be acted upon, so it is refused rather than ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any
from urllib.parse import unquote

import regex

from engram_index.bounded import Bounded
from engram_index.errors import BadRecord, InvalidInput
from engram_index.engram.records import within_graphemes, is_did, parse_datetime_ms

_AT_URI = regex.compile(r"^at://[^/\s]+(/[^\s]*)?$")
_CID = regex.compile(r"^[a-zA-Z0-9+=/_-]{8,256}$")
_INTEGER = re.compile(r"-?[0-9]{1,19}", re.ASCII)  # 19 digits: every int64, and no huge parse

Def = dict[str, Any]
QUERY_KEY = "engram_index.query"  # where a request's parsed query string is kept in its ASGI scope
MAX_KEPT_VALUES = 4096  # percent-encoded short values kept decoded (a space's URI, a model's name, …)
_KEPT_VALUE_CHARS = 256
_decoded: Bounded[str, str] = Bounded(MAX_KEPT_VALUES)


class QueryString:
    """A query string's parameters: each name's values in order, read as Starlette's QueryParams reads them
    (`parse_qsl(raw.decode("latin-1"), keep_blank_values=True)`), in a fraction of the time."""

    __slots__ = ("_values",)

    def __init__(self, raw: bytes) -> None:
        """Parse `raw` (the query string's bytes)."""
        values: dict[str, list[str]] = {}
        for pair in raw.decode("latin-1").split("&"):
            if pair:
                name, _, value = pair.partition("=")
                values.setdefault(_unquoted(name), []).append(_unquoted(value))
        self._values = values

    def getlist(self, name: str) -> list[str]:
        """Every value of `name`, in order (none: an empty list)."""
        return list(self._values.get(name, ()))

    def get(self, name: str, default: str = "") -> str:
        """The last value of `name`, else `default`."""
        values = self._values.get(name)
        return values[-1] if values else default


def query_string(scope: Any) -> QueryString:
    """A request's parsed query string (parsed once per request, kept in its ASGI scope)."""
    parsed = scope.get(QUERY_KEY)
    if parsed is None:
        parsed = scope[QUERY_KEY] = QueryString(scope.get("query_string", b""))
    return parsed  # type: ignore[no-any-return]


def _unquoted(text: str) -> str:
    """One name or value decoded as parse_qsl decodes it ('+' is a space, %XX escapes are UTF-8)."""
    if "+" in text:
        text = text.replace("+", " ")
    if "%" not in text:
        return text
    if len(text) > _KEPT_VALUE_CHARS:
        return unquote(text)
    decoded = _decoded.get(text)
    if decoded is None:
        decoded = unquote(text)
        _decoded.keep(text, decoded)
    return decoded


class Lexicons:
    """Every lexicon document shipped with the package, by NSID."""

    def __init__(self, docs: Mapping[str, Def]) -> None:
        """Index the documents by id."""
        self.docs = dict(docs)

    @classmethod
    def bundled(cls) -> Lexicons:
        """The lexicons in the package's lexicons/ folder."""
        return _bundled()

    def main(self, nsid: str) -> Def:
        """The main definition of an NSID."""
        main: Def = self.docs[nsid]["defs"]["main"]
        return main

    def resolve(self, ref: str, context: str) -> tuple[Def, str]:
        """A ref (`#name`, `nsid#name` or `nsid`) as (definition, the NSID it lives in)."""
        nsid, _, name = ref.partition("#")
        nsid = nsid or context
        return self.docs[nsid]["defs"][name or "main"], nsid

    # -- parameters -------------------------------------------------------------------------

    def params(self, nsid: str, query: Any) -> dict[str, Any]:
        """Parse and check a query string (a multi-dict with getlist) against the lexicon."""
        spec = self.main(nsid).get("parameters", {"properties": {}})
        out: dict[str, Any] = {}
        for name, prop in spec.get("properties", {}).items():
            values = query.getlist(name)
            if prop["type"] == "array":
                if values:
                    if len(values) > prop.get("maxLength", len(values)):
                        raise InvalidInput(f"at most {prop['maxLength']} {name}")
                    out[name] = [_param_value(f"{name}[]", v, prop["items"]) for v in values]
                continue
            if len(values) > 1:
                raise InvalidInput(f"{name} given more than once")
            if values:
                out[name] = _param_value(name, values[0], prop)
            elif "default" in prop:
                out[name] = prop["default"]
        for name in spec.get("required", []):
            if name not in out:
                raise InvalidInput(f"{name} is required")
        return out

    # -- output -------------------------------------------------------------------------------

    def output_errors(self, nsid: str, body: Any) -> list[str]:
        """Every way a response body breaks the query's output schema (empty when it conforms)."""
        schema = self.main(nsid)["output"]["schema"]
        errors: list[str] = []
        self._check(body, schema, nsid, "$", errors)
        return errors

    def _check(self, value: Any, spec: Def, context: str, path: str, errors: list[str]) -> None:
        """Check one value against one schema node, appending what is wrong."""
        kind = spec.get("type")
        if kind == "ref":
            target, where = self.resolve(spec["ref"], context)
            self._check(value, target, where, path, errors)
        elif kind == "object":
            if not isinstance(value, dict):
                errors.append(f"{path}: not an object")
                return
            for name in spec.get("required", []):
                if name not in value:
                    errors.append(f"{path}.{name}: required")
            for name, sub in spec.get("properties", {}).items():
                if name in value:
                    self._check(value[name], sub, context, f"{path}.{name}", errors)
        elif kind == "array":
            if not isinstance(value, list):
                errors.append(f"{path}: not an array")
                return
            if len(value) > spec.get("maxLength", len(value)):
                errors.append(f"{path}: more than {spec['maxLength']} items")
            for i, item in enumerate(value):
                self._check(item, spec["items"], context, f"{path}[{i}]", errors)
        else:
            try:
                _check_scalar(path, value, spec)
            except InvalidInput as exc:
                errors.append(exc.message)


def _param_value(name: str, raw: str, spec: Def) -> Any:
    """One query-string value converted to the lexicon type and checked."""
    kind = spec["type"]
    value: Any
    if kind == "integer":
        # ASCII digits with an optional '-' only: int() would also take ' 5', '+5', '1_0' and '١٣'.
        if _INTEGER.fullmatch(raw) is None:
            raise InvalidInput(f"{name} must be an integer (ASCII digits, optionally after '-')")
        value = int(raw)
    elif kind == "boolean":
        if raw not in ("true", "false"):
            raise InvalidInput(f"{name} must be true or false")
        value = raw == "true"
    else:
        value = raw
    _check_scalar(name, value, spec)
    return value


def _check_scalar(name: str, value: Any, spec: Def) -> None:
    """Check a string, integer or boolean against its lexicon constraints."""
    kind = spec.get("type")
    if kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidInput(f"{name} must be an integer")
        if "minimum" in spec and value < spec["minimum"]:
            raise InvalidInput(f"{name} must be at least {spec['minimum']}")
        if "maximum" in spec and value > spec["maximum"]:
            raise InvalidInput(f"{name} must be at most {spec['maximum']}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise InvalidInput(f"{name} must be a boolean")
    elif kind == "string":
        if not isinstance(value, str):
            raise InvalidInput(f"{name} must be a string")
        if "maxLength" in spec and len(value.encode("utf-8", "surrogatepass")) > spec["maxLength"]:
            raise InvalidInput(f"{name} is longer than {spec['maxLength']} bytes")
        if "maxGraphemes" in spec and not within_graphemes(value, spec["maxGraphemes"]):
            raise InvalidInput(f"{name} is longer than {spec['maxGraphemes']} graphemes")
        if "knownValues" in spec and value not in spec["knownValues"]:
            raise InvalidInput(f"{name} must be one of {', '.join(spec['knownValues'])}")
        _check_format(name, value, spec.get("format"))


def _check_format(name: str, value: str, fmt: str | None) -> None:
    """Check a string's lexicon format."""
    ok = True
    if fmt == "did":
        ok = is_did(value)
    elif fmt == "datetime":
        try:
            parse_datetime_ms(value, name)
        except BadRecord:
            ok = False
    elif fmt == "at-uri":
        ok = bool(_AT_URI.match(value))
    elif fmt == "cid":
        ok = bool(_CID.match(value))
    if not ok:
        raise InvalidInput(f"{name} is not a valid {fmt}")


@lru_cache(maxsize=1)
def _bundled() -> Lexicons:
    """Load the package's lexicon files once."""
    root = resources.files("engram_index") / "lexicons"
    docs: dict[str, Def] = {}
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        for child in node.iterdir():
            if child.is_dir():
                stack.append(child)
            elif child.name.endswith(".json"):
                doc = json.loads(child.read_text(encoding="utf-8"))
                docs[doc["id"]] = doc
    return Lexicons(docs)


def nsids(lexicons: Lexicons, kind: str) -> Sequence[str]:
    """The NSIDs whose main definition is of this kind (query, record, …)."""
    return sorted(n for n, d in lexicons.docs.items() if d["defs"].get("main", {}).get("type") == kind)
