"""Import garden.engram.memory records from a JSONL file into a space."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from engram_index.embed.base import Embedder, document_text
from engram_index.errors import BadRecord
from engram_index.engram.records import f16le, parse_datetime_ms, parse_memory, parse_space_uri, tid_from
from engram_index.collections import Collections
from engram_index.store.base import StoredDocument

BATCH = 1000  # lines read, embedded and written together


@dataclass(frozen=True)
class Committed:
    """An acknowledgement: every valid record of lines 1..`through` is committed (durable)."""

    through: int
    written: int
    unchanged: int
    skipped: int

    @property
    def durable(self) -> int:
        """How many records of the file the store now holds."""
        return self.written + self.unchanged

    def line(self) -> str:
        """The acknowledgement as one line of text."""
        return (f"committed lines 1-{self.through}: {self.durable} records durable"
                f" ({self.written} written, {self.unchanged} unchanged), {self.skipped} skipped")


@dataclass
class ImportReport:
    """What an import did, line by line."""

    lines: int = 0
    written: int = 0
    unchanged: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)
    vectors_skipped: Counter[str] = field(default_factory=Counter)
    embedded: int = 0


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
    spaces: Collections,
    space_uri: str,
    path: Path,
    progress: Callable[[int], None] | None = None,
    embedder: Embedder | None = None,
    on_commit: Callable[[Committed], None] | None = None,
    batch_lines: int = BATCH,
) -> ImportReport:
    """Read one record per line, report bad lines by number, and write the rest in batches.

    `on_commit` hears of each batch once SQLite committed it: what it was told survives a kill.
    With an embedder (whose model must be the space's), records without an `embedding` get one,
    computed from the space's document prefix, the text and the tags, as an author would.
    """
    space = parse_space_uri(space_uri)
    info = spaces.info(space_uri)
    if embedder is not None and embedder.identity != info.model:
        raise BadRecord(f"the embedder's model {embedder.identity} is not the space's model {info.model}")
    report = ImportReport()
    used: set[str] = set()
    with open(path, "rb") as fh:
        while True:
            lines = list(islice(fh, batch_lines))
            if not lines:
                break
            pending = _read_lines(lines, report, space.authority, used, progress)
            if embedder is not None:
                _embed_missing(pending, report, embedder, info.document_prefix)
            batch: list[StoredDocument] = []
            for number, record, author, rkey in pending:
                try:
                    parsed = parse_memory(
                        record, space=space, author=author, rkey=rkey, model=info.model,
                        now_ms=int(time.time() * 1000),
                    )
                except BadRecord as exc:
                    report.errors.append((number, exc.message))
                    continue
                if parsed.skip_reason:
                    report.vectors_skipped[parsed.skip_reason] += 1
                batch.append(StoredDocument(parsed.document, parsed.skip_reason))
            if batch:
                result = spaces.write(space_uri, batch)
                report.written += len(result.changes)
                report.unchanged += result.unchanged
            if on_commit is not None:
                on_commit(Committed(report.lines, report.written, report.unchanged, len(report.errors)))
    report.errors.sort()
    return report


Pending = list[tuple[int, dict[str, Any], str, str]]


def _read_lines(
    lines: list[bytes],
    report: ImportReport,
    authority: str,
    used: set[str],
    progress: Callable[[int], None] | None,
) -> Pending:
    """Parse a chunk of lines into (line number, record, author, rkey), reporting bad ones."""
    out: Pending = []
    for raw in lines:
        report.lines += 1
        number = report.lines
        if progress is not None:
            progress(len(raw))
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise BadRecord("a line must hold one JSON object")
            author = record.pop("author", authority)
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
        except (ValueError, BadRecord) as exc:
            message = exc.message if isinstance(exc, BadRecord) else f"invalid JSON: {exc}"
            report.errors.append((number, message))
            continue
        out.append((number, record, author, rkey))
    return out


def _embed_missing(pending: Pending, report: ImportReport, embedder: Embedder, prefix: str) -> None:
    """Give every record without an embedding one from the embedder (in one batched call)."""
    missing = [
        i for i, (_, record, _, _) in enumerate(pending)
        if "embedding" not in record and isinstance(record.get("text"), str)
    ]
    if not missing:
        return
    texts = []
    for i in missing:
        record = pending[i][1]
        tags = record.get("tags") if isinstance(record.get("tags"), list) else None
        texts.append(document_text(prefix, record["text"], [str(t) for t in tags] if tags else None))
    vectors = embedder.embed_documents(texts)
    ident = embedder.identity
    for i, vector in zip(missing, vectors):
        pending[i][1]["embedding"] = {
            "model": ident.model,
            "modelDigest": ident.digest,
            "dims": ident.dims,
            "encoding": "f16le",
            "vector": {"$bytes": base64.b64encode(f16le(vector)).rstrip(b"=").decode()},
        }
    report.embedded += len(missing)
