"""A small index of conversation facts for the Kindgi ranking tests: many ties, rewrites, removals."""

from __future__ import annotations

import numpy as np

from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document

WORDS = "ana bob paris trip museum painting dinner pasta river boat coffee morning".split()


def conversation_space(seed: int, dims: int | None = None) -> tuple[SpaceIndex, np.random.Generator]:
    """Facts of a few sessions and threads (and some of none), interleaved, of a small vocabulary (many
    equal scores), some written again at the same ordinal, some removed; with `dims`, few distinct
    vectors (many equal cosines) and some facts without one. The index and the generator, to go on."""
    rng = np.random.default_rng(seed)
    docs: dict[int, Document] = {}
    index = SpaceIndex(None, dims, lambda ords: {o: docs[o] for o in ords if o in docs})
    vectors = rng.standard_normal((6, dims)).astype(np.float16) if dims is not None else None

    def fact(ord_: int) -> Document:
        tags = ["t:turn", "v:org:-"]
        kind = rng.integers(4)
        if kind == 1:
            tags.append(f"s:sessionId=s{rng.integers(3)}")
        elif kind == 2:
            tags.append(f"s:threadId=t{rng.integers(3)}")
        elif kind == 3:
            tags += [f"s:sessionId=s{rng.integers(3)}", f"s:threadId=t{rng.integers(3)}"]
        text = " ".join(rng.choice(WORDS, int(rng.integers(2, 7))).tolist())
        vector = None
        if vectors is not None:
            vector = None if rng.integers(10) == 0 else vectors[rng.integers(len(vectors))].tobytes()
        return Document(id=f"f{ord_}-{rng.integers(1000)}", author="", text=text, tags=tuple(tags),
                        created_ms=ord_, vector=vector)

    changes: list[tuple[int, Document | None]] = [(o, fact(o)) for o in range(300)]
    docs.update((o, d) for o, d in changes if d is not None)
    index.apply(changes, seq=1)
    again = [(int(o), fact(int(o))) for o in rng.choice(300, 40, replace=False)]
    gone = [(int(o), None) for o in rng.choice(300, 20, replace=False)]
    for o, d in again:
        docs[o] = d
    for o, _ in gone:
        docs.pop(o, None)
    index.apply([*again, *gone], seq=2)
    index.commit()
    return index, rng
