"""The set hash of a permissioned repo: LtHash16 over `{collection}/{rkey}/{cid}` elements.

Each element is expanded to 2048 bytes with BLAKE3 in XOF mode and read as 1024 little-endian
uint16 lanes; adding or removing an element adds or subtracts its lanes modulo 2^16, so the
state depends only on the set. The commit carries `sha256(state)`. (Permissioned-data proposal
0016, "Commit digest".) numpy does the lane arithmetic: one vector add per element.
"""

from __future__ import annotations

import hashlib

import blake3
import numpy as np

STATE_BYTES = 2048
_LANES = STATE_BYTES // 2


def element(collection: str, rkey: str, cid: str) -> bytes:
    """The element of one record: the UTF-8 bytes of `{collection}/{rkey}/{cid}`."""
    return f"{collection}/{rkey}/{cid}".encode("utf-8")


def _lanes(item: bytes) -> np.ndarray:
    return np.frombuffer(blake3.blake3(item).digest(length=STATE_BYTES), dtype="<u2")


class LtHash:
    """A running set hash; `add` and `remove` commute."""

    __slots__ = ("state",)

    def __init__(self, state: bytes | None = None) -> None:
        if state is not None and len(state) != STATE_BYTES:
            raise ValueError(f"an LtHash state is {STATE_BYTES} bytes, not {len(state)}")
        self.state = (np.frombuffer(state, dtype="<u2").copy() if state is not None
                      else np.zeros(_LANES, dtype="<u2"))

    def add(self, item: bytes) -> None:
        """Fold an element in."""
        self.state += _lanes(item)  # uint16 arithmetic wraps modulo 2^16, as the construction wants

    def remove(self, item: bytes) -> None:
        """Take an element out."""
        self.state -= _lanes(item)

    def to_bytes(self) -> bytes:
        """The 2048-byte state (little-endian lanes)."""
        return self.state.astype("<u2").tobytes()

    def digest(self) -> bytes:
        """`sha256(state)`: what a commit's `hash` carries."""
        return hashlib.sha256(self.to_bytes()).digest()

    def copy(self) -> LtHash:
        """An independent copy."""
        return LtHash(self.to_bytes())
