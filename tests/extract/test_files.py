"""Text from files: plain text, Markdown, HTML and PDF, sniffed from the bytes; others refused by name."""

from __future__ import annotations

import pytest

from engram_index.errors import InvalidInput
from engram_index.extract.files import MAX_PDF_PAGES, Extracted, UnreadableFile, UnsupportedFileType, extract_text

from tests.extract.pdfs import encrypted, make_pdf

PAGE = b"""<!DOCTYPE html>
<html><head><title>  Trip   notes </title><style>body { color: red }</style>
<script>var secret = "do not index";</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Lisbon</h1><p>We stayed in <b>Alfama</b> for&nbsp;three nights.</p>
<ul><li>Tram 28</li><li>Past&eacute;is de nata</li></ul>
<!-- a comment --><div>Last<br>line</div><noscript>enable JS</noscript></body></html>"""


def test_plain_text_is_returned_tidied() -> None:
    got = extract_text(b"Alice lives in Paris.\r\n\r\n\r\n\r\nBob bakes.   \n", "notes.txt", "text/plain")
    assert got == Extracted("Alice lives in Paris.\n\nBob bakes.", "text", None)


def test_markdown_keeps_its_source_and_takes_the_first_heading_as_title() -> None:
    got = extract_text(b"intro\n\n# Project Plan #\n\n- ship it\n", "plan.md", None)
    assert got == Extracted("intro\n\n# Project Plan #\n\n- ship it", "markdown", "Project Plan")
    assert extract_text(b"# T\n", None, "text/markdown; charset=utf-8").type == "markdown"


def test_html_keeps_the_readable_text_in_blocks_and_drops_scripts_styles_and_navigation() -> None:
    got = extract_text(PAGE, "trip.html", "text/html")
    assert got.type == "webpage" and got.title == "Trip notes"
    assert got.text == "Lisbon\n\nWe stayed in Alfama for three nights.\n\nTram 28\nPastéis de nata\n\nLast\nline"


def test_html_is_sniffed_without_a_name_or_type_and_main_content_is_preferred() -> None:
    page = b"<html><body><header>Site</header><main><p>The content.</p></main><footer>(c)</footer></body></html>"
    assert extract_text(page, None, None) == Extracted("The content.", "webpage", None)


def test_xhtml_with_an_xml_declaration_is_sniffed_as_html() -> None:
    page = b'<?xml version="1.0"?>\n<!DOCTYPE html><html><body><p>x</p></body></html>'
    assert extract_text(page, None, None).type == "webpage"


def test_deeply_nested_html_is_extracted_without_recursion() -> None:
    page = b"<html><body>" + b"<div>" * 20000 + b"deep" + b"</div>" * 20000 + b"</body></html>"
    assert extract_text(page, "x.html", None).text == "deep"


def test_a_declared_charset_is_honoured_and_a_bom_wins() -> None:
    assert extract_text("café".encode("latin-1"), None, "text/plain; charset=ISO-8859-1").text == "café"
    assert extract_text(b"\xef\xbb\xbfhello", None, None).text == "hello"
    assert extract_text("héllo".encode("utf-16"), "a.txt", None).text == "héllo"


def test_a_pdfs_text_layer_is_extracted_page_by_page_with_its_title() -> None:
    pdf = make_pdf([["Alice lives in Paris.", "She likes (round) brackets."], ["Page two."]], title="Facts")
    got = extract_text(pdf, "facts.pdf", "application/pdf")
    assert got.type == "pdf" and got.title == "Facts"
    assert got.text == "Alice lives in Paris.\nShe likes (round) brackets.\n\nPage two."


def test_a_pdf_is_recognised_by_its_bytes_whatever_its_name_or_declared_type() -> None:
    pdf = make_pdf([["Hidden PDF."]])
    assert extract_text(pdf, "notes.txt", "text/plain") == Extracted("Hidden PDF.", "pdf", None)


def test_an_encrypted_pdf_opens_with_the_empty_password_or_is_refused() -> None:
    pdf = make_pdf([["Secret text."]])
    assert extract_text(encrypted(pdf, ""), "a.pdf", None).text == "Secret text."
    with pytest.raises(UnreadableFile, match="encrypted with a password"):
        extract_text(encrypted(pdf, "pw"), "a.pdf", None)


def test_a_pdf_without_text_is_refused_as_needing_ocr() -> None:
    with pytest.raises(UnreadableFile, match="no text layer"):
        extract_text(make_pdf([[]]), "scan.pdf", None)


def test_a_corrupt_pdf_is_refused_not_crashed_on() -> None:
    pdf = make_pdf([["Alice."]])
    with pytest.raises(UnreadableFile, match="could not be read"):
        extract_text(pdf[:40] + b"\x00garbage" * 10, "a.pdf", None)


def test_a_file_named_pdf_that_is_not_one_is_refused() -> None:
    with pytest.raises(UnreadableFile, match="not one"):
        extract_text(b"hello", "report.pdf", None)


def test_too_many_pdf_pages_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import engram_index.extract.files as files

    monkeypatch.setattr(files, "MAX_PDF_PAGES", 2)
    with pytest.raises(UnreadableFile, match="3 pages, more than 2"):
        extract_text(make_pdf([["a"], ["b"], ["c"]]), None, None)
    assert MAX_PDF_PAGES > 2


@pytest.mark.parametrize("data, name, content_type, what", [
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 20, "photo.txt", "text/plain", "a PNG image"),
    (b"\xff\xd8\xff\xe0" + b"\x00" * 20, "x.jpg", None, "a JPEG image"),
    (b"PK\x03\x04" + b"\x00" * 30, "report.docx", None, "a ZIP archive (DOCX"),
    (b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 8, "clip.mp4", None, "an MP4/MOV video"),
    (b"\x00\x01\x02\x03binary", "data.bin", None, "binary data"),
    (b"\xfd\xfe not utf8 \xc3\x28", None, None, "binary data or text that is not UTF-8"),
    (b"just text", "t.txt", "image/png", "image/png"),
    (b"{\\rtf1 hello}", "a.rtf", None, "an RTF document"),
    (b"hello", None, "application/vnd.ms-excel", "application/vnd.ms-excel"),
])
def test_other_types_are_refused_naming_what_they_are(data: bytes, name: str | None, content_type: str | None,
                                                      what: str) -> None:
    with pytest.raises(UnsupportedFileType, match="unsupported file type: " + what.replace("(", r"\(")) as info:
        extract_text(data, name, content_type)
    assert isinstance(info.value, InvalidInput) and info.value.status == 400
    assert "plain text, Markdown, HTML and PDF" in info.value.message


def test_text_sent_as_octet_stream_is_text() -> None:
    assert extract_text(b"plain words", "upload", "application/octet-stream") == Extracted("plain words", "text")
