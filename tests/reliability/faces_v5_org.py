"""The v5 fuzzer's organization, feedback and namespace-list calls, drawn from the v5 request schemas.

`GET /ns` and `GET /namespaces` (page, limit, q), `GET`/`PATCH /organization` and `POST /feedback`,
half of them clean, under the admin key, a key scoped to one namespace, or none. Besides the
statuses the spec gives each route (`STATUSES`) and the SDK model each 2xx fills (`MODELS`), the
answers are checked against what was asked: a scoped key lists only its namespace and never changes
the organization, a PATCH answers the context it set, a page holds at most `limit` namespaces.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import strategies as st
from supermemory.feedback.types import PostFeedbackResponse
from supermemory.types import NamespaceList, Organization

from .fuzzkit import Call, Served

SCOPED_NAMESPACE = "fuzz_a"  # what the scoped key (faces_v5.serve_v5) reaches
# The spec's statuses (§1.8, §3) and the SDK's raw clients (feedback: 429 for its daily count).
STATUSES: dict[str, frozenset[int]] = {
    "nslist": frozenset({200, 400, 401, 403}),
    "nslist-scoped": frozenset({200, 400, 401, 403}),
    "org": frozenset({200, 400, 401, 403}),
    "org-scoped": frozenset({200, 400, 401, 403}),
    "orgpatch": frozenset({200, 400, 401, 403}),
    "orgpatch-scoped": frozenset({400, 401, 403}),  # only an admin key changes the organization
    "feedback": frozenset({200, 400, 401, 403, 429}),
}
MODELS: dict[str, Any] = {"nslist": NamespaceList, "nslist-scoped": NamespaceList, "org": Organization,
                          "org-scoped": Organization, "orgpatch": Organization, "orgpatch-scoped": Organization,
                          "feedback": PostFeedbackResponse}
FEEDBACK_PER_DAY = 20  # supermemory.namespaces.FEEDBACK_PER_DAY, as the SDK's `remaining` counts down
_CONTEXTS = ("We are a gardening co-op.", "Notes of a compiler team; Alice leads it.", "x" * 10000, "é 日本")
_FEEDBACK_TYPES = ("bug", "feature_request", "docs", "other")


def _auth(draw: st.DrawFn, served: Served, clean: bool) -> tuple[tuple[tuple[str, str], ...], bool]:
    """The admin key, the scoped key, or (unclean) none or a wrong one; and whether it is the scoped key."""
    keys = [served.facts["key"]] * 3 + [served.facts["scoped"]]
    if not clean:
        keys += ["", "nope"]
    key = draw(st.sampled_from(keys))
    headers = (("authorization", f"Bearer {key}"),) if key else ()
    return headers, key == served.facts["scoped"]


def _namespace_list(draw: st.DrawFn, clean: bool) -> tuple[tuple[str, str], ...]:
    """page, limit and q, each in its bounds (clean) or not, sometimes repeated or unknown."""
    if clean:
        params = draw(st.fixed_dictionaries({}, optional={
            "page": st.integers(1, 3).map(str), "limit": st.sampled_from(["1", "2", "10", "100"]),
            "q": st.sampled_from(["", "fuzz", "FUZZ_A", "_b", "zzz", "é"])}))
        return tuple(params.items())
    params = draw(st.fixed_dictionaries({}, optional={
        "page": st.sampled_from(["1", "0", "-1", "x", " 1", "1000001", "1.5", "", "١"]),
        "limit": st.sampled_from(["1", "100", "101", "0", "+5", "1_0", "１０"]),
        "q": st.sampled_from(["fuzz", "x" * 101, "\x00", "%", "_"]) | st.text(max_size=10),
        "zzz": st.just("1"), "containerTags": st.just("fuzz_a")}))
    extra = (("page", "2"),) if draw(st.integers(0, 9)) == 0 else ()  # a repeated page
    return tuple(params.items()) + extra


def _organization_body(draw: st.DrawFn, clean: bool) -> Any:
    """An organization PATCH: a non-empty context or null (clean), or a body the schema refuses."""
    good = st.fixed_dictionaries({"organizationalContext": st.sampled_from(_CONTEXTS) | st.none()})
    if clean:
        return draw(good)
    return draw(good | st.sampled_from([
        {}, {"organizationalContext": ""}, {"organizationalContext": "x" * 10001}, {"organizationalContext": 1},
        {"organizationalContext": ["x"]}, {"organizationalContext": "x", "extra": 1}, {"filterPrompt": "x"},
        {"organizationalContext": {"text": "x"}}, [], "x", None]))


def _feedback_body(draw: st.DrawFn, clean: bool) -> Any:
    """A feedback body per the FEEDBACK schema; unclean ones miss, overflow or mistype a field."""
    optional = {"endpoint": st.sampled_from(["/ns/fuzz_a/search", ""]), "requestId": st.just("req_1"),
                "expected": st.just("a result"), "actual": st.just("none"), "client": st.just("fuzz/1.0"),
                "contactEmail": st.just("a@example.org")}
    body = draw(st.fixed_dictionaries({"type": st.sampled_from(_FEEDBACK_TYPES),
                                       "title": st.sampled_from(["Search misses", "t", "x" * 200]),
                                       "description": st.sampled_from(["It found nothing.", "d" * 10000])},
                                      optional=optional))
    if clean:
        return body
    broken = draw(st.sampled_from([
        ("type", "bug report"), ("type", None), ("title", ""), ("title", "x" * 201), ("description", ""),
        ("description", "d" * 10001), ("endpoint", "e" * 501), ("requestId", 5), ("contactEmail", "c" * 321),
        ("severity", "high"), ("title", None), ("expected", ["x"])]))
    if draw(st.integers(0, 4)) == 0:
        return {k: v for k, v in body.items() if k != draw(st.sampled_from(["type", "title", "description"]))}
    return {**body, broken[0]: broken[1]}


def org_call(draw: st.DrawFn, served: Served, encode: Any) -> Call:
    """One namespace-list, organization or feedback call (`encode` makes a JSON body, or junk)."""
    clean = draw(st.booleans())
    headers, scoped = _auth(draw, served, clean)
    suffix = "-scoped" if scoped else ""
    kind = draw(st.sampled_from(["nslist", "nslist", "org", "orgpatch", "feedback", "method"]))
    if kind == "nslist":
        path = draw(st.sampled_from(["/ns", "/namespaces"]))
        return Call("GET", path, _namespace_list(draw, clean), None, headers, check=f"nslist{suffix}")
    if kind == "org":
        params = () if clean else draw(st.sampled_from([(), (("zzz", "1"),), (("page", "2"),)]))
        return Call("GET", "/organization", params, None, headers, check=f"org{suffix}")
    if kind == "orgpatch":
        raw = json.dumps(_organization_body(draw, clean)).encode() if clean else encode(
            draw, _organization_body(draw, clean))
        return Call("PATCH", "/organization", (), raw, headers, check=f"orgpatch{suffix}")
    if kind == "feedback":
        raw = json.dumps(_feedback_body(draw, clean)).encode() if clean else encode(draw, _feedback_body(draw, clean))
        return Call("POST", "/feedback", (), raw, headers, check="feedback")
    method, path = draw(st.sampled_from([("POST", "/organization"), ("DELETE", "/organization"), ("PUT", "/organization"),
                                         ("GET", "/feedback"), ("DELETE", "/feedback"), ("POST", "/namespaces"),
                                         ("POST", "/ns"), ("DELETE", "/namespaces")]))
    return Call(method, path, (), None, headers, check="method")


def _loads(raw: bytes | None) -> Any:
    """A sent body as JSON, or None when it is not JSON."""
    try:
        return json.loads(raw or b"")
    except ValueError:
        return None


def org_output_errors(call: Call, body: dict[str, Any]) -> list[str]:
    """What a 2xx of these routes says that it must not, beyond the SDK model's required fields."""
    problems: list[str] = []
    if call.check.startswith("nslist"):
        rows = body.get("namespaces")
        params = dict(call.params)
        for name, top in (("page", 1_000_000), ("limit", 100)):
            value = params.get(name, "1")
            if not re.fullmatch(r"[0-9]{1,7}", value) or not 1 <= int(value) <= top:
                problems.append(f"{name}={value!r} was accepted")
        if len(params.get("q", "")) > 100:
            problems.append("a q over 100 characters was accepted")
        limit = int(params["limit"]) if re.fullmatch(r"[0-9]{1,7}", params.get("limit", "")) else 10
        if not isinstance(rows, list) or len(rows) > limit:
            problems.append(f"more than limit={limit} namespaces on a page")
        for row in rows if isinstance(rows, list) else []:
            name = row.get("namespace") if isinstance(row, dict) else None
            if call.check == "nslist-scoped" and name != SCOPED_NAMESPACE:
                problems.append(f"a key scoped to {SCOPED_NAMESPACE} lists {str(name)[:40]!r}")
            if isinstance(name, str) and params.get("q", "").casefold() not in name.casefold():
                problems.append(f"{name!r} does not hold q={params.get('q')!r}")
            for count in ("documentCount", "memoryCount"):
                if not isinstance(row, dict) or not isinstance(row.get(count), int) or row[count] < 0:
                    problems.append(f"{count} is not a count")
        pagination = body.get("pagination")
        if not isinstance(pagination, dict) or not isinstance(pagination.get("totalItems"), int):
            problems.append("no pagination.totalItems")
    elif call.check.startswith("org"):
        count = body.get("namespaceCount")
        if call.check.endswith("-scoped") and (not isinstance(count, int) or count > 1):
            problems.append(f"a key scoped to one namespace counts {count!r}")
        if call.check == "orgpatch-scoped":
            problems.append("a key scoped to a namespace changed the organization")
        if call.check == "orgpatch":
            sent = _loads(call.body)
            value = sent.get("organizationalContext", 0) if isinstance(sent, dict) and set(sent) == {
                "organizationalContext"} else 0
            if not (value is None or isinstance(value, str) and 1 <= len(value) <= 10000):
                problems.append("a PATCH body the schema refuses was accepted")
            elif body.get("organizationalContext") != value:
                problems.append("the PATCH did not answer the context it set")
    elif call.check == "feedback":
        remaining, fid = body.get("remaining"), body.get("id")
        if not isinstance(remaining, (int, float)) or not 0 <= remaining < FEEDBACK_PER_DAY:
            problems.append(f"remaining {remaining!r} is not in 0..{FEEDBACK_PER_DAY - 1}")
        if not isinstance(fid, str) or not fid:
            problems.append("no feedback id")
    return problems


__all__ = ["MODELS", "STATUSES", "org_call", "org_output_errors"]
