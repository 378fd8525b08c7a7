"""What a v5 search knows without reading its candidates' records: a chunk's document from its id, the
documents' dates kept until a write, the texts read where ranking and the page need them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from supermemory import Supermemory

from engram_index.supermemory.tables import chunk_document, chunk_id
from tests.supermemory.conftest import Server, add_done, wait_done


@pytest.mark.parametrize("doc_id", ["d0123abcdef", "c", "cc9", "abc5c0", "x c12", "dc", ""])
@pytest.mark.parametrize("position", [0, 7, 123])
def test_a_chunks_document_is_known_from_its_id_whatever_the_document_id_holds(doc_id: str, position: int) -> None:
    assert chunk_document(chunk_id(doc_id, position)) == doc_id


def _search(server: Server, ns: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The results of a raw, explained search."""
    response = httpx.post(f"{server.url}/ns/{ns}/search", json=body,
                          headers={"Authorization": f"Bearer {server.key}", "X-Engram-Explain": "true"})
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def _add_dated(server: Server, client: Supermemory, ns: str, content: str, date: str) -> str:
    """Add a document with a date and wait until it is processed; its id."""
    response = httpx.post(f"{server.url}/ns/{ns}/document", json={"content": content, "date": date},
                          headers={"Authorization": f"Bearer {server.key}"})
    assert response.status_code == 200, response.text
    doc_id = str(response.json()["id"])
    assert wait_done(client, ns, doc_id).system.status == "done"
    return doc_id


def _coverage(results: list[dict[str, Any]], chunk: str) -> float:
    """The keyword coverage of the result whose chunk is `chunk`."""
    found = [r for r in results if r.get("chunk") == chunk]
    assert found, results
    coverage: float = found[0]["explanation"]["keywordCoverage"]
    return coverage


def test_a_chunk_holds_the_words_of_the_chunk_before_it_until_a_new_date_parts_them(server: Server,
                                                                                      client: Supermemory,
                                                                                      ns: str) -> None:
    _add_dated(server, client, ns, "Ana adopted a puppy named Rex.", "2023-05-01")
    later = _add_dated(server, client, ns, "That is wonderful news for the family.", "2023-05-01")
    body = {"query": "puppy wonderful", "searchMode": "chunks", "threshold": 0, "limit": 10}
    # One session (one date): the second turn holds "puppy" through the turn before it.
    assert _coverage(_search(server, ns, body), "That is wonderful news for the family.") == 1.0
    assert _coverage(_search(server, ns, body), "That is wonderful news for the family.") == 1.0  # dates kept
    patched = httpx.patch(f"{server.url}/ns/{ns}/document/{later}", json={"date": "2023-06-09"},
                          headers={"Authorization": f"Bearer {server.key}"})
    assert patched.status_code == 200, patched.text
    # Another date: another session, and the next search sees it (the kept dates were dropped).
    assert _coverage(_search(server, ns, body), "That is wonderful news for the family.") < 1.0


def test_a_memory_found_with_the_chunk_it_came_from_takes_one_place_and_explains_its_own_text(
        server: Server, client: Supermemory, ns: str) -> None:
    add_done(client, ns, "The observatory opens at dusk. Telescopes are lent free of charge.")
    add_done(client, ns, "The bakery sells rye bread.")
    results = _search(server, ns, {"query": "observatory telescopes dusk", "threshold": 0, "limit": 10})
    texts = [r.get("memory") or r.get("chunk") or "" for r in results]
    # The chunk holds both statements: neither memory takes a place beside it, whichever leads.
    observatory = [t for t in texts if "observatory" in t.lower() or "telescopes" in t.lower()]
    assert len(observatory) == 1, texts
    first = results[0]
    snippet = first["explanation"]["snippet"]["text"]
    assert snippet and snippet in (first.get("memory") or first.get("chunk"))
    assert first["metadata"] == {} and first["explanation"].get("backedBy") is not None
