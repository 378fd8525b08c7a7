"""Import garden.engram.memory records from a JSONL file into a space."""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import BadRecord
from .records import parse_datetime_ms, parse_memory, parse_space_uri, tid_from
from .spaces import Spaces
from .store.sqlite import StoredDocument

BATCH = 1000


@dataclass
class ImportReport:
    """What an import did, line by line."""

    lines: int = 0
    written: int = 0
    unchanged: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)
    vectors_skipped: Counter[str] = field(default_factory=Counter)


def default_rkey(record: dict[str, Any], used: set[str]) -> str:
    """A deterministic TID for a record without an rkey: its creation time and a content hash."""
    micros = parse_datetime_ms(record.get("createdAt")) * 1000
    digest = hashlib.sha256(json.dumps(record, sort_keys=True, ensure_ascii=False).encode())
    clock = int.from_bytes(digest.digest()[:2], "big") & 0x3FF
    rkey = tid_from(micros, clock)
    while rkey in used:
        # Two records of one file with the same time and hash bucket: the next clock id is free.
        clock = (clock + 1) & 0x3FF
        micros += 0 if clock else 1
        rkey = tid_from(micros, clock)
    return rkey


def import_jsonl(
    spaces: Spaces,
    space_uri: str,
    path: Path,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Read one record per line, report bad lines by number, and write the rest in batches."""
    space = parse_space_uri(space_uri)
    info = spaces.info(space_uri)
    report = ImportReport()
    batch: list[StoredDocument] = []
    used: set[str] = set()

    def flush() -> None:
        if batch:
            result = spaces.write(space_uri, batch)
            report.written += len(result.changes)
            report.unchanged += result.unchanged
            batch.clear()

    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            report.lines = number
            if progress is not None:
                progress(len(raw))
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
                if not isinstance(record, dict):
                    raise BadRecord("a line must hold one JSON object")
                author = record.pop("author", space.authority)
                rkey = record.pop("rkey", None)
                if rkey is None:
                    rkey = default_rkey(record, used)
                if not isinstance(author, str) or not isinstance(rkey, str):
                    raise BadRecord("author and rkey must be strings")
                key = f"{author}/{rkey}"
                if key in used:
                    raise BadRecord(f"duplicate record {key} in this file")
                used.add(key)
                used.add(rkey)
                parsed = parse_memory(
                    record,
                    space=space,
                    author=author,
                    rkey=rkey,
                    model=info.model,
                    now_ms=int(time.time() * 1000),
                )
            except (ValueError, BadRecord) as exc:
                message = exc.message if isinstance(exc, BadRecord) else f"invalid JSON: {exc}"
                report.errors.append((number, message))
                continue
            if parsed.skip_reason:
                report.vectors_skipped[parsed.skip_reason] += 1
            batch.append(StoredDocument(parsed.document, parsed.skip_reason))
            if len(batch) >= BATCH:
                flush()
    flush()
    return report
