"""Edges of the service a newcomer meets: the DID document names the scheme it is served on, only
paths under /xrpc/ answer 404 in the XRPC envelope, collections of other faces in the same store
are no garden spaces, and memory text is cut before embedding as the reference client cuts it."""

from __future__ import annotations

from pathlib import Path

import httpx

from engram_index.app import not_found_for, xrpc_not_found
from tests.limits import roomy_app
from engram_index.collections import Collections
from engram_index.engine.types import Document
from engram_index.engram.auth import InsecureOpen
from engram_index.embed.text import MAX_EMBED_BYTES, embed_text
from engram_index.store.sqlite import StoredDocument

from .server import serving

SPACE = "at://did:plc:edges234edges234edges234ed/space/garden.engram.space/s"


def test_the_did_document_names_the_plain_http_url_it_is_served_on(tmp_path: Path) -> None:
    with serving(roomy_app(tmp_path, "did:web:127.0.0.1", authenticator=InsecureOpen())) as url:
        doc = httpx.get(f"{url}/.well-known/did.json").json()
    assert doc["id"] == "did:web:127.0.0.1"
    assert doc["service"][0]["serviceEndpoint"] == url  # http://127.0.0.1:<port>, not https


def test_only_xrpc_paths_answer_404_in_the_xrpc_envelope(tmp_path: Path) -> None:
    with serving(roomy_app(tmp_path, "did:web:127.0.0.1", authenticator=InsecureOpen())) as url:
        xrpc = httpx.get(f"{url}/xrpc/garden.engram.noSuchMethod")
        other = httpx.get(f"{url}/v5/ns/x/search")
    assert (xrpc.status_code, xrpc.json()["error"]) == (404, "MethodNotImplemented")
    assert other.status_code == 404 and other.json()["error"] == "NotFound"
    assert not_found_for("/xrpc/x") is xrpc_not_found and not_found_for("/v1/x") is not xrpc_not_found


def test_collections_of_other_faces_are_not_loaded_or_listed_as_spaces(tmp_path: Path) -> None:
    spaces = Collections(tmp_path)
    spaces.ensure_collection("tenant-1")  # another face's collection in the same store
    spaces.ensure_collection(SPACE)
    spaces.write(SPACE, [StoredDocument(Document(id=f"{SPACE}/did:plc:a/garden.engram.memory/r1",
                                                  author="did:plc:a", text="kept", created_ms=1))])
    spaces.close()
    app = roomy_app(tmp_path, "did:web:127.0.0.1", authenticator=InsecureOpen())
    with serving(app) as url:
        r = httpx.get(f"{url}/xrpc/garden.engram.listMemories", params={"space": SPACE})
        assert [m["text"] for m in r.json()["memories"]] == ["kept"]
        # The start-up load touched the garden space only.
        assert "tenant-1" not in app.state.spaces._loading | set(app.state.spaces._indexes)


def test_memory_text_is_cut_to_24000_bytes_on_a_character_boundary_before_the_tags() -> None:
    text = "é" * 20000  # 40,000 bytes
    out = embed_text("doc: ", text, ["a", "b"])
    body, tags = out.removeprefix("doc: ").split("\n\nTags: ")
    assert tags == "a, b"
    assert body == "é" * (MAX_EMBED_BYTES // 2) and len(body.encode()) == MAX_EMBED_BYTES
    odd = embed_text("", "x" + "é" * 20000, None)
    assert len(odd.encode()) == MAX_EMBED_BYTES - 1  # the cut falls inside a character: it is dropped
    assert embed_text("", "short", None) == "short"
