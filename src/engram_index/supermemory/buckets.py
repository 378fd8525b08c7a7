"""Profile buckets: the namespace's own taxonomy, and which memories fall in each bucket.

Without an LLM, a memory falls in a bucket when one of its words meets a word of the bucket: the same
word, or words of at least PREFIX letters one of which begins the other (a bucket `diet` described as
"food, meals, allergies" collects "I am allergic to peanuts": the stems allerg- and allergi- meet). A
bucket's words are the content words of its name and description, hyphens and underscores parting
them, each as its stem (or its exact form where there is none). A memory's words are its terms as the
keyword index holds them (every word's exact form and stem, an identifier's parts and theirs), less
stopwords unless it holds nothing else.

A bucket's members are found through the memories' keyword index, never by reading every memory: the
index terms that meet one of its words (the same term or a prefix of it, as a stem or not, and the
terms that begin with it) are looked up in the postings (engine/holders.py). A memory holding such a
term holds it in its text, as one of its words: record tags are hidden hashes. So it is a member,
unless the term is a stopword or could be a hidden tag's, whose holders are judged by their text.
What a profile reads grows with the members, not with the namespace. A node over a shared store
finds a memory in a bucket once its index has caught up with the write, as its searches do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from engram_index.engine.analyzer import STEM_PREFIX, STOPWORDS, index_terms, query_words
from engram_index.engine.holders import holders, terms_beginning
from engram_index.engine.keyword import searchable_words
from engram_index.engine.types import Filters
from engram_index.errors import UnknownSpace
from engram_index.supermemory.face import EXPIRED, FORGOTTEN, HIDDEN_TAG_PREFIX, SUPERSEDED, Face
from engram_index.supermemory.tables import MemoryRow, memories_collection

PREFIX = 5


def bucket_words(name: str, description: str) -> frozenset[str]:
    """A bucket's words: its name's and description's content words, as stems (or exact forms where
    there is no stem)."""
    text = f"{name} {description}".replace("-", " ").replace("_", " ")
    return frozenset((word.stem or word.exact).removeprefix(STEM_PREFIX)
                     for word in searchable_words(query_words(text)))


def memory_words(text: str) -> frozenset[str]:
    """A memory's words: its text's index terms without the stems' mark, less stopwords unless it holds
    nothing else."""
    terms = frozenset(term.removeprefix(STEM_PREFIX) for term in index_terms(text))
    return terms - STOPWORDS or terms


def meets(mine: frozenset[str], wanted: frozenset[str]) -> bool:
    """Whether two sets of words share one (see the module doc)."""
    if mine & wanted:
        return True
    return any(len(a) >= PREFIX and len(b) >= PREFIX and (a.startswith(b) or b.startswith(a))
               for a in mine for b in wanted)


def _meeting(wanted: frozenset[str]) -> tuple[set[str], set[str]]:
    """What to look up in the index for a bucket's words: the terms equal to one or to a prefix of it of
    PREFIX letters or more, and the beginnings of the terms that begin with one of PREFIX letters or
    more (each as a stem and not)."""
    exact: set[str] = set()
    begins: set[str] = set()
    for word in wanted:
        forms = [word] + [word[:n] for n in range(PREFIX, len(word))]
        exact.update(forms + [STEM_PREFIX + form for form in forms])
        if len(word) >= PREFIX:
            begins.update((word, STEM_PREFIX + word))
    return exact, begins


def _judged(term: str) -> bool:
    """Whether a memory holding this index term has its text judged: a stopword may not be one of its
    words, and a term of a hidden tag's form may be its record's tag's."""
    bare = term.removeprefix(STEM_PREFIX)
    return bare in STOPWORDS or bare.startswith(HIDDEN_TAG_PREFIX)


def members(face: Face, ns: str, chosen: Mapping[str, str], selected: Filters, passing: set[str] | None,
            now: int) -> dict[str, list[MemoryRow]]:
    """Each bucket's members (by name): the recallable latest memories of the documents `passing` names
    (None: all; `selected`: the engine's filters for them) whose words meet the bucket's, most recently
    updated first (equal times by id)."""
    if not chosen or (passing is not None and not passing):
        return {name: [] for name in chosen}
    try:
        index = face.collections.index(memories_collection(ns))
    except UnknownSpace:  # no document has formed a memory here yet
        return {name: [] for name in chosen}
    wanted = {name: bucket_words(name, description) for name, description in chosen.items()}
    found: dict[str, tuple[list[str], list[str]]] = {}  # per bucket: its sure members' ids, those to judge
    with index.reading():
        # The passing documents' memories, less the superseded, forgotten and swept (a search's mask).
        mask = index.columns.mask(Filters(any_tags=selected.any_tags, none_tags=(SUPERSEDED, FORGOTTEN, EXPIRED)))
        ids, counts = index.columns.ids, index.keyword.counts
        for name, words in wanted.items():
            exact, begins = _meeting(words)
            terms = [*exact, *terms_beginning(counts, begins)]
            sure = holders(counts, [t for t in terms if not _judged(t)], mask)
            judged = np.setdiff1d(holders(counts, [t for t in terms if _judged(t)], mask), sure)
            found[name] = ([i for i in map(ids.__getitem__, sure.tolist()) if i is not None],
                           [i for i in map(ids.__getitem__, judged.tolist()) if i is not None])
    rows = face.memories(ns, sorted({i for pair in found.values() for held in pair for i in held}))
    out: dict[str, list[MemoryRow]] = {}
    for name, (sure_ids, judged_ids) in found.items():
        held = [rows[i] for i in sure_ids if i in rows]
        held += [m for m in (rows[i] for i in judged_ids if i in rows) if meets(memory_words(m.memory), wanted[name])]
        kept = [m for m in held if m.is_latest and not m.forgotten(now) and (passing is None or m.doc_id in passing)]
        out[name] = sorted(kept, key=lambda m: (-m.updated_ms, m.id))
    return out


def effective_buckets(face: Face, ns: str) -> dict[str, str]:
    """The namespace's buckets and their descriptions (this server has no organization buckets)."""
    return dict(face.store.query("SELECT name, description FROM sm_buckets WHERE ns=? ORDER BY name", (ns,)))


def put_buckets(face: Face, ns: str, buckets: dict[str, str]) -> dict[str, str]:
    """Upsert namespace-owned buckets; returns the effective map."""
    face.writable()
    face.store.execute([("INSERT OR REPLACE INTO sm_buckets(ns, name, description) VALUES (?, ?, ?)", (ns, k, v))
                        for k, v in buckets.items()])
    return effective_buckets(face, ns)


def delete_buckets(face: Face, ns: str, names: Sequence[str]) -> dict[str, str]:
    """Delete namespace-owned buckets (unknown names ignored); returns the effective map."""
    face.writable()
    face.store.execute([("DELETE FROM sm_buckets WHERE ns=? AND name=?", (ns, n)) for n in names])
    return effective_buckets(face, ns)
