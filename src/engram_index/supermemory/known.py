"""What the v5 face knows of each namespace's documents: their filterable metadata and what filters compile
to, kept while the version of the documents stands, and brought up to date from the documents writes name.

A version tells what is kept from what is stale. In a process that makes every write of its store it is
how often this process wrote the namespace's documents. Elsewhere (a `--workers` reader, a node over a
shared PostgreSQL store) it is the store's: when it made the namespace and how often its documents
changed since (`sm_namespaces.docs_changed`), each change logging the documents it named
(`sm_doc_changes`).

A write that names its documents has the metadata of those alone read again. What a filter compiled to
before it is left behind with the documents named since (`_carry`), and the filter's next use tests
those alone again (`compiled_filter`'s `patch`). In a process that does not make every write, both
happen when it next reads and finds the version moved: the log names the documents changed since.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from engram_index.store.base import RecordStore
from engram_index.store.rows import loads_stored

FILTERS_KEPT = 64  # compiled filters kept per namespace while the version of its documents stands
BEHIND_MAX = 4096  # documents named since a stale filter was compiled, past which it is compiled afresh
# A version of a namespace's documents: what is kept of them is good while it stands.
Version = tuple[int, int]
# A namespace's document rows (id, metadata, grp) with these ids.
Rows = Callable[[str, Sequence[str]], list[tuple[Any, ...]]]
# Changes over a layered map's base past which they are folded into a new one: at least this many, and at
# least a sixteenth of the base (so a change costs a share of the base's size, at most, spread over many).
FOLD_MIN = 64
FOLD_SHARE = 16


class Layered(Mapping[str, dict[str, Any]]):
    """Every document's metadata as a base map, never changed once shared, and the changes over it: a write
    of a few documents makes a new map of the same base, where a copy of it cost a pass over every document
    (readers iterate the map they were given, so no map handed out ever changes)."""

    __slots__ = ("_base", "_over", "_gone", "_len")

    def __init__(self, base: dict[str, dict[str, Any]], over: dict[str, dict[str, Any]] | None = None,
                 gone: frozenset[str] = frozenset()) -> None:
        """Hold `base` with the documents `over` adds or replaces and those `gone` removes (none of them in
        `over`)."""
        self._base, self._over, self._gone = base, over or {}, gone
        self._len = (len(base) - sum(1 for d in gone if d in base)
                     + sum(1 for d in self._over if d not in base or d in gone))

    def changed(self, named: Collection[str], read: dict[str, dict[str, Any]]) -> Layered:
        """A new map with the `named` documents as `read` now has them (gone when it lacks one)."""
        over = {d: md for d, md in self._over.items() if d not in named}
        over.update(read)
        gone = (self._gone | {d for d in named if d not in read}) - read.keys()
        if len(over) + len(gone) > max(FOLD_MIN, len(self._base) // FOLD_SHARE):
            return Layered(dict(_merged(self._base, over, gone)))
        return Layered(self._base, over, frozenset(gone))

    def shares(self, base: dict[str, dict[str, Any]]) -> bool:
        """Whether this map is built over that base (the changes since it not folded in yet)."""
        return self._base is base

    def __getitem__(self, doc_id: str) -> dict[str, Any]:
        """A document's metadata."""
        found = self._over.get(doc_id)
        if found is not None:
            return found
        if doc_id in self._gone:
            raise KeyError(doc_id)
        return self._base[doc_id]

    def __contains__(self, doc_id: object) -> bool:
        """Whether the document is there."""
        return doc_id in self._over or (doc_id not in self._gone and doc_id in self._base)

    def __iter__(self) -> Iterator[str]:
        """Every document id."""
        return (d for d, _ in self.items())

    def __len__(self) -> int:
        """How many documents."""
        return self._len

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:  # type: ignore[override]
        """Every (document id, metadata), the base's in one pass with the changes over it."""
        return _merged(self._base, self._over, self._gone)


def _merged(base: dict[str, dict[str, Any]], over: dict[str, dict[str, Any]],
            gone: Collection[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The items of `base` less those `over` replaces or `gone` removes, then those of `over`."""
    if not over and not gone:
        return iter(base.items())
    return itertools.chain(((d, md) for d, md in base.items() if d not in over and d not in gone), over.items())


Metadata = Layered


class Known:
    """Every namespace's documents' filterable metadata and compiled filters, each at its version."""

    def __init__(self, store: RecordStore, sole_writer: bool, rows: Rows) -> None:
        """Keep nothing yet; `sole_writer`: whether this process makes every write of `store`."""
        self.store, self.sole_writer, self._rows = store, sole_writer, rows
        self._lock = threading.Lock()
        self._writes: dict[str, int] = {}  # this process's writes of each namespace's documents
        self._meta: dict[str, tuple[Version, Metadata]] = {}
        self._filters: dict[str, tuple[Version, dict[str, Any]]] = {}
        # Per namespace, the version up to which they hold: compiled filters a write made stale, each with the
        # documents named since it was compiled.
        self._behind: dict[str, tuple[Version, dict[str, tuple[Any, frozenset[str]]]]] = {}

    def writes(self, ns: str) -> int:
        """How often this process wrote the namespace's documents."""
        return self._writes.get(ns, 0)

    def version(self, ns: str) -> Version | None:
        """The version of a namespace's documents (None: the store has no such namespace); over a store
        others write, its creation time tells a namespace made again after a delete from the one before."""
        if self.sole_writer:
            return 0, self.writes(ns)
        rows = self.store.query("SELECT created_ms, docs_changed FROM sm_namespaces WHERE name=?", (ns,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def changed(self, ns: str, documents: Sequence[str] | None) -> None:
        """After this process's write of a namespace's documents: in a process that makes every write, the
        version moves on, the metadata of the named `documents` is read again and the compiled filters are
        left behind with them (all dropped when the write names none)."""
        if not self.sole_writer:
            return  # the version is the store's: `metadata` catches up when it next reads
        with self._lock:
            before = 0, self.writes(ns)
            dropped = self._filters.pop(ns, None)
            kept = self._meta.pop(ns, None)
            self._writes[ns] = before[1] + 1
            after = 0, self._writes[ns]
            named = None if documents is None else frozenset(documents)
            self._carry(ns, dropped, before, after, named)
            if kept is not None and kept[0] == before and documents is not None:
                # Read under the lock: two writes of one document leave the later one's row here.
                self._meta[ns] = (after, self._reread(ns, kept[1], documents))

    def forget(self, ns: str) -> None:
        """Keep nothing of a dropped namespace."""
        with self._lock:
            self._meta.pop(ns, None)
            self._filters.pop(ns, None)
            self._behind.pop(ns, None)

    def _carry(self, ns: str, dropped: tuple[Version, dict[str, Any]] | None, since: Version, until: Version,
               named: frozenset[str] | None) -> None:
        """Leave behind, as of `until`, the filters compiled as of `since` (`dropped`) and those behind as of
        it, with the documents `named` between the two (None: unknown, and nothing is left). Under the lock."""
        held, entries = self._behind.get(ns, (None, {}))
        if named is None:
            self._behind.pop(ns, None)
            return
        carried = {key: (value, more | named) for key, (value, more) in entries.items()
                   if held == since and len(more) < BEHIND_MAX}
        if dropped is not None and dropped[0] == since:
            carried.update((key, (value, named)) for key, value in dropped[1].items())
        if carried:
            self._behind[ns] = (until, dict(list(carried.items())[-FILTERS_KEPT:]))
        else:
            self._behind.pop(ns, None)

    def compiled_filter(self, ns: str, key: str, compile_: Callable[[Metadata], Any],
                        patch: Callable[[Metadata, Any, frozenset[str]], Any] | None = None) -> Any:
        """What a filter (by its canonical text `key`) compiles to over the namespace's documents, computed
        once while the version of its documents stands (at most FILTERS_KEPT filters kept): `compile_` over
        their metadata, or `patch(metadata, held, named)` bringing what it compiled to before writes up to
        date with the documents they named (None: compile it afresh)."""
        version = self.version(ns)
        seen, compiled = self._filters.get(ns, (None, {}))
        if version is not None and seen == version and key in compiled:
            return compiled[key]
        # Read once for both (caught up first: a process that does not make every write carries filters there).
        metadata = self.metadata(ns)
        fresh = None
        if patch is not None and version is not None:
            held, entries = self._behind.get(ns, (None, {}))
            behind = entries.get(key) if held == version else None
            fresh = patch(metadata, *behind) if behind is not None else None
        if fresh is None:
            fresh = compile_(metadata)
        if version is not None:  # (kept at the version read before it: a change meanwhile makes it stale)
            with self._lock:
                seen, compiled = self._filters.get(ns, (None, {}))
                kept = compiled if seen == version and len(compiled) < FILTERS_KEPT else {}
                self._filters[ns] = (version, {**kept, key: fresh})
        return fresh

    def metadata(self, ns: str) -> Metadata:
        """Every document's filterable metadata in a namespace, by document id (read once while the version
        of its documents stands)."""
        version = self.version(ns)
        seen, held = self._meta.get(ns, (None, None))
        if held is not None and version is not None and seen == version:
            return held
        fresh: Metadata | None = None
        named: frozenset[str] | None = None
        if (held is not None and version is not None and seen is not None and not self.sole_writer
                and seen[0] == version[0] and seen[1] < version[1]):
            caught = self._caught_up(ns, held, seen[1], version[1])
            if caught is not None:
                fresh, named = caught
        if fresh is None:
            fresh = Layered(dict(filterable(row) for row in self.store.query(
                "SELECT id, metadata, grp FROM sm_documents WHERE ns=?", (ns,))))
        if version is not None:  # (kept at the version read before it: a change meanwhile makes it stale)
            with self._lock:
                self._meta[ns] = (version, fresh)
                if not self.sole_writer and seen is not None:
                    self._carry(ns, self._filters.get(ns), seen, version, named)
        return fresh

    def _caught_up(self, ns: str, held: Metadata, since: int, until: int) -> tuple[Metadata, frozenset[str]] | None:
        """`held` (what filters knew at change `since`) with the documents the changes after it up to `until`
        named read again, and those documents; None when the log does not name every one of those changes
        (kept no longer, or a change of unnamed documents) or when they named more than a quarter of them (one
        read of all is then cheaper)."""
        logged = self.store.query("SELECT seq, doc_id FROM sm_doc_changes WHERE ns=? AND seq > ? AND seq <= ?",
                                  (ns, since, until))
        if {int(r[0]) for r in logged} != set(range(since + 1, until + 1)):
            return None
        named = list(dict.fromkeys(str(r[1]) for r in logged))
        if len(named) > max(len(held) // 4, 1):
            return None
        return self._reread(ns, held, named), frozenset(named)

    def _reread(self, ns: str, held: Metadata, documents: Sequence[str]) -> Metadata:
        """`held` with the named documents read again (dropped when gone), as a new map over the same base."""
        return held.changed(set(documents), dict(filterable(row) for row in self._rows(ns, documents)))


def filterable(row: tuple[Any, ...]) -> tuple[str, dict[str, Any]]:
    """A document's id and what filters see of it from its (id, metadata, grp) row: its group's keys, then
    its metadata's (metadata wins a clash, as DocRow.filterable)."""
    return row[0], {**loads_stored(row[2]), **loads_stored(row[1])}

