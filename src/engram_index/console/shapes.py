"""What the access layer and each face's side of it share: a recall, a refusal, bounded text, the caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from engram_index.errors import EngramError

# Bounded outputs: an agent's context is small; a memory's text is cut at this many characters.
MAX_TEXT_CHARS = 2000


class Refused(EngramError):
    """A face refused a call (or the call cannot be made on this face): its message, readable as is."""

    status = 400

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def cut(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """`text`, at most `limit` characters (an ellipsis says it was cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Query:
    """One recall: the query, how many, how to rank, and the filters."""

    query: str
    limit: int = 10
    mode: str | None = None  # hybrid, vector/semantic, keyword; None: the face's default
    author: str | None = None
    tags: list[str] = field(default_factory=list)
    since: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


class Caller(Protocol):
    """What a face's side of the access layer calls back on (access.Console is one)."""

    space_headers: dict[str, str] | None

    async def call(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                   body: Any = None, explain: bool = False) -> Any:
        """One request to a face; its JSON answer, or Refused with the face's own message."""

    async def get(self, collection: str, ident: str) -> dict[str, Any]:
        """One memory, with its versions or revisions where the face keeps them."""

    def open_spaces(self) -> list[str]:
        """The garden.engram spaces this caller may try."""
