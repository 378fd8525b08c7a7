"""SQLite-flavoured SQL turned into PostgreSQL's: placeholders, upserts, blobs and a few functions.

Faces write their SQL once, in SQLite's dialect, as `Statement`s (docs/design/store.md says why one
translation layer rather than SQL written twice). What changes on the way:

- `?` becomes `%s` (and a literal `%` becomes `%%`), outside quoted strings and names;
- `INSERT OR IGNORE` becomes `ON CONFLICT DO NOTHING`; `INSERT OR REPLACE` becomes an upsert on
  the table's primary key (read from the catalog), setting every other column it names;
- a blob literal `x'…'` becomes a `bytea`; in DDL, `INTEGER` is `BIGINT`, `BLOB` is `BYTEA`, and
  `WITHOUT ROWID` goes;
- `instr`, `json`, `json_each` and `json_extract` call SQL functions of the same meaning that the
  PostgreSQL store's first migration creates (`sqlite_instr`, …).

Anything else must already be SQL both databases read alike; the contract suite runs every face
on both stores to hold that.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from engram_index.bounded import Bounded

_FUNCTIONS = re.compile(r"\b(instr|json_each|json_extract|json)\s*\(", re.IGNORECASE)
_INSERT_OR = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+(\w+)\s*(\(([^)]*)\))?", re.IGNORECASE)
_DDL = re.compile(r"^\s*(CREATE\s+TABLE|ALTER\s+TABLE)\b", re.IGNORECASE)
_DDL_TYPES = ((re.compile(r"\bINTEGER\b", re.IGNORECASE), "BIGINT"),
              (re.compile(r"\bBLOB\b", re.IGNORECASE), "BYTEA"),
              (re.compile(r"\bWITHOUT\s+ROWID\b", re.IGNORECASE), ""))
_CACHE_LIMIT = 4096

# SQL's support functions for what the translation calls (created by the PostgreSQL store's migrations).
SUPPORT_FUNCTIONS = """
CREATE FUNCTION sqlite_instr(a text, b text) RETURNS bigint LANGUAGE sql IMMUTABLE
  AS $$ SELECT strpos(a, b)::bigint $$;
CREATE FUNCTION sqlite_instr(a bytea, b bytea) RETURNS bigint LANGUAGE sql IMMUTABLE
  AS $$ SELECT position(b IN a)::bigint $$;
CREATE FUNCTION sqlite_json(t text) RETURNS text LANGUAGE sql IMMUTABLE
  AS $$ SELECT t::jsonb::text $$;
CREATE FUNCTION sqlite_json_each(t text) RETURNS TABLE(value text) LANGUAGE sql IMMUTABLE
  AS $$ SELECT CASE jsonb_typeof(e) WHEN 'string' THEN e #>> '{}' ELSE e::text END
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(t::jsonb) = 'array' THEN t::jsonb ELSE '[]' END) AS e $$;
CREATE FUNCTION sqlite_json_extract(t text, path text) RETURNS text LANGUAGE sql IMMUTABLE
  AS $$ SELECT CASE jsonb_typeof(v) WHEN 'string' THEN v #>> '{}' ELSE v::text END
        FROM (SELECT jsonb_path_query_first(t::jsonb, path::jsonpath) AS v) AS found $$;
"""


def _split(sql: str) -> list[tuple[bool, str]]:
    """The statement as (is_code, text) pieces: quoted strings and quoted names are not code."""
    pieces: list[tuple[bool, str]] = []
    start = i = 0
    while i < len(sql):
        quote = sql[i]
        if quote in "'\"":
            if i > start:
                pieces.append((True, sql[start:i]))
            end = i + 1
            while True:
                end = sql.find(quote, end)
                if end < 0:
                    end = len(sql)
                    break
                if sql.startswith(quote, end + 1):  # a doubled quote stays inside
                    end += 2
                    continue
                break
            pieces.append((False, sql[i:end + 1]))
            start = i = end + 1
        else:
            i += 1
    if start < len(sql):
        pieces.append((True, sql[start:]))
    return pieces


def _code(text: str) -> str:
    """Placeholders and functions of a code piece."""
    text = text.replace("%", "%%").replace("?", "%s")
    return _FUNCTIONS.sub(lambda m: f"sqlite_{m.group(1).lower()}(", text)


def _pieces(sql: str) -> str:
    """Every piece translated: code as code, blob literals as bytea, strings kept."""
    out: list[str] = []
    for is_code, text in _split(sql):
        if is_code:
            out.append(_code(text))
        elif text.startswith("'") and out and re.search(r"(^|[^\w])[xX]$", out[-1]):
            out[-1] = out[-1][:-1]
            out.append(f"'\\x{text[1:-1]}'::bytea")
        else:
            out.append(text.replace("%", "%%"))
    return "".join(out)


class Dialect:
    """Translates statements, remembering each one; `primary_key(table)` names a table's key columns."""

    def __init__(self, primary_key: Callable[[str], Sequence[str]]) -> None:
        """Translate upserts with the primary keys that `primary_key` reads."""
        self._primary_key = primary_key
        # Shared by the store's threads (Bounded's steps are dict steps).
        self._cache: Bounded[str, str] = Bounded(_CACHE_LIMIT)

    def sql(self, sql: str) -> str:
        """The PostgreSQL form of a statement."""
        done = self._cache.get(sql)
        if done is None:
            done = self._translate(sql)
            self._cache.keep(sql, done)  # dynamic IN lists make many statements: it starts afresh
        return done

    def _translate(self, sql: str) -> str:
        """Translate one statement (not remembered)."""
        if _DDL.match(sql):
            for pattern, replacement in _DDL_TYPES:
                sql = pattern.sub(replacement, sql)
        conflict = ""
        insert = _INSERT_OR.match(sql)
        if insert is not None:
            kind, table, columns = insert.group(1).upper(), insert.group(2), insert.group(4)
            sql = f"INSERT INTO {table}{insert.group(3) or ''}" + sql[insert.end():]
            conflict = " ON CONFLICT DO NOTHING"
            if kind == "REPLACE":
                keys = list(self._primary_key(table))
                names = [c.strip() for c in (columns or "").split(",") if c.strip()]
                rest = [c for c in names if c not in keys]
                updates = ", ".join(f"{c}=EXCLUDED.{c}" for c in rest)
                conflict = f" ON CONFLICT ({', '.join(keys)}) " + (f"DO UPDATE SET {updates}" if rest else "DO NOTHING")
        return _pieces(sql).rstrip().rstrip(";") + conflict


def parameters(params: Sequence[Any]) -> Sequence[Any]:
    """Parameters as PostgreSQL takes them: booleans as the integers SQLite stores."""
    if any(type(p) is bool for p in params):
        return tuple(int(p) if type(p) is bool else p for p in params)
    return params
