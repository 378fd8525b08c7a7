"""The v5 fuzzer's write, profile, bucket, forgetting and namespace calls, drawn from the v5 request schemas.

Documents added (alone, in batches, as uploaded files) under ids the pool remembers are then read,
patched, replaced and deleted; memory ids from lists are forgotten (by id, and by description
with and without a dry run). Each call names the statuses the spec gives its route (`STATUSES`)
and the SDK model its 2xx answer must fill (`MODELS`).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from supermemory.types import (
    BatchAddResult, DocumentRef, ForgetResult, Memory, NamespaceDeleted, NamespaceDetails, ProfileBuckets,
    ProfileResponse,
)

from .fuzzkit import Call, Served

SERVED = ("fuzz_a", "fuzz_b")  # faces_v5.NAMESPACES
# What the spec lists for each route (sections 1.2-1.8); 401 for every route (§3), 400 in either shape.
STATUSES: dict[str, frozenset[int]] = {
    "add": frozenset({200, 400, 401, 402, 403, 409}),
    "batch": frozenset({200, 400, 401, 402, 403}),
    "upload": frozenset({200, 400, 401, 402, 403, 409}),
    "patch": frozenset({200, 400, 401, 402, 403, 404, 409}),
    "replace": frozenset({200, 400, 401, 402, 403, 404, 409}),
    "patchfile": frozenset({200, 400, 401, 402, 403, 404, 409}),
    "profile": frozenset({200, 400, 401, 403}),
    "buckets": frozenset({200, 400, 401, 403, 404, 409}),
    "memory": frozenset({200, 400, 401, 403, 404}),
    "forget": frozenset({200, 400, 401, 403}),
    "forgetsemantic": frozenset({200, 400, 401, 403}),
    "namespace": frozenset({200, 400, 401, 403, 404}),
    "nspatch": frozenset({200, 400, 401, 403, 404}),
    "nsdelete": frozenset({200, 202, 400, 401, 403, 404, 409}),
}
MODELS: dict[str, Any] = {
    "add": DocumentRef, "upload": DocumentRef, "patch": DocumentRef, "replace": DocumentRef, "patchfile": DocumentRef,
    "batch": BatchAddResult, "profile": ProfileResponse, "buckets": ProfileBuckets, "memory": Memory,
    "forget": ForgetResult, "forgetsemantic": ForgetResult, "namespace": NamespaceDetails,
    "nspatch": NamespaceDetails, "nsdelete": NamespaceDeleted,
}
_WORDS = ("My bike is green.", "Tomatoes need sun.", "Alice lives in Lisbon.", "x", "Quartz drifts. " * 20)
_META_VALUES = st.one_of(st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.lists(st.text(max_size=4), max_size=2))
_BAD_META = st.sampled_from([{"a": None}, {"a": {"b": 1}}, {"a": [1]}, [], "x", {"": 1}, {"a": 1.5e400}])
_SLUG = st.sampled_from(["work", "home", "a", "x_1", "a-b"])
_BAD_SLUG = st.sampled_from(["", "Work", "-a", "a b", "é", "a" * 65, 1])


# Half the calls keep to the schema (so that they reach the handlers and write); set per call by write_call.
_CLEAN = [False]


def _maybe(valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Valid values in a clean call; else mostly valid ones, sometimes invalid ones, sometimes null."""
    return valid if _CLEAN[0] else st.one_of(valid, valid, valid, invalid, st.none())


def _doc_id(draw: st.DrawFn, served: Served, ns: str) -> str:
    """A document id the pool holds for `ns`, a new one, or an odd one."""
    seen = served.pool.pick(f"doc:{ns}", draw(st.integers(0, 10**6)))
    return draw(st.sampled_from([seen or "d0", seen or "d1", f"w{draw(st.integers(0, 40))}", "nope",
                                 "a" * 256, "x?y", "\u202e"]))


def _document(draw: st.DrawFn, served: Served, ns: str, with_id: bool = True) -> dict[str, Any]:
    """A document body per DOCUMENT_FIELDS, each field sometimes wrong, now and then a legacy key."""
    fields = {
        "supportingContext": _maybe(st.text(max_size=20), st.sampled_from(["x" * 1501, 1])),
        "metadata": _maybe(st.dictionaries(st.sampled_from(["kind", "n", "tags"]), _META_VALUES, max_size=3), _BAD_META),
        "group": _maybe(st.dictionaries(st.sampled_from(["team"]), _META_VALUES, max_size=1), _BAD_META),
        "date": _maybe(st.sampled_from(["2024-05-01T10:00:00Z", "2024-05-01"]), st.sampled_from(["yesterday", 5])),
    }
    if with_id:
        fields["id"] = _maybe(st.just(_doc_id(draw, served, ns)), st.sampled_from(["", "a/b", 7]))
    body = draw(st.fixed_dictionaries(
        {"content": _maybe(st.sampled_from(_WORDS), st.sampled_from(["", 5, ["x"]]))}, optional=fields))
    if not _CLEAN[0] and draw(st.integers(0, 9)) == 0:
        body[draw(st.sampled_from(["customId", "containerTag", "entityContext", "zzz"]))] = "x"
    return body


def _task() -> st.SearchStrategy[dict[str, Any]]:
    """taskType and dreaming, valid or not."""
    return st.fixed_dictionaries({}, optional={
        "taskType": _maybe(st.sampled_from(["memory", "superrag"]), st.just("rag")),
        "dreaming": _maybe(st.sampled_from(["dynamic", "instant"]), st.just("later"))})


def _multipart(draw: st.DrawFn, file_required: bool) -> tuple[bytes, tuple[tuple[str, str], ...]]:
    """A multipart form with a file of an odd or fitting type and the FILE_FIELDS, or a broken one."""
    boundary = "fuzzboundary7"
    parts: list[bytes] = []
    if file_required or draw(st.booleans()):
        name, ctype, data = draw(st.sampled_from([
            ("a.txt", "text/plain", b"My bike is green and I ride it."), ("a.md", "text/markdown", b"# Title\n\nbody"),
            ("a.html", "text/html", b"<p>Tomatoes <b>need</b> sun</p>"), ("a.pdf", "application/pdf", b"not a pdf"),
            ("a.png", "image/png", b"\x89PNG\r\n\x1a\n\x00\x00"), ("a.bin", "application/octet-stream", b"\x00\xff" * 8),
            ("", "text/plain", b"no file name"), ("a.txt", "text/plain", b""), ("a.txt", "x", "café".encode("latin-1"))]
            [: 3 if _CLEAN[0] else None]))
        parts.append(f'Content-Disposition: form-data; name="file"; filename="{name}"\r\nContent-Type: {ctype}\r\n\r\n'
                     .encode() + data)
    optional = {
        "supportingContext": st.sampled_from(["ctx", "x" * 1501]),
        "metadata": st.sampled_from(['{"kind": "note"}', "{", "[]", '{"a": null}', ""]),
        "group": st.sampled_from(['{"team": "a"}', "x"]),
        "fileType": st.sampled_from(["text", "pdf", "image", "video", "audio", "doc"]),
        "mimeType": st.sampled_from(["text/plain", "application/pdf", "nope", "a/b/c"]),
        "date": st.sampled_from(["2024-05-01T10:00:00Z", "never"]),
        "taskType": st.sampled_from(["memory", "superrag", "x"]),
        "id": st.just("not-a-field")}
    if _CLEAN[0]:
        optional = {"supportingContext": st.just("ctx"), "metadata": st.just('{"kind": "note"}'),
                    "fileType": st.just("text"), "mimeType": st.just("text/plain"), "taskType": st.just("memory")}
    fields = draw(st.fixed_dictionaries({}, optional=optional))
    for key, value in fields.items():
        parts.append(f'Content-Disposition: form-data; name="{key}"\r\n\r\n{value}'.encode())
    body = b"".join(b"--" + boundary.encode() + b"\r\n" + p + b"\r\n" for p in parts) + f"--{boundary}--\r\n".encode()
    ctype = draw(st.sampled_from([f"multipart/form-data; boundary={boundary}"] * 6 + [
        "multipart/form-data", "multipart/form-data; boundary=other", "application/json", "text/plain", ""]
        [: 1 if _CLEAN[0] else None]))
    if not _CLEAN[0] and draw(st.integers(0, 12)) == 0:
        body = draw(st.sampled_from([b"", b"--fuzzboundary7\r\n", body[: len(body) // 2]]))
    return body, ((("content-type", ctype),) if ctype else ())


def write_call(draw: st.DrawFn, served: Served, ns: str, headers: tuple[tuple[str, str], ...],
               encode: Any) -> Call:
    """One write, profile, bucket, memory, forgetting or namespace call (`encode` makes a JSON body, or junk)."""
    _CLEAN[0] = draw(st.booleans())
    if _CLEAN[0]:  # a served namespace, the minted key, JSON: the call reaches its handler
        encode = _json_only
        ns = draw(st.sampled_from(SERVED))
        headers = (("authorization", f"Bearer {served.facts['key']}"),)
    kind = draw(st.sampled_from(["add", "add", "batch", "upload", "patch", "replace", "patchfile", "profile",
                                 "buckets", "memory", "forget", "forgetsemantic", "namespace", "nspatch", "nsdelete"]))
    base = f"/ns/{ns}"
    doc_id = _doc_id(draw, served, ns)
    memory_id = served.pool.pick(f"memory:{ns}", draw(st.integers(0, 10**6))) or "m0"
    if kind == "add":
        return Call("POST", f"{base}/document", (), encode(draw, {**_document(draw, served, ns), **draw(_task())}),
                    headers, check=kind)
    if kind == "batch":
        documents = draw(st.lists(st.builds(lambda: None), min_size=1 if _CLEAN[0] else 0, max_size=4))
        body: Any = {"documents": [_document(draw, served, ns) for _ in documents], **draw(_task())}
        if not _CLEAN[0] and draw(st.integers(0, 9)) == 0:
            body = draw(st.sampled_from([{"documents": [{"content": "x"}] * 601}, {"documents": "x"}, {}]))
        return Call("POST", f"{base}/document/batch", (), encode(draw, body), headers, check=kind)
    if kind in ("upload", "replace", "patchfile"):
        form, content_type = _multipart(draw, file_required=kind != "patchfile")
        auth = tuple(h for h in headers if h[0] != "content-type") + content_type
        path = f"{base}/document/file" + ("" if kind == "upload" else f"/{_quote(doc_id)}")
        return Call("PATCH" if kind == "patchfile" else "POST", path, (), form, auth, check=kind)
    if kind == "patch":
        body = {k: v for k, v in _document(draw, served, ns, with_id=False).items()
                if draw(st.integers(0, 2)) or k == "zzz" or (_CLEAN[0] and k == "content")}
        return Call("PATCH", f"{base}/document/{_quote(doc_id)}", (), encode(draw, body), headers, check=kind)
    if kind == "profile":
        body = draw(st.fixed_dictionaries({}, optional={
            "buckets": _maybe(st.lists(_SLUG, max_size=3), st.lists(_BAD_SLUG, min_size=1, max_size=2)),
            "filter": st.sampled_from([{"field": "kind", "operator": "eq", "value": "note"}, {"bad": 1}]),
            **({} if _CLEAN[0] else {"q": st.just("legacy")})}))
        raw = b"" if draw(st.integers(0, 4)) == 0 else encode(draw, body)
        return Call("POST", f"{base}/profile", (), raw or None, headers, check=kind)
    if kind == "buckets":
        method = draw(st.sampled_from(["GET", "PUT", "DELETE"]))
        body = None
        if method == "PUT":
            body = encode(draw, {"buckets": draw(_maybe(st.dictionaries(_SLUG, st.text(max_size=10), min_size=1,
                                                                         max_size=3),
                                                         st.sampled_from([{}, {"Bad": "x"}, {"a": 1}, []])))})
        elif method == "DELETE":
            body = encode(draw, {"buckets": draw(_maybe(st.lists(_SLUG, min_size=1, max_size=3, unique=True),
                                                        st.sampled_from([[], ["a", "a"], ["Bad"]])))})
        return Call(method, f"{base}/profile/buckets", (), body, headers, check=kind)
    if kind == "memory":
        params = draw(st.lists(st.sampled_from([("include", "related"), ("include", "documents"),
                                                ("include", "bogus"), ("relatedLimit", "5"),
                                                ("relatedLimit", "0"), ("relatedLimit", "x")]), max_size=3))
        mid = draw(st.sampled_from([memory_id, memory_id, "nope", "a" * 300]))
        return Call("GET", f"{base}/memories/{_quote(mid)}", tuple(params), None, headers, check=kind)
    if kind == "forget":
        ids = draw(_maybe(st.lists(st.sampled_from([memory_id, "nope", "m1"]), min_size=1, max_size=3),
                          st.sampled_from([[], [""], ["x"] * 501, "m0", [1]])))
        extra = {"reason": "legacy"} if not _CLEAN[0] and draw(st.integers(0, 9)) == 0 else {}
        return Call("DELETE", f"{base}/memories", (), encode(draw, {"ids": ids, **extra}), headers, check=kind)
    if kind == "forgetsemantic":
        body = draw(st.fixed_dictionaries({
            "query": _maybe(st.sampled_from(["bike", "tomatoes", "Lisbon"]), st.sampled_from(["", "x" * 2001, 3])),
            "dryRun": _maybe(st.sampled_from([True, True, True, False]), st.sampled_from(["true", 1]))},
            optional={} if _CLEAN[0] else {"maxForget": st.just(5)}))
        body = {k: v for k, v in body.items() if v is not None or draw(st.booleans())}
        return Call("DELETE", f"{base}/memories/semantic", (), encode(draw, body), headers, check=kind)
    if kind == "namespace":
        return Call("GET", base, (), None, headers, check=kind)
    if kind == "nspatch":
        body = draw(st.sampled_from([{"supportingContext": "About gardens."}, {"supportingContext": None}, {},
                                     {"supportingContext": "x" * 1501}, {"supportingContext": 1}, {"name": "x"}]))
        return Call("PATCH", base, (), encode(draw, body), headers, check=kind)
    # Deleting: only namespaces of its own, so that the served documents stay for the other calls.
    target = draw(st.sampled_from(["fuzz_gone", "fuzz_gone", "fuzz_never", ns]))
    params = draw(st.sampled_from([(), (), (("moveTo", "fuzz_moved"),), (("moveTo", target),), (("moveTo", "bad name"),)]))
    if target == ns and not params:
        target = "fuzz_gone"  # the served namespaces are moved (202) at most, never emptied
    return Call("DELETE", f"/ns/{target}", params, None, headers, check=kind)


def _json_only(draw: st.DrawFn, body: Any) -> bytes:
    """The body as JSON (a clean call's)."""
    return json.dumps(body).encode()


def remember_write(served: Served, call: Call, body: Any) -> None:
    """Keep document ids from write answers and memory ids from lists and searches (write, read, forget)."""
    ns = call.path.split("/")[2] if call.path.startswith("/ns/") else ""
    if not isinstance(body, dict):
        return
    if call.check in ("add", "upload", "patch", "replace", "patchfile") and isinstance(body.get("id"), str):
        served.pool.add(f"doc:{ns}", body["id"])
    for result in body.get("results") or [] if call.check == "batch" else []:
        if isinstance(result, dict) and isinstance(result.get("id"), str):
            served.pool.add(f"doc:{ns}", result["id"])
    for memory in body.get("memories") or [] if isinstance(body.get("memories"), list) else []:
        if isinstance(memory, dict) and isinstance(memory.get("id"), str):
            served.pool.add(f"memory:{ns}", memory["id"])
    for result in body.get("results") or [] if call.check == "search" else []:
        if isinstance(result, dict) and isinstance(result.get("memory"), str) and isinstance(result.get("id"), str):
            served.pool.add(f"memory:{ns}", result["id"])


def _quote(value: str) -> str:
    """A path segment as a client would send it."""
    from urllib.parse import quote

    return quote(value.encode("utf-8", "surrogatepass"), safe="")


__all__ = ["MODELS", "STATUSES", "json", "remember_write", "write_call"]
