"""A document's text: as sent, extracted from an uploaded file, or fetched from its URL.

Files and URLs go through `engram_index.extract` (text, Markdown, HTML, PDF; other types are
refused naming what they are). An upload is checked for its type before it is accepted (the
cheap part of extraction: magic numbers, declared media type, text that decodes), so that an
image or an archive gets its 400 at once; the text itself is extracted in the background.
"""

from __future__ import annotations

from engram_index.errors import EngramError
from engram_index.extract.fetch import PrivateAddressRefused, fetch_url
from engram_index.extract.files import UnsupportedFileType, decode_text, extract_text, sniff
from engram_index.supermemory.face import Face
from engram_index.supermemory.tables import DocRow

FETCH_MAX_BYTES = 10 * 1024 * 1024
FETCH_TIMEOUT_S = 20.0
_UNSUPPORTED_MEDIA = ("image/", "audio/", "video/", "font/")


def extract_document(face: Face, doc: DocRow) -> str:
    """The text to chunk and form memories from (storing what a file or URL turned into)."""
    if doc.filename is None and doc.url is None:
        return doc.content
    if doc.filename is not None:
        raw = face.store.query("SELECT raw FROM sm_documents WHERE ns=? AND id=?", (doc.ns, doc.id))
        data = bytes(raw[0][0]) if raw and raw[0][0] is not None else b""
        extracted = extract_text(data, doc.filename, doc.content_type or None)
    else:
        assert doc.url is not None
        try:
            extracted = fetch_url(doc.url, max_bytes=FETCH_MAX_BYTES, timeout_s=FETCH_TIMEOUT_S,
                                  allow_private=face.allow_private_urls)
        except PrivateAddressRefused as exc:
            # Name the setting that would allow it: an operator indexing an intranet needs it.
            raise PrivateAddressRefused(f"{exc.message} (a server started with --allow-private-urls fetches it)") from None
    face.store.execute([(
        "UPDATE sm_documents SET content=?, type=?, title=COALESCE(?, title) WHERE ns=? AND id=? AND revision=?",
        (extracted.text, extracted.type, extracted.title, doc.ns, doc.id, doc.revision))])
    return extracted.text


def refusal(data: bytes, filename: str, content_type: str) -> str | None:
    """Why an upload cannot become text (None when it can, as far as a quick look tells)."""
    kind = sniff(data)
    if kind == "pdf":
        return None
    if kind is not None:
        return str(UnsupportedFileType(kind).message)
    media = content_type.split(";")[0].strip().lower()
    if media.startswith(_UNSUPPORTED_MEDIA) or media == "application/pdf" or filename.lower().endswith(".pdf"):
        return f"{filename!r} is declared {media or 'a PDF'} but is not a PDF or a text file"
    try:
        decode_text(data, None)
    except EngramError as exc:
        return exc.message
    return None
