"""Per-ordinal metadata columns that make filters exact and ties deterministic."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from engram_index.engine.types import Document, Filters, Placed

# Filter masks kept until the next change: faces send the same few filters with every search (v5
# its superseded/forgotten tags, Kindgi a tenant's visibility groups), and each mask is as large as
# the collection. 32 masks of a 1M-ordinal space are 32 MB.
MASKS_KEPT = 32


class Columns:
    """Liveness, author, creation time, source, id and tags of every ordinal of one space."""

    def __init__(self) -> None:
        """Start empty; arrays grow by doubling."""
        self.size = 0
        self.live = np.zeros(0, bool)
        self.created = np.zeros(0, np.int64)
        self.author = np.zeros(0, np.int32)
        # Each ordinal's source as a code (0: none): whether two memories are of one conversation
        # is then a comparison of two integers, without reading either document.
        self.source = np.zeros(0, np.int32)
        # Each ordinal's first tag as a code (0: no tag): whether two documents lead with one tag (a v5
        # face's chunks, of one document) is a comparison of two integers, without their tags or ids.
        self.first_tag = np.zeros(0, np.int32)
        self._first_tag_codes: dict[str, int] = {}
        self.ids: list[str | None] = []
        self._by_id: dict[str, int] = {}
        self._author_codes: dict[str, int] = {}
        self._author_names: list[str] = []  # each code's author (`authors`)
        self._source_codes: dict[str, int] = {}
        self._tags: dict[str, set[int]] = {}
        self._tag_cache: dict[str, np.ndarray] = {}
        self._doc_tags: dict[int, tuple[str, ...]] = {}
        self._masks: OrderedDict[Filters, np.ndarray] = OrderedDict()
        self._masks_lock = threading.Lock()
        self.count = 0
        self.sourced = 0  # live documents with a source

    def _grow(self, size: int) -> None:
        """Make room for ordinals below `size`."""
        if size <= self.live.size:
            return
        cap = max(size, 2 * self.live.size, 1024)
        for name in ("live", "created", "author", "source", "first_tag"):
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[: old.size] = old
            setattr(self, name, new)
        self.ids.extend([None] * (cap - len(self.ids)))

    def put(self, ord_: int, doc: Document | Placed) -> None:
        """Record (or replace) the document at this ordinal."""
        self._grow(ord_ + 1)
        self._masks.clear()
        self.size = max(self.size, ord_ + 1)
        if self.live[ord_]:
            self._untag(ord_)
        else:
            self.count += 1
        self.live[ord_] = True
        self.created[ord_] = doc.created_ms
        self.author[ord_] = self._author_code(doc.author)
        self.sourced -= bool(self.source[ord_])  # (0 unless it replaces a live document with a source)
        self.source[ord_] = self._source_code(doc.source)
        self.sourced += bool(self.source[ord_])
        old_id = self.ids[ord_]
        if old_id is not None and old_id != doc.id:
            self._by_id.pop(old_id, None)
        self.ids[ord_] = doc.id
        self._by_id[doc.id] = ord_
        self.first_tag[ord_] = self._tag(ord_, doc.tags)

    def put_many(self, ords: Sequence[int], docs: Sequence[Document | Placed]) -> None:
        """`put` of each document at its ordinal, in order: in bulk when the ordinals are distinct and none
        is live (a load's, a fresh write's), where a put each was a sixth of a collection's load."""
        if not ords:
            return
        self._grow(max(ords) + 1)
        where = np.fromiter(ords, np.int64, len(ords))
        if len(set(ords)) < len(ords) or self.live[where].any():
            for ord_, doc in zip(ords, docs):
                self.put(ord_, doc)
            return
        # Not live: no tags, source or id to take back (remove cleared them), nothing to untag.
        self._masks.clear()
        self.size = max(self.size, int(where.max()) + 1)
        self.count += len(ords)
        self.live[where] = True
        self.created[where] = [doc.created_ms for doc in docs]
        # Codes are handed out in the documents' order, as one put after another would.
        self.author[where] = [self._author_code(doc.author) for doc in docs]
        sources = [self._source_code(doc.source) for doc in docs]
        self.source[where] = sources
        self.sourced += len(sources) - sources.count(0)
        ids, by_id = self.ids, self._by_id
        for ord_, doc in zip(ords, docs):
            ids[ord_] = doc.id
            by_id[doc.id] = ord_
        self.first_tag[where] = [self._tag(ord_, doc.tags) for ord_, doc in zip(ords, docs)]

    def _author_code(self, author: str) -> int:
        """The author column's code for this author (a new one the first time)."""
        code = self._author_codes.get(author)
        if code is None:
            code = self._author_codes[author] = len(self._author_names)
            self._author_names.append(author)
        return code

    def _source_code(self, source: str | None) -> int:
        """The source column's code for this source (0: none; a new one the first time)."""
        return self._source_codes.setdefault(source, len(self._source_codes) + 1) if source else 0

    def _tag(self, ord_: int, tags: Sequence[str]) -> int:
        """Record an ordinal's tags (deduplicated, in order) in their postings; its first tag's code (0: none)."""
        kept = self._doc_tags[ord_] = tuple(dict.fromkeys(tags))
        for tag in kept:
            self._tags.setdefault(tag, set()).add(ord_)
            self._tag_cache.pop(tag, None)
        return self._first_tag_codes.setdefault(kept[0], len(self._first_tag_codes) + 1) if kept else 0

    def remove(self, ord_: int) -> None:
        """Forget the document at this ordinal."""
        if ord_ < self.size and self.live[ord_]:
            self._masks.clear()
            self._untag(ord_)
            self.live[ord_] = False
            self.sourced -= bool(self.source[ord_])
            self.source[ord_] = 0
            self.first_tag[ord_] = 0
            old_id = self.ids[ord_]
            if old_id is not None and self._by_id.get(old_id) == ord_:
                del self._by_id[old_id]
            self.ids[ord_] = None
            self.count -= 1

    def tags_of(self, ord_: int) -> tuple[str, ...]:
        """The tags of the live document at this ordinal (deduplicated, in order; () when none)."""
        return self._doc_tags.get(ord_, ())

    def alive(self, ords: np.ndarray) -> np.ndarray:
        """Which of these ordinals are live (one outside the columns, or negative, is not)."""
        live = self.live
        ok: np.ndarray = (ords >= 0) & (ords < live.size)
        ok[ok] = live[ords[ok]]
        return ok

    def tags_many(self, ords: Sequence[int]) -> list[tuple[str, ...]]:
        """`tags_of` of each of these ordinals, in order."""
        tags = self._doc_tags
        return [tags.get(o, ()) for o in ords]

    def author_code(self, author: str) -> int | None:
        """The code `author` holds in the `author` column, None when no ordinal ever had it."""
        return self._author_codes.get(author)

    def authors(self, ords: np.ndarray) -> list[str]:
        """The author of each (live) ordinal."""
        names = self._author_names
        return [names[c] for c in self.author[ords].tolist()]

    def same_source(self, earlier: np.ndarray, later: np.ndarray) -> np.ndarray:
        """Whether each pair of (live) ordinals names one source, as `Document.source` equality of
        two non-empty sources would say."""
        codes = self.source[earlier]
        out: np.ndarray = (codes != 0) & (codes == self.source[later])
        return out

    def documents(self, ords: Sequence[int]) -> dict[int, Document]:
        """The live ones of these ordinals as documents of the columns alone: id, tags (as `tags_of`)
        and creation time; no text, source, metadata or vector (a search without the store's reads)."""
        wanted = np.asarray(ords, np.int64)
        wanted = wanted[(wanted >= 0) & (wanted < self.size)]
        wanted = wanted[self.live[wanted]]  # liveness and times in one step each, not per ordinal
        ids, tags = self.ids, self._doc_tags
        out: dict[int, Document] = {}
        for o, created in zip(wanted.tolist(), self.created[wanted].tolist()):
            doc_id = ids[o]
            if doc_id is not None:
                out[o] = Document(doc_id, "", "", tags=tags.get(o, ()), created_ms=created)
        return out

    def _untag(self, ord_: int) -> None:
        """Drop an ordinal from its tags' postings."""
        for tag in self._doc_tags.pop(ord_, ()):
            members = self._tags.get(tag)
            if members is not None:
                members.discard(ord_)
                if not members:
                    del self._tags[tag]
            self._tag_cache.pop(tag, None)

    def _tag_ords(self, tag: str) -> np.ndarray:
        """The ordinals carrying a tag, as a cached array."""
        cached = self._tag_cache.get(tag)
        if cached is None:
            cached = np.fromiter(self._tags.get(tag, ()), np.int64)
            self._tag_cache[tag] = cached
        return cached

    def id_ords(self, ids: frozenset[str]) -> np.ndarray:
        """The live ordinals of the given document ids (unknown ids are left out), ascending."""
        by_id = self._by_id
        return np.array(sorted(by_id[i] for i in ids if i in by_id), np.int64)

    def ids_to_ords(self, ids: Sequence[str]) -> np.ndarray:
        """The live ordinal of each id, in order (-1 for an unknown id)."""
        by_id = self._by_id
        return np.array([by_id.get(i, -1) for i in ids], np.int64)

    def _posting_mask(self, tag: str, n: int) -> np.ndarray:
        """A bool mask over [0, n) of the ordinals carrying a tag."""
        mask = np.zeros(n, bool)
        mask[self._tag_ords(tag)] = True
        return mask

    def mask(self, filters: Filters) -> np.ndarray | None:
        """The live ordinals that pass the filters (None when there are no filters), read-only:
        the same mask serves every search with these filters until the next change."""
        if filters.is_empty():
            return None
        masks = self._masks
        with self._masks_lock:  # readers search at once (the index's shared lock)
            held = masks.get(filters)
            if held is not None:
                masks.move_to_end(filters)
                return held
        mask = self._compute_mask(filters)
        mask.flags.writeable = False
        with self._masks_lock:
            masks[filters] = mask
            while len(masks) > MASKS_KEPT:
                masks.popitem(last=False)
        return mask

    def _compute_mask(self, filters: Filters) -> np.ndarray:
        """The mask of non-empty filters, computed over every ordinal."""
        n = self.size
        if filters.tags:
            # Start from the rarest tag: intersecting small sets first keeps this cheap.
            postings = sorted((self._tag_ords(t) for t in filters.tags), key=len)
            mask = np.zeros(n, bool)
            mask[postings[0]] = True
            for other in postings[1:]:
                keep = np.zeros(n, bool)
                keep[other] = True
                mask &= keep
            mask &= self.live[:n]
        else:
            mask = self.live[:n].copy()
        for group in filters.any_tags:
            keep = np.zeros(n, bool)
            for tag in group:
                keep[self._tag_ords(tag)] = True
            mask &= keep
        for tag in filters.none_tags:
            mask &= ~self._posting_mask(tag, n)
        if filters.ids is not None:
            keep = np.zeros(n, bool)
            keep[self.id_ords(filters.ids)] = True
            mask &= keep
        if filters.author is not None:
            code = self._author_codes.get(filters.author)
            if code is None:
                return np.zeros(n, bool)
            mask &= self.author[:n] == code
        if filters.since_ms is not None:
            mask &= self.created[:n] >= filters.since_ms
        if filters.until_ms is not None:
            mask &= self.created[:n] < filters.until_ms
        return mask

