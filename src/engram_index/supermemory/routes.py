"""Every v5 route: what each does with its parsed call, and the route table app.py mounts."""

from __future__ import annotations

from typing import Any

from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from engram_index.supermemory import buckets, documents, memories, models, namespaces, search
from engram_index.supermemory.errors import invalid
from engram_index.supermemory.http import EXPLAIN_HEADER, Call, endpoint
from engram_index.supermemory.sources import refusal


def add(call: Call) -> dict[str, Any]:
    """POST /ns/{ns}/document."""
    doc_id, status = documents.add(call.face, call.ns, call.body, call.body.get("taskType"))
    return {"id": doc_id, "status": status}


def batch(call: Call) -> dict[str, Any]:
    """POST /ns/{ns}/document/batch."""
    return documents.batch(call.face, call.ns, call.body)


def _file(call: Call) -> tuple[bytes, str, str] | None:
    """The uploaded file, refused early when its type cannot become text."""
    if call.file is None:
        return None
    data, name, media = call.file
    if len(data) > documents.MAX_FILE_BYTES:
        raise invalid(f"files are at most {documents.MAX_FILE_BYTES // (1024 * 1024)} MB", "file")
    why = refusal(data, name, call.body.get("mimeType") or media)
    if why is not None:
        raise invalid(f"unsupported file {name!r}: {why} (send text, Markdown, HTML or PDF)", "file")
    return data, name, call.body.get("mimeType") or media


def _form_item(call: Call) -> dict[str, Any]:
    """A multipart form's fields as a document item."""
    item = {k: v for k, v in call.body.items() if k in ("supportingContext", "date")}
    for name in ("metadata", "group"):
        parsed = models.json_metadata(call.body.get(name), name)
        if parsed is not None:
            item[name] = parsed
    return item


def upload(call: Call) -> dict[str, Any]:
    """POST /ns/{ns}/document/file."""
    doc_id, status = documents.add(call.face, call.ns, _form_item(call), call.body.get("taskType"),
                                   file=_file(call), file_type=call.body.get("fileType"))
    return {"id": doc_id, "status": status}


def replace_file(call: Call) -> dict[str, Any]:
    """POST /ns/{ns}/document/file/{id}: a full replacement (omitted fields are cleared)."""
    body = _form_item(call)
    if "taskType" in call.body:
        body["taskType"] = call.body["taskType"]
    doc_id, status = documents.patch(call.face, call.ns, call.path["id"], body, file=_file(call), replace=True,
                                     file_type=call.body.get("fileType"))
    return {"id": doc_id, "status": status}


def patch_file(call: Call) -> dict[str, Any]:
    """PATCH /ns/{ns}/document/file/{id}: a partial update (metadata merges key by key)."""
    body = _form_item(call)
    doc_id, status = documents.patch(call.face, call.ns, call.path["id"], body, merge_metadata=True,
                                     file=_file(call), file_type=call.body.get("fileType"))
    return {"id": doc_id, "status": status}


def get_document(call: Call) -> dict[str, Any]:
    """GET /ns/{ns}/document/{id}."""
    return documents.get(call.face, call.ns, call.path["id"], call.query.get("include", []))


def patch_document(call: Call) -> dict[str, Any]:
    """PATCH /ns/{ns}/document/{id}."""
    doc_id, status = documents.patch(call.face, call.ns, call.path["id"], call.body)
    return {"id": doc_id, "status": status}


def delete_documents(call: Call) -> dict[str, Any]:
    """DELETE /ns/{ns}/document."""
    return documents.delete(call.face, call.ns, call.body["ids"])


def start_search(call: Call) -> bool:
    """On the event loop: the query's embedding set going before the hop to a thread (the longest step of
    a search: what needs no vector, the keyword passes included, runs meanwhile); whether the search runs
    whole on the search pool, as one that waits on nothing slow does. A rewrite or a rerank may wait
    seconds on an LLM, and over a shared PostgreSQL store each of the face's reads is a round trip an
    outage can hold as long: no slot of the pool every face searches on should wait on either."""
    call.extra["vector"] = call.face.start_embedding(call.body["query"])
    return (call.body.get("rerank", "none") == "none" and not call.body.get("rewriteQuery")
            and call.face.collections.shared_store() is None)


def run_search(call: Call) -> dict[str, Any]:
    """POST /ns/{ns}/search (X-Engram-Explain: true adds why each result matched)."""
    explain = call.headers.get(EXPLAIN_HEADER, "").strip().lower() in ("1", "true", "yes")
    return search.search(call.face, call.ns, call.body, explain, call.extra.get("vector"))


def profile(call: Call) -> Any:
    """POST /ns/{ns}/profile (Accept: text/markdown for Markdown)."""
    result = memories.profile(call.face, call.ns, call.body)
    if "text/markdown" in call.headers.get("accept", ""):
        return PlainTextResponse(memories.profile_markdown(result), media_type="text/markdown")
    return result


def get_buckets(call: Call) -> dict[str, Any]:
    """GET /ns/{ns}/profile/buckets."""
    return {"buckets": buckets.effective_buckets(call.face, call.ns)}


def put_buckets(call: Call) -> dict[str, Any]:
    """PUT /ns/{ns}/profile/buckets."""
    return {"buckets": buckets.put_buckets(call.face, call.ns, call.body["buckets"])}


def delete_buckets(call: Call) -> dict[str, Any]:
    """DELETE /ns/{ns}/profile/buckets."""
    return {"buckets": buckets.delete_buckets(call.face, call.ns, call.body["buckets"])}


def list_items(call: Call) -> dict[str, Any]:
    """POST /ns/{ns}/list/{type}."""
    kind = call.path["type"]
    if kind not in ("documents", "chunks", "memories"):
        raise invalid("type must be documents, chunks or memories", "path", "type")
    return memories.list_items(call.face, call.ns, kind, call.query, call.body)


def memory_counts(call: Call) -> dict[str, Any]:
    """POST /ns/{ns}/list/documents/memory-counts."""
    return documents.memory_counts(call.face, call.ns, call.body["ids"])


def get_memory(call: Call) -> dict[str, Any]:
    """GET /ns/{ns}/memories/{id}."""
    return memories.get_memory(call.face, call.ns, call.path["id"], call.query.get("include", []),
                               call.query.get("relatedLimit", 10))


def forget(call: Call) -> dict[str, Any]:
    """DELETE /ns/{ns}/memories."""
    return memories.forget(call.face, call.ns, call.body["ids"])


def forget_semantic(call: Call) -> dict[str, Any]:
    """DELETE /ns/{ns}/memories/semantic."""
    return memories.forget_semantic(call.face, call.ns, call.body["query"], call.body["dryRun"])


def list_namespaces(call: Call) -> dict[str, Any]:
    """GET /ns and GET /namespaces."""
    return namespaces.list_namespaces(call.face, call.query, call.reaches)


def get_namespace(call: Call) -> dict[str, Any]:
    """GET /ns/{ns}."""
    return namespaces.get_namespace(call.face, call.ns)


def patch_namespace(call: Call) -> dict[str, Any]:
    """PATCH /ns/{ns}."""
    return namespaces.patch_namespace(call.face, call.ns, call.body["supportingContext"])


def delete_namespace(call: Call) -> tuple[int, dict[str, Any]]:
    """DELETE /ns/{ns}[?moveTo=]."""
    return namespaces.delete_namespace(call.face, call.ns, call.query.get("moveTo"), call.reaches)


def get_organization(call: Call) -> dict[str, Any]:
    """GET /organization."""
    return namespaces.get_organization(call.face, call.reaches)


def patch_organization(call: Call) -> dict[str, Any]:
    """PATCH /organization."""
    return namespaces.patch_organization(call.face, call.body["organizationalContext"], call.admin, call.reaches)


def feedback(call: Call) -> dict[str, Any]:
    """POST /feedback."""
    return namespaces.feedback(call.face, call.key.id, call.body)


def _r(path: str, methods: list[str], *args: Any, **kwargs: Any) -> Route:
    """One route of the table, taking exactly its methods.

    HEAD, which Starlette adds beside GET, is no v5 route's: dropped, it is answered 405 with Allow
    where the path has a route (HEAD /ns/x/document/batch is not a read of document "batch").
    """
    route = Route(path, endpoint(*args, **kwargs), methods=methods)
    assert route.methods is not None
    route.methods.discard("HEAD")
    return route


NS = "/ns/{namespace}"
MULTI = frozenset({"include"})


def routes() -> list[Route]:
    """Every route of the face (more specific paths first)."""
    doc_fields = models.FILE_FIELDS
    assert doc_fields
    return [
        _r("/ns", ["GET"], list_namespaces, query=models.NAMESPACES_QUERY),
        _r("/namespaces", ["GET"], list_namespaces, query=models.NAMESPACES_QUERY),
        _r("/organization", ["GET"], get_organization),
        _r("/organization", ["PATCH"], patch_organization, body=models.ORGANIZATION_PATCH),
        _r("/feedback", ["POST"], feedback, body=models.FEEDBACK),
        _r(f"{NS}/document/batch", ["POST"], batch, body=models.BATCH),
        _r(f"{NS}/document/file", ["POST"], upload, multipart=True),
        _r(f"{NS}/document/file/{{id}}", ["POST"], replace_file, multipart=True),
        _r(f"{NS}/document/file/{{id}}", ["PATCH"], patch_file, multipart=False),
        _r(f"{NS}/document/{{id}}", ["GET"], get_document, query=models.DOCUMENT_QUERY, repeatable=MULTI),
        _r(f"{NS}/document/{{id}}", ["PATCH"], patch_document, body=models.PATCH),
        _r(f"{NS}/document", ["POST"], add, body=models.ADD),
        _r(f"{NS}/document", ["DELETE"], delete_documents, body=models.DELETE_DOCUMENTS),
        _r(f"{NS}/search", ["POST"], run_search, body=models.SEARCH, prepare=start_search),
        _r(f"{NS}/profile/buckets", ["GET"], get_buckets),
        _r(f"{NS}/profile/buckets", ["PUT"], put_buckets, body=models.BUCKETS_PUT),
        _r(f"{NS}/profile/buckets", ["DELETE"], delete_buckets, body=models.BUCKETS_DELETE),
        _r(f"{NS}/profile", ["POST"], profile, body=models.PROFILE, optional_body=True),
        _r(f"{NS}/list/documents/memory-counts", ["POST"], memory_counts, body=models.MEMORY_COUNTS),
        _r(f"{NS}/list/{{type}}", ["POST"], list_items, body=models.LIST, query=models.LIST_QUERY,
           optional_body=True),
        _r(f"{NS}/memories/semantic", ["DELETE"], forget_semantic, body=models.FORGET_SEMANTIC),
        _r(f"{NS}/memories/{{id}}", ["GET"], get_memory, query=models.MEMORY_QUERY, repeatable=MULTI),
        _r(f"{NS}/memories", ["DELETE"], forget, body=models.FORGET),
        _r(NS, ["GET"], get_namespace),
        _r(NS, ["PATCH"], patch_namespace, body=models.NAMESPACE_PATCH),
        _r(NS, ["DELETE"], delete_namespace, query=models.NAMESPACE_DELETE_QUERY),
    ]


__all__ = ["Response", "routes"]
