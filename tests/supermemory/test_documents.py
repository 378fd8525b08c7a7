"""Documents through the official SDK: add, batch, files, get with includes, patch, replace, delete, counts."""

from __future__ import annotations

import io
import time
from typing import Any

import httpx
import numpy as np
import pytest
import supermemory
from supermemory import Supermemory

from tests.supermemory.conftest import Server, add_done, wait_done
from tests.limits import PATIENCE_S


def test_add_answers_queued_and_the_status_walks_to_done(client: Supermemory, ns: str, server: Server) -> None:
    seen: set[str] = set()
    ref = client.add(ns, content="The deploy runs every night. Backups are kept for thirty days.")
    assert ref.status == "queued"
    deadline = time.monotonic() + PATIENCE_S
    while True:
        doc = client.documents.get(ns, ref.id)
        seen.add(doc.system.status)
        if doc.system.status == "done":
            break
        assert time.monotonic() < deadline
    assert seen <= {"queued", "extracting", "chunking", "embedding", "indexing", "done"}
    assert doc.content.startswith("The deploy") and doc.metadata == {} and doc.type == "text"
    assert doc.system.dreaming_status == "done" and doc.system.created_at <= doc.system.updated_at


def test_get_includes_chunks_and_memories_only_when_asked(client: Supermemory, ns: str, server: Server) -> None:
    doc_id = add_done(client, ns, "Alice leads the search team. Bob maintains the indexer.", metadata={"team": "core"})
    plain = client.documents.get(ns, doc_id)
    assert plain.chunks is None and plain.memories is None
    both = client.documents.get(ns, doc_id, include=["chunks", "memories"])
    assert [c.position for c in both.chunks] == [0]
    assert both.chunks[0].metadata == {"team": "core"}
    assert sorted(m.memory for m in both.memories) == ["Alice leads the search team.", "Bob maintains the indexer."]
    assert all(m.is_latest and not m.is_forgotten and not m.is_inference and m.version == 1 for m in both.memories)
    joined = httpx.get(f"{server.url}/ns/{ns}/document/{doc_id}", params={"include": "chunks,memories"},
                       headers={"Authorization": f"Bearer {server.key}"}).json()
    assert len(joined["chunks"]) == 1 and len(joined["memories"]) == 2
    only = client.documents.get(ns, doc_id, include="memories")
    assert only.chunks is None and len(only.memories) == 2


def test_a_document_without_statements_answers_empty_lists_when_asked(client: Supermemory, ns: str) -> None:
    doc_id = add_done(client, ns, "ok")
    doc = client.documents.get(ns, doc_id, include=["chunks", "memories"])
    assert doc.memories == [] and len(doc.chunks) == 1


def test_the_caller_id_addresses_the_document_and_a_resubmission_is_not_a_duplicate(client: Supermemory, ns: str) -> None:
    first = client.add(ns, content="The meeting moved to Tuesday.", id="conv-1")
    wait_done(client, ns, "conv-1")
    again = client.add(ns, content="The meeting moved to Tuesday.", id="conv-1")
    assert again.id == first.id and again.status == "done"
    grown = client.add(ns, content="The meeting moved to Tuesday. Carol will present the roadmap.", id="conv-1")
    assert grown.status == "queued"
    doc = wait_done(client, ns, "conv-1")
    assert doc.content == "The meeting moved to Tuesday. Carol will present the roadmap."
    other = client.add(ns, content="Dan joins next month.", id="conv-1")
    assert other.id == first.id
    doc = wait_done(client, ns, "conv-1")
    assert doc.content.endswith("\n\nDan joins next month.")
    listed = client.list(ns, "documents")
    assert listed.pagination.total_items == 1


@pytest.mark.parametrize("bad", ["a/b", "a?b", "a#b", "", "x" * 256])
def test_ids_that_a_path_cannot_address_are_refused_at_write(client: Supermemory, ns: str, bad: str) -> None:
    with pytest.raises(supermemory.BadRequestError):
        client.add(ns, content="text", id=bad)


def test_batch_accepts_up_to_600_documents_and_refuses_601(client: Supermemory, ns: str) -> None:
    result = client.documents.batch_add(ns, documents=[{"content": f"Fact number {i} is true."} for i in range(600)])
    assert result.count == 600 and result.failed == 0 and len(result.results) == 600
    assert all(r.status == "queued" for r in result.results)
    with pytest.raises(supermemory.BadRequestError):
        client.documents.batch_add(ns, documents=[{"content": "x"}] * 601)
    with pytest.raises(supermemory.BadRequestError):
        client.documents.batch_add(ns, documents=[])
    with pytest.raises(supermemory.BadRequestError):
        client.documents.batch_add(ns, documents=[{"content": "x", "taskType": "memory"}])


def test_patch_replaces_content_and_the_facts_it_dropped_stop_being_latest(client: Supermemory, ns: str) -> None:
    doc_id = add_done(client, ns, "I live in Paris. I like green tea.", id="me")
    before = {m.memory: m for m in client.documents.get(ns, doc_id, include="memories").memories}
    ref = client.documents.update(ns, "me", content="I live in Berlin.")
    assert ref.status == "queued"
    wait_done(client, ns, doc_id)
    after = {m.memory: m for m in client.documents.get(ns, doc_id, include="memories").memories}
    assert after["I live in Berlin."].is_latest and after["I live in Berlin."].version == 2
    assert not after["I live in Paris."].is_latest and not after["I like green tea."].is_latest
    paris = client.memories.get(ns, before["I live in Paris."].id, include="related")
    assert [c.memory for c in paris.included.related.children] == ["I live in Berlin."]
    berlin = client.memories.get(ns, after["I live in Berlin."].id, include="related")
    assert [(p.memory, p.relation) for p in berlin.included.related.parents] == [("I live in Paris.", "updates")]
    found = client.search(ns, query="Paris", search_mode="memories", threshold=0)
    assert "I live in Paris." not in [r.memory for r in found.results]


def test_patch_with_only_metadata_changes_metadata_without_reprocessing(client: Supermemory, ns: str) -> None:
    doc_id = add_done(client, ns, "Quarterly numbers are final.", metadata={"q": "3"})
    ref = client.documents.update(ns, doc_id, metadata={"q": "4", "final": True})
    assert ref.status == "done"
    doc = client.documents.get(ns, doc_id, include="memories")
    assert doc.metadata == {"q": "4", "final": True} and doc.memories[0].metadata == {"q": "4", "final": True}


def test_patch_refuses_an_empty_change_and_a_document_still_processing(client: Supermemory, ns: str) -> None:
    doc_id = add_done(client, ns, "Something stays.")
    with pytest.raises(supermemory.BadRequestError):
        client.documents.update(ns, doc_id, task_type="superrag")
    with pytest.raises(supermemory.BadRequestError):
        client.documents.update(ns, doc_id, extra_body={"customId": "x"}, content="y")
    big = client.documents.batch_add(ns, documents=[{"content": f"Line {i} of the backlog."} for i in range(300)])
    last = big.results[-1].id
    with pytest.raises(supermemory.ConflictError):
        client.documents.update(ns, last, content="changed")
    with pytest.raises(supermemory.NotFoundError):
        client.documents.update(ns, "nope", content="changed")


def test_delete_takes_ids_in_its_body_and_reports_each(client: Supermemory, ns: str) -> None:
    a = add_done(client, ns, "Delete me soon.", id="a")
    add_done(client, ns, "Keep me around.", id="b")
    result = client.documents.delete(ns, ids=["a", "missing"])
    assert result.count == 1 and [(e.id, e.error) for e in result.errors] == [("missing", "document not found")]
    with pytest.raises(supermemory.NotFoundError):
        client.documents.get(ns, a)
    texts = [r.memory or r.chunk for r in client.search(ns, query="delete me keep", threshold=0).results]
    assert "Keep me around." in texts and not any("Delete" in (t or "") for t in texts)
    with pytest.raises(supermemory.BadRequestError):
        client.documents.delete(ns, ids=[])


def test_memory_counts_leave_unknown_ids_out(client: Supermemory, ns: str) -> None:
    add_done(client, ns, "One fact here. Another fact there.", id="two")
    counts = client.content_management.post_ns_by_namespace_list_documents_memory_counts(ns, ids=["two", "zzz"])
    assert [(c.id, c.memory_count) for c in counts.counts] == [("two", 2)]


def test_superrag_documents_get_chunks_and_no_memories(client: Supermemory, ns: str) -> None:
    doc_id = add_done(client, ns, "Retrieval only. No memories please.", task_type="superrag")
    doc = client.documents.get(ns, doc_id, include=["chunks", "memories"])
    assert doc.memories == [] and len(doc.chunks) == 1


def test_text_and_markdown_files_are_uploaded_and_processed(client: Supermemory, ns: str) -> None:
    ref = client.documents.upload_file(ns, file=("notes.md", io.BytesIO(b"# Notes\n\nThe cache is warm."), "text/markdown"),
                                       metadata='{"source": "upload"}')
    doc = wait_done(client, ns, ref.id)
    assert doc.system.status == "done" and doc.type == "markdown" and doc.title == "Notes"
    assert doc.metadata == {"source": "upload"} and "The cache is warm." in doc.content
    with pytest.raises(supermemory.BadRequestError):
        client.documents.upload_file(ns, file=("x.bin", io.BytesIO(b"\x00\x01"), "application/octet-stream"))
    with pytest.raises(supermemory.BadRequestError):
        client.documents.upload_file(ns, file=("a.txt", io.BytesIO(b"x"), "text/plain"), metadata="not json")


def test_replacing_a_file_clears_what_it_omits_and_patching_merges_metadata(client: Supermemory, ns: str) -> None:
    ref = client.documents.upload_file(ns, file=("a.txt", io.BytesIO(b"Version one is here."), "text/plain"),
                                       metadata='{"a": "1", "b": "2"}', supporting_context="ctx")
    wait_done(client, ns, ref.id)
    client.documents.update_file(ns, ref.id, metadata='{"b": "3"}')
    assert client.documents.get(ns, ref.id).metadata == {"a": "1", "b": "3"}
    replaced = client.documents.replace_with_file(ns, ref.id, file=("b.txt", io.BytesIO(b"Version two is here."),
                                                                        "text/plain"))
    assert replaced.status == "queued"
    doc = wait_done(client, ns, ref.id)
    assert doc.metadata == {} and doc.content == "Version two is here."


def test_a_url_document_fails_clearly_when_it_cannot_be_fetched(client: Supermemory, ns: str) -> None:
    ref = client.add(ns, content="http://127.0.0.1:9/nothing-listens-here")
    doc = wait_done(client, ns, ref.id)
    assert doc.system.status == "failed"
    raw = httpx.get(f"{client.base_url}/ns/{ns}/document/{ref.id}", headers={"Authorization": f"Bearer {client.api_key}"})
    assert raw.json()["error"]


def test_a_batch_that_repeats_an_id_updates_the_same_document(client: Supermemory, ns: str) -> None:
    result = client.documents.batch_add(ns, documents=[
        {"content": "The first part is here.", "id": "twice"}, {"content": "Another document stands alone."},
        {"content": "The first part is here. The second part follows.", "id": "twice"}])
    assert result.count == 3 and result.results[0].id == result.results[2].id
    doc = wait_done(client, ns, "twice")
    assert doc.content == "The first part is here. The second part follows."
    assert client.list(ns, "documents").pagination.total_items == 2


def test_concurrent_adds_of_one_new_id_make_one_document(client: Supermemory, ns: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        refs = list(pool.map(lambda i: client.add(ns, content=f"Racing writer {i} was here.", id="race"), range(8)))
    assert len({r.id for r in refs}) == 1
    assert client.list(ns, "documents").pagination.total_items == 1


def test_a_file_that_cannot_become_text_fails_with_a_reason(client: Supermemory, ns: str, server: Server) -> None:
    ref = client.documents.upload_file(ns, file=("bad.pdf", io.BytesIO(b"%PDF-1.7\n not really a PDF"),
                                                 "application/pdf"))
    doc = wait_done(client, ns, ref.id)
    assert doc.system.status == "failed"
    raw = httpx.get(f"{server.url}/ns/{ns}/document/{ref.id}", headers={"Authorization": f"Bearer {server.key}"})
    assert "PDF" in raw.json()["error"]
    fixed = client.documents.replace_with_file(ns, ref.id, file=("good.txt", io.BytesIO(b"Now it reads fine."),
                                                                  "text/plain"))
    assert fixed.status == "queued" and wait_done(client, ns, ref.id).system.status == "done"


def test_a_url_document_is_fetched_and_its_page_becomes_the_content(client: Supermemory, ns: str) -> None:
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    from engram_index.testkit.serve import serving

    async def page(request: Any) -> HTMLResponse:
        return HTMLResponse("<html><head><title>Tide tables</title></head><body><p>High tide is at noon today."
                            " The harbour closes at dusk.</p></body></html>")

    with serving(Starlette(routes=[Route("/tides", page)]), probe="/tides") as url:
        ref = client.add(ns, content=f"{url}/tides")
        doc = wait_done(client, ns, ref.id)
    assert doc.system.status == "done" and doc.type == "webpage" and doc.title == "Tide tables"
    assert "High tide is at noon today." in doc.content
    assert client.list(ns, "documents").documents[0].url == f"{url}/tides"
    assert client.search(ns, query="harbour closes", search_mode="memories").results[0].memory == (
        "The harbour closes at dusk.")


def test_urls_on_private_addresses_are_refused_unless_allowed(tmp_path: Any, ns: str) -> None:
    from engram_index.embed.hashing import HashingEmbedder
    from tests.supermemory.conftest import running

    with running(tmp_path, HashingEmbedder(64), allow_private_urls=False) as srv:
        client = srv.client()
        ref = client.add(ns, content="http://127.0.0.1:1/secret")
        assert wait_done(client, ns, ref.id).system.status == "failed"
        raw = httpx.get(f"{srv.url}/ns/{ns}/document/{ref.id}", headers={"Authorization": f"Bearer {srv.key}"})
        assert "private" in raw.json()["error"] or "public" in raw.json()["error"]


def test_pdf_and_html_files_are_extracted(client: Supermemory, ns: str) -> None:
    from tests.extract.pdfs import make_pdf

    ref = client.documents.upload_file(ns, file=("report.pdf", io.BytesIO(make_pdf([["Revenue grew nine percent."]])),
                                                 "application/pdf"))
    doc = wait_done(client, ns, ref.id)
    assert doc.system.status == "done" and doc.type == "pdf" and "Revenue grew nine percent." in doc.content
    ref = client.documents.upload_file(ns, file=("a.html", io.BytesIO(b"<h1>Menu</h1><p>Soup is served hot.</p>"),
                                                 "text/html"))
    doc = wait_done(client, ns, ref.id)
    assert doc.type == "webpage" and "Soup is served hot." in doc.content
    for name, data, media in [("x.png", b"\x89PNG\r\n\x1a\n0000", "image/png"), ("a.zip", b"PK\x03\x04zz", "")]:
        with pytest.raises(supermemory.BadRequestError) as err:
            client.documents.upload_file(ns, file=(name, io.BytesIO(data), media))
        assert err.value.body["error"][0]["path"] == ["file"]


def test_a_chunk_vector_pools_its_sentences_vectors_when_memories_are_the_sentences(
        client: Supermemory, ns: str, server: Server) -> None:
    from engram_index.embed.base import embed_weighted, pool
    from engram_index.embed.hashing import HashingEmbedder
    from engram_index.supermemory.tables import chunks_collection, memories_collection

    sentences = ["Otters hold hands while they sleep.", "A group of otters is called a romp.",
                 "Sea otters use stones as tools."]
    doc_id = add_done(client, ns, " ".join(sentences))
    store = server.app.state.spaces.store
    chunk = store.document_by_id(store.collection(chunks_collection(ns)).id, f"{doc_id}c0")
    assert chunk is not None
    embedder = HashingEmbedder(256)
    vectors, weights = embed_weighted(embedder, sentences)
    expected = pool(vectors, weights, 256)
    stored = np.frombuffer(chunk[1].vector or b"", "<f2").astype(np.float32)
    assert np.array_equal(stored, expected.astype("<f2").astype(np.float32))
    memories = store.collection(memories_collection(ns)).id
    rows = dict(store.query("SELECT memory, id FROM sm_memories WHERE ns=? AND doc_id=?", (ns, doc_id)))
    for text, vector in zip(sentences, vectors):  # each memory's vector is its sentence's, embedded once
        found = store.document_by_id(memories, rows[text])
        assert found is not None
        assert np.array_equal(np.frombuffer(found[1].vector or b"", "<f2").astype(np.float32), vector)
