"""Every field the SDK's models mark required is present in every answer (the SDK would read None)."""

from __future__ import annotations

from typing import Any

import pydantic
from supermemory import Supermemory

from tests.supermemory.conftest import add_done, wait_done


def missing(model: Any, path: str = "") -> list[str]:
    """The required fields that are None, anywhere in an SDK model."""
    out: list[str] = []
    if isinstance(model, list):
        for i, item in enumerate(model):
            out += missing(item, f"{path}[{i}]")
        return out
    if isinstance(model, dict):
        for key, item in model.items():
            out += missing(item, f"{path}.{key}")
        return out
    if not isinstance(model, pydantic.BaseModel):
        return out
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if value is None and field.is_required():
            out.append(f"{path}.{name}")
        out += missing(value, f"{path}.{name}")
    return out


def test_every_answer_carries_every_required_field(client: Supermemory, ns: str) -> None:
    doc_id = add_done(client, ns, "My bike is green.", id="bike")
    client.documents.update(ns, "bike", content="My bike is yellow. I ride it daily.")
    wait_done(client, ns, doc_id)
    everything = {"documents": True, "related": True, "forgotten": True}
    answers: list[Any] = [
        client.search(ns, query="bike", threshold=0, include=everything),
        client.search(ns, query="bike", threshold=0, search_mode="chunks", include=everything),
        client.documents.get(ns, doc_id, include=["chunks", "memories"]),
        client.list(ns, "documents", include={"content": True, "memoryCount": True}),
        client.list(ns, "chunks"), client.list(ns, "memories", include={"forgotten": True}),
        client.namespaces.list(q=ns), client.namespaces.get(ns), client.organization.get(),
        client.profile(ns), client.profiles.get_buckets(ns),
        client.content_management.post_ns_by_namespace_list_documents_memory_counts(ns, ids=[doc_id]),
        client.documents.batch_add(ns, documents=[{"content": "Another line of text."}]),
        client.memories.forget_matching(ns, query="bike", dry_run=True),
    ]
    memories = client.list(ns, "memories", limit=100).memories
    for memory in memories:
        answers.append(client.memories.get(ns, memory.id, include=["related", "documents"]))
    answers.append(client.memories.forget(ns, ids=[memories[0].id]))
    answers.append(client.documents.delete(ns, ids=["nope"]))
    for answer in answers:
        assert missing(answer) == [], type(answer).__name__
    related = [a for a in answers if type(a).__name__ == "MemoryDetails" and a.included.related.parents]
    assert related and related[0].included.related.parents[0].document is not None
