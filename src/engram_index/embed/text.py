"""The text a document is embedded as, the same for every face and every embedder."""

from __future__ import annotations

# The reference client cuts a memory's text to this many UTF-8 bytes before embedding it, to stay
# within common models' input limits; an import must embed the same text as an author would.
MAX_EMBED_BYTES = 24000


def embed_text(prefix: str, text: str, tags: list[str] | tuple[str, ...] | None) -> str:
    """The text a memory is embedded as: prefix + text (cut to MAX_EMBED_BYTES on a character
    boundary), then a blank line and `Tags: a, b`."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_EMBED_BYTES:
        text = raw[:MAX_EMBED_BYTES].decode("utf-8", "ignore")
    out = prefix + text
    if tags:
        out += "\n\nTags: " + ", ".join(tags)
    return out
