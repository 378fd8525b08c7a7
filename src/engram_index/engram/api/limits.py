"""Per-space admission: the shared token bucket and slots (`engram_index.admission`), counted per space."""

from __future__ import annotations

from dataclasses import dataclass

from engram_index.admission import Admission, TokenBucket

__all__ = ["SpaceLimits", "TokenBucket"]


@dataclass
class SpaceLimits(Admission):
    """The admission settings: searches per second and burst per space, concurrent searches, wait."""

    noun: str = "searches"
    per: str = "space"
