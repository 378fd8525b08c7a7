"""The generic lexicon validator: parameters in and responses out, for every bundled query."""

import pytest
from starlette.datastructures import QueryParams

from engram_index.engram.api.lexicon import Lexicons, nsids
from engram_index.errors import InvalidInput

LEX = Lexicons.bundled()
SEARCH = "garden.engram.searchMemories"


def params(nsid: str, qs: str) -> dict:
    return LEX.params(nsid, QueryParams(qs))


def test_every_query_of_the_protocol_is_bundled() -> None:
    assert set(nsids(LEX, "query")) == {
        "garden.engram.searchMemories", "garden.engram.listMemories", "garden.engram.getMemory",
        "garden.engram.getSpaceStatus", "garden.engram.getMemoryGraph", "garden.engram.describeService",
    }
    assert set(nsids(LEX, "procedure")) == {"garden.engram.warmSpace", "garden.engram.registerSpace"}
    assert set(nsids(LEX, "record")) == {"garden.engram.memory", "garden.engram.config"}


def test_search_parameters_follow_seed_000() -> None:
    spec = LEX.main(SEARCH)["parameters"]["properties"]
    assert spec["q"]["maxLength"] == 4000 and spec["vector"]["maxLength"] == 43000
    assert spec["tags"]["maxLength"] == 16 and (spec["limit"]["minimum"], spec["limit"]["maximum"]) == (1, 50)
    assert [e["name"] for e in LEX.main(SEARCH)["errors"]] == [
        "UnknownSpace", "NoModel", "ModelMismatch", "ModelNotHosted", "TextSearchNotAllowed",
        "KeywordIndexBuilding", "EmbedderBusy", "IndexLoading", "RateLimitExceeded",
    ]


def test_defaults_types_and_repeated_parameters_are_parsed() -> None:
    got = params(SEARCH, "space=s&tags=a&tags=b&since=2026-01-01T00:00:00Z")
    assert got == {"space": "s", "tags": ["a", "b"], "since": "2026-01-01T00:00:00Z", "limit": 10}
    assert params("garden.engram.listMemories", "space=at://did:plc:x/space/t/k")["limit"] == 25


@pytest.mark.parametrize(
    "nsid, qs, message",
    [
        (SEARCH, "", "space is required"),
        (SEARCH, "space=s&limit=0", "at least 1"),
        (SEARCH, "space=s&limit=51", "at most 50"),
        (SEARCH, "space=s&limit=1.5", "integer"),
        (SEARCH, "space=s&mode=fast", "one of hybrid, vector, keyword"),
        (SEARCH, "space=s&author=bob", "valid did"),
        (SEARCH, "space=s&since=2026-01-01", "valid datetime"),
        (SEARCH, "space=s&q=a&q=b", "more than once"),
        (SEARCH, "space=s&" + "&".join(f"tags=t{i}" for i in range(17)), "at most 16"),
        ("garden.engram.getMemoryGraph", "space=at://did:plc:x/space/t/k&neighbors=9", "at most 8"),
        ("garden.engram.listMemories", "space=at://did:plc:x/space/t/k&author=bob", "valid did"),
    ],
)
def test_bad_parameters_are_refused_with_a_reason(nsid: str, qs: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        params(nsid, qs)


def test_string_limits_count_utf8_bytes_as_lexicons_do() -> None:
    params(SEARCH, "space=s&q=" + "x" * 4000)
    with pytest.raises(InvalidInput, match="4000 bytes"):
        params(SEARCH, "space=s&q=" + "é" * 2001)


def test_output_checks_find_missing_fields_bad_types_and_bounds_through_refs() -> None:
    good = {"memories": [{"uri": "at://did:plc:a/x", "cid": "bafyreiabc", "author": "did:plc:a", "text": "t",
                          "tags": [], "createdAt": "2026-01-01T00:00:00.000Z", "indexedAt": "2026-01-01T00:00:00.000Z",
                          "similarity": 1000, "match": {"fusion": "convex", "vector": {"rank": 1, "similarity": 5}}}],
            "mode": "hybrid"}
    assert LEX.output_errors(SEARCH, good) == []
    bad = {"memories": [{**good["memories"][0], "similarity": 1001, "tags": "x", "author": "bob",
                         "match": {"vector": {"rank": 0}}}]}
    errors = LEX.output_errors(SEARCH, bad)
    assert any("similarity" in e and "1000" in e for e in errors)
    assert any(e.endswith("tags: not an array") for e in errors)
    assert any("author" in e for e in errors)
    assert any("vector.similarity: required" in e for e in errors)
    assert any("rank" in e for e in errors)


def test_our_extensions_of_the_published_lexicons_are_optional_and_marked() -> None:
    # The published lexicons are served as published; what we add is an optional property marked "Extension".
    def objects(node: object) -> list[dict]:
        found = []
        if isinstance(node, dict):
            if node.get("type") == "object":
                found.append(node)
            for value in node.values():
                found += objects(value)
        elif isinstance(node, list):
            for value in node:
                found += objects(value)
        return found

    marked = []
    for nsid, doc in LEX.docs.items():
        for obj in objects(doc["defs"]):
            for name, prop in obj.get("properties", {}).items():
                if prop.get("description", "").startswith("Extension"):
                    assert name not in obj.get("required", []), (nsid, name)
                    marked.append((nsid, name))
    assert ("garden.engram.getSpaceStatus", "access") in marked and ("garden.engram.describeService", "version") in marked
    status = LEX.main("garden.engram.getSpaceStatus")["output"]["schema"]
    assert status["required"] == ["memories", "skipped"]
    assert status["properties"]["building"] == {"type": "ref", "ref": "garden.engram.defs#model"}
    assert LEX.main("garden.engram.describeService")["output"]["schema"]["required"] == ["did", "registration"]
