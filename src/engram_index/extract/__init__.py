"""Text from files and URLs, for any face: files.py (text, Markdown, HTML, PDF), fetch.py (http(s) with limits)."""

from engram_index.extract.fetch import FetchError, FetchFailed, FetchRefused, FetchTimeout, FetchTooLarge, fetch_url
from engram_index.extract.files import Extracted, ExtractError, UnreadableFile, UnsupportedFileType, extract_text

__all__ = ["Extracted", "ExtractError", "FetchError", "FetchFailed", "FetchRefused", "FetchTimeout", "FetchTooLarge",
           "UnreadableFile", "UnsupportedFileType", "extract_text", "fetch_url"]
