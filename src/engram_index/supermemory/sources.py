"""A document's text: as sent, extracted from an uploaded file, or fetched from its URL.

Files and URLs go through `engram_index.extract` (text, Markdown, HTML, PDF; other types are
refused). Until that package is present, plain text and Markdown files are read here and URL
documents fail with a message naming what is missing.
"""

from __future__ import annotations

import re

from engram_index.errors import InvalidInput
from engram_index.supermemory.face import Face
from engram_index.supermemory.tables import DocRow

FETCH_MAX_BYTES = 10 * 1024 * 1024
FETCH_TIMEOUT_S = 20.0
TEXT_TYPES = ("text/plain", "text/markdown", "text/x-markdown")
TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".text")


class UnsupportedSource(InvalidInput):
    """A file or URL whose content this server cannot turn into text."""


def extract_document(face: Face, doc: DocRow) -> str:
    """The text to chunk and form memories from (storing what a file or URL turned into)."""
    if doc.filename is None and doc.url is None:
        return doc.content
    title: str | None = None
    kind = doc.type
    if doc.filename is not None:
        raw = face.store.query("SELECT raw FROM sm_documents WHERE ns=? AND id=?", (doc.ns, doc.id))
        data = bytes(raw[0][0]) if raw and raw[0][0] is not None else b""
        text, kind, title = _file_text(data, doc.filename, doc.content_type or "")
    else:
        assert doc.url is not None
        text, kind, title = _fetch(doc.url, face.allow_private_urls)
    face.store.execute([(
        "UPDATE sm_documents SET content=?, type=?, title=COALESCE(?, title) WHERE ns=? AND id=? AND revision=?",
        (text, kind, title, doc.ns, doc.id, doc.revision))])
    return text


def _file_text(data: bytes, filename: str, content_type: str) -> tuple[str, str, str | None]:
    """An uploaded file's text, type and title."""
    try:
        from engram_index.extract.files import extract_text  # type: ignore[import-not-found]
    except ImportError:
        return _plain_text(data, filename, content_type)
    extracted = extract_text(data, filename, content_type)
    return str(extracted.text), str(extracted.type), extracted.title


def _plain_text(data: bytes, filename: str, content_type: str) -> tuple[str, str, str | None]:
    """A text or Markdown file read as UTF-8."""
    media = content_type.split(";")[0].strip().lower()
    if media not in TEXT_TYPES and not filename.lower().endswith(TEXT_SUFFIXES):
        raise UnsupportedSource(f"cannot extract text from {filename!r} ({media or 'no media type'}):"
                                " this server reads plain text and Markdown files")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UnsupportedSource(f"{filename!r} is not UTF-8 text") from None
    markdown = media in ("text/markdown", "text/x-markdown") or filename.lower().endswith((".md", ".markdown"))
    heading = re.search(r"^#\s+(.+)$", text, re.M) if markdown else None
    return text, "markdown" if markdown else "text", heading.group(1).strip() if heading else None


def supported_file(filename: str, content_type: str) -> bool:
    """Whether an upload can be turned into text here (checked before it is accepted)."""
    try:
        import engram_index.extract.files  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        media = content_type.split(";")[0].strip().lower()
        return media in TEXT_TYPES or filename.lower().endswith(TEXT_SUFFIXES)
    return True


def _fetch(url: str, face_allow_private: bool) -> tuple[str, str, str | None]:
    """A URL's text, fetched within limits of size, time and type."""
    try:
        from engram_index.extract.fetch import fetch_url  # type: ignore[import-not-found]
    except ImportError:
        raise UnsupportedSource("URL documents need the fetcher (engram_index.extract), which this build lacks;"
                                " send the page's text as content instead") from None
    extracted = fetch_url(url, max_bytes=FETCH_MAX_BYTES, timeout_s=FETCH_TIMEOUT_S, allow_private=face_allow_private)
    return str(extracted.text), str(extracted.type), extracted.title
