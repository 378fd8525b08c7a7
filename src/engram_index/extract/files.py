"""Text from an uploaded or fetched file: plain text, Markdown, HTML (selectolax) and PDF (pypdf).

The real type is sniffed from the bytes first (a PDF named notes.txt is a PDF, a PNG is
refused whatever its name); the name and the declared content type only tell text, Markdown
and HTML apart. The `type` returned is the document type the faces report: "text",
"markdown", "webpage" (HTML) or "pdf". Anything else is refused with UnsupportedFileType,
naming what it is.
"""

from __future__ import annotations

import codecs
import io
import logging
import re
from dataclasses import dataclass

from engram_index.errors import InvalidInput

log = logging.getLogger(__name__)

MAX_PDF_PAGES = 2_000
# Magic numbers of formats people upload by mistake, so the refusal can say what was sent.
_MAGIC: list[tuple[bytes, int, str]] = [
    (b"\x89PNG\r\n\x1a\n", 0, "a PNG image"), (b"\xff\xd8\xff", 0, "a JPEG image"), (b"GIF8", 0, "a GIF image"),
    (b"RIFF", 0, "a RIFF file (WebP image, WAV audio or AVI video)"), (b"ftyp", 4, "an MP4/MOV video or HEIC image"),
    (b"ID3", 0, "an MP3 audio file"), (b"OggS", 0, "an Ogg audio file"), (b"fLaC", 0, "a FLAC audio file"),
    (b"PK\x03\x04", 0, "a ZIP archive (DOCX, XLSX, PPTX, EPUB or ZIP)"), (b"\x1f\x8b", 0, "a gzip archive"),
    (b"\xd0\xcf\x11\xe0", 0, "an old Office document (DOC, XLS, PPT)"), (b"{\\rtf", 0, "an RTF document"),
    (b"7z\xbc\xaf", 0, "a 7z archive"), (b"Rar!", 0, "a RAR archive"), (b"\x7fELF", 0, "an executable"),
    (b"MZ", 0, "an executable"), (b"SQLite format 3\x00", 0, "an SQLite database"),
]
_HTML_START = re.compile(rb"^\s*(<\?xml[^>]*>\s*)?(<!--.*?-->\s*)*(<!doctype\s+html|<html|<head|<body|<meta|<title)",
                         re.I | re.S)
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_MARKDOWN_TYPES = ("text/markdown", "text/x-markdown")
_TEXT_TYPES = ("text/plain", "text/csv", "application/json", "text/x-rst", "application/x-ndjson", "")
_MARKDOWN_NAMES = (".md", ".markdown", ".mdown", ".mkd")
_HTML_NAMES = (".html", ".htm", ".xhtml")


class ExtractError(InvalidInput):
    """A file or URL whose text cannot be taken."""


class UnsupportedFileType(ExtractError):
    """The content is of a type this service does not extract text from."""

    def __init__(self, what: str) -> None:
        super().__init__(f"unsupported file type: {what}; supported are plain text, Markdown, HTML and PDF")
        self.what = what


class UnreadableFile(ExtractError):
    """The content claims a supported type but cannot be read (corrupt, encrypted, no text)."""


@dataclass(frozen=True, slots=True)
class Extracted:
    """The text of a file, its document type ("text", "markdown", "webpage", "pdf") and its title if it has one."""

    text: str
    type: str
    title: str | None = None


def _media_type(content_type: str | None) -> tuple[str, str | None]:
    """The bare media type, lower-cased, and the charset parameter if any."""
    if not content_type:
        return "", None
    media, *params = content_type.split(";")
    charset = None
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"').lower() or None
    return media.strip().lower(), charset


def sniff(data: bytes) -> str | None:
    """What a binary format is ("pdf", or the description of an unsupported one), or None for text."""
    head = data[:1024]
    if b"%PDF-" in head:
        return "pdf"
    for magic, at, what in _MAGIC:
        if head[at:at + len(magic)] == magic:
            return what
    return None


def decode_text(data: bytes, charset: str | None = None) -> str:
    """Bytes as text: a BOM wins, then the declared charset, then UTF-8; binary data is refused."""
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                          (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(encoding, errors="replace")
    if b"\x00" in data[:8192]:
        raise UnsupportedFileType("binary data")
    if charset:
        try:
            return data.decode(charset)
        except (LookupError, UnicodeDecodeError):
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UnsupportedFileType("binary data or text that is not UTF-8") from None


def extract_text(data: bytes, filename: str | None = None, content_type: str | None = None) -> Extracted:
    """The text of a file (see the module docstring); UnsupportedFileType or UnreadableFile otherwise."""
    media, charset = _media_type(content_type)
    name = (filename or "").lower()
    sniffed = sniff(data)
    if sniffed == "pdf":
        return _pdf(data)
    if sniffed is not None:
        raise UnsupportedFileType(sniffed)
    if media == "application/pdf" or name.endswith(".pdf"):
        raise UnreadableFile("the file is named or declared a PDF but is not one (no %PDF- header)")
    if media.startswith(("image/", "audio/", "video/", "font/")):
        raise UnsupportedFileType(media)
    text = decode_text(data, charset)
    if media in _HTML_TYPES or name.endswith(_HTML_NAMES) or (
            media not in _MARKDOWN_TYPES and not name.endswith(_MARKDOWN_NAMES) and _HTML_START.match(data[:4096])):
        return html_text(text)
    if media in _MARKDOWN_TYPES or name.endswith(_MARKDOWN_NAMES):
        return Extracted(_tidy(text), "markdown", _markdown_title(text))
    if media.startswith("text/") or media in _TEXT_TYPES or media == "application/octet-stream":
        return Extracted(_tidy(text), "text", None)  # octet-stream: what clients send when they do not know
    raise UnsupportedFileType(media)


def _tidy(text: str) -> str:
    """Line endings made \\n, trailing spaces and runs of blank lines removed."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _markdown_title(text: str) -> str | None:
    match = re.search(r"^#\s+(.+?)\s*#*\s*$", text, re.M)
    return match.group(1).strip() if match else None


# Elements whose text is never content; elements that end a line; elements that end a paragraph.
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "iframe", "object", "canvas", "head",
                   "button", "select", "nav"})
_LINE = frozenset({"div", "br", "li", "dt", "dd", "tr", "figcaption", "summary", "address", "caption"})
_PARAGRAPH = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl", "table", "blockquote", "pre",
                        "section", "article", "header", "footer", "aside", "figure", "hr", "details", "main",
                        "body", "form", "fieldset"})
_CELL = frozenset({"td", "th"})
_PARA_MARK = "\x1e"  # stands for a paragraph break until the text is assembled


def html_text(html: str) -> Extracted:
    """Readable text of an HTML page: scripts, styles and navigation dropped, blocks on their own lines."""
    from selectolax.lexbor import LexborHTMLParser, LexborNode

    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title") or tree.css_first("h1")
    title = " ".join(title_node.text().split()) if title_node is not None else ""
    root = tree.css_first("main") or tree.css_first("article") or tree.body or tree.root
    parts: list[str] = []
    # An explicit stack, not recursion: hostile pages nest thousands of elements deep.
    stack: list[LexborNode | str] = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            parts.append(node)
            continue
        tag = node.tag
        if tag == "-text":
            parts.append(_SPACES.sub(" ", node.text_content or ""))
            continue
        if tag is None or tag in _SKIP or tag in ("-comment", "-doctype"):
            continue
        mark = _PARA_MARK if tag in _PARAGRAPH else "\n" if tag in _LINE else " " if tag in _CELL else ""
        stack.append(mark)
        stack.extend(reversed(list(node.iter(include_text=True))))
        stack.append(mark)
    text = _BREAKS.sub(_break, "".join(parts)).strip()
    return Extracted(text, "webpage", title or None)


_SPACES = re.compile(r"[\s\x1e]+")
_BREAKS = re.compile(r"[ \n\x1e]+")


def _break(match: re.Match[str]) -> str:
    """A run of spaces and break marks: a blank line if it holds a paragraph break, else a newline or a space."""
    run = match.group(0)
    return "\n\n" if _PARA_MARK in run else "\n" if "\n" in run else " "


def _pdf(data: bytes) -> Extracted:
    """The text layer of a PDF, page by page (pypdf); scanned PDFs without one are refused."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableFile("the PDF is encrypted with a password")
        if len(reader.pages) > MAX_PDF_PAGES:
            raise UnreadableFile(f"the PDF has {len(reader.pages)} pages, more than {MAX_PDF_PAGES}")
        pages = [_tidy(page.extract_text() or "") for page in reader.pages]
        meta = reader.metadata
        title = meta.title if meta is not None else None
    except ExtractError:
        raise
    except Exception as exc:  # pypdf raises many kinds on hostile files; all mean "cannot be read"
        log.info("unreadable PDF: %r", exc)
        raise UnreadableFile(f"the PDF could not be read ({type(exc).__name__})") from None
    text = "\n\n".join(p for p in pages if p)
    if not text:
        raise UnreadableFile("the PDF has no text layer (scanned pages need OCR, which this service does not do)")
    return Extracted(text, "pdf", title.strip() if isinstance(title, str) and title.strip() else None)
