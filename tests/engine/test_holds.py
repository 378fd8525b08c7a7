"""Which documents hold which query words, read from the term counts (what the v5 face scores coverage by)."""

from __future__ import annotations

import numpy as np

from engram_index.engine.analyzer import query_words
from engram_index.engine.keyword import searchable_words
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document


def test_holds_says_whole_words_stems_and_identifier_parts_per_document() -> None:
    docs = {0: Document("a", "", "The runners were running fast"), 1: Document("b", "", "see HttpServer logs"),
            2: Document("c", "", "nothing relevant here")}
    index = SpaceIndex(None, None, lambda ords: {o: docs[o] for o in ords if o in docs})
    index.apply(list(docs.items()), seq=1)
    words = searchable_words(query_words("run server HttpClient"))
    whole, part = index.keyword.holds(words, np.array([0, 1, 2], np.int64))
    assert [w.exact for w in words] == ["run", "server", "httpclient"]
    # "running" by its stem; HttpServer is indexed whole and by its parts, so it holds "server".
    assert whole.tolist() == [[True, False, False], [False, True, False], [False, False, False]]
    assert part[:, 2].tolist() == [False, True, False] and whole.dtype == part.dtype == np.bool_
    index.apply([(1, None)], seq=2)  # a deleted document holds nothing
    whole, part = index.keyword.holds(words, np.array([1], np.int64))
    assert not whole.any() and not part.any()
