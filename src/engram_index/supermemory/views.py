"""Rows → the JSON the SDK's models read: every required field present, metadata {} when empty."""

from __future__ import annotations

from typing import Any

from engram_index.supermemory.tables import ChunkRow, DocRow, MemoryRow, iso


def document_status(doc: DocRow) -> dict[str, Any]:
    """A document's system block."""
    return {
        "status": doc.status,
        # Memories form as the document is processed: no later consolidation pass runs here.
        "dreamingStatus": "done" if doc.status in ("done", "failed") else "dreaming",
        "createdAt": iso(doc.created_ms),
        "updatedAt": iso(doc.updated_ms),
    }


def document_view(doc: DocRow) -> dict[str, Any]:
    """GET /ns/{ns}/document/{id} (chunks and memories are added by the caller when asked)."""
    return {
        "id": doc.id,
        "title": doc.title,
        "type": doc.type,
        "summary": doc.summary,
        "content": doc.content or None,  # a file or a URL has none until it is extracted
        "metadata": doc.metadata,
        "system": document_status(doc),
        **({"customId": doc.custom_id} if doc.custom_id else {}),
        **({"error": doc.error} if doc.error else {}),
    }


def document_row(doc: DocRow, *, content: bool, memory_count: int | None) -> dict[str, Any]:
    """A document in a list (content only when asked)."""
    system = document_status(doc)
    if memory_count is not None:
        system["memoryCount"] = memory_count
    out: dict[str, Any] = {
        "id": doc.id, "title": doc.title, "type": doc.type, "summary": doc.summary,
        "metadata": doc.metadata, "url": doc.url, "system": system,
    }
    if content:
        out["content"] = doc.content
    return out


def included_document(doc: DocRow) -> dict[str, Any]:
    """A document as included beside a search result or a memory."""
    return {
        "id": doc.id, "title": doc.title, "type": doc.type, "metadata": doc.metadata, "summary": doc.summary,
        "system": {"createdAt": iso(doc.created_ms), "updatedAt": iso(doc.updated_ms)},
    }


def chunk_view(chunk: ChunkRow, doc: DocRow | None, *, with_document: bool = False) -> dict[str, Any]:
    """A chunk (with its documentId in lists)."""
    out: dict[str, Any] = {
        "id": chunk.id, "position": chunk.position, "content": chunk.content, "type": "text",
        "metadata": doc.metadata if doc is not None else {}, "system": {"createdAt": iso(chunk.created_ms)},
    }
    if with_document:
        out["documentId"] = chunk.doc_id
    return out


def memory_view(memory: MemoryRow, doc: DocRow | None, at_ms: int) -> dict[str, Any]:
    """A memory (lists, document.memories, memories.get)."""
    return {
        "id": memory.id,
        "memory": memory.memory,
        "metadata": doc.metadata if doc is not None else {},
        "isStatic": memory.is_static,
        "isInference": memory.is_inference,
        "isLatest": memory.is_latest,
        "isForgotten": memory.forgotten(at_ms),
        "version": memory.version,
        "system": {
            "createdAt": iso(memory.created_ms),
            "updatedAt": iso(memory.updated_ms),
            **({"forgetAfter": iso(memory.forget_after_ms)} if memory.forget_after_ms is not None else {}),
        },
    }


def related_view(memory: MemoryRow, relation: str, doc: DocRow | None) -> dict[str, Any]:
    """One related memory."""
    return {
        "id": memory.id,
        "relation": relation,
        "version": memory.version,
        "memory": memory.memory,
        "metadata": doc.metadata if doc is not None else {},
        "system": {"updatedAt": iso(memory.updated_ms)},
    }
