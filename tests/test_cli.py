"""The command line: import with line-numbered errors, idempotent re-import, search with explanations."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from engram_index.cli import main
from engram_index.records import encode_query_vector

SPACE = "at://did:plc:cli234cli234cli234cli234/space/garden.engram.space/notes"
MODEL = ["--model", "m", "--model-digest", "sha256:00", "--dims", "4"]


def embedding(values: list[float]) -> dict:
    raw = np.array(values, "<f2").tobytes()
    return {"model": "m", "modelDigest": "sha256:00", "dims": 4, "encoding": "f16le",
            "vector": {"$bytes": base64.b64encode(raw).rstrip(b"=").decode()}}


def write_jsonl(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


@pytest.fixture
def memories(tmp_path: Path) -> Path:
    good = lambda text, vec, **kw: {"text": text, "createdAt": "2026-03-01T10:00:00Z", "embedding": embedding(vec), **kw}
    return write_jsonl(tmp_path / "m.jsonl", [
        good("The HTTPServer timed out after 30 seconds", [1, 0, 0, 0], tags=["infra"]),
        "{not json",
        good("Grandma's pasta recipe uses San Marzano tomatoes", [0, 1, 0, 0], tags=["food"], source="notebook"),
        {"text": "no embedding", "createdAt": "2026-03-01T10:00:00Z"},
        good("café naïve résumé — accents everywhere", [0, 0, 1, 0], author="did:plc:other", rkey="3kabc"),
        good("another vector model", [0, 0, 0, 1]) | {"embedding": embedding([0, 0, 0, 1]) | {"model": "x"}},
        "[1, 2]",
    ])


def run(*args: str) -> object:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


def test_import_reports_bad_lines_by_number_and_imports_the_rest(memories: Path, tmp_path: Path) -> None:
    result = run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    assert result.exit_code == 0, result.output
    assert "line 2: skipped: invalid JSON" in result.output
    assert "line 4: skipped: embedding is required" in result.output
    assert "line 7: skipped: a line must hold one JSON object" in result.output
    assert "1 vectors not indexed: model mismatch" in result.output
    assert "7 lines: 4 written, 0 unchanged, 3 skipped" in result.output


def test_reimporting_the_same_file_changes_nothing(memories: Path, tmp_path: Path) -> None:
    run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    again = run("import", SPACE, str(memories), "--data", str(tmp_path / "d"))
    assert "0 written, 4 unchanged" in again.output


def test_keyword_search_prints_results_with_their_explanation(memories: Path, tmp_path: Path) -> None:
    run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    result = run("search", SPACE, "http server", "--data", str(tmp_path / "d"), "--json")
    out = json.loads(result.stdout)
    assert out["mode"] == "keyword"
    top = out["memories"][0]
    assert top["text"].startswith("The HTTPServer")
    assert "similarity" not in top
    terms = top["match"]["keyword"]["terms"]
    assert {"term": "http", "kind": "exact", "field": "text"} in terms or any(t["kind"] == "part" for t in terms)


def test_hybrid_search_with_a_vector_ranks_and_explains_both_ways(memories: Path, tmp_path: Path) -> None:
    run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    vec = encode_query_vector(np.array([0, 1, 0, 0], np.float32))
    result = run("search", SPACE, "tomatoes", "--vector", vec, "--data", str(tmp_path / "d"), "--json")
    out = json.loads(result.stdout)
    assert out["mode"] == "hybrid"
    top = out["memories"][0]
    assert "pasta" in top["text"] and top["similarity"] == 1000
    assert top["match"]["vector"] == {"rank": 1, "similarity": 1000}
    assert top["match"]["keyword"]["rank"] == 1 and top["match"]["fusion"] == "convex"


def test_filters_apply_on_the_command_line(memories: Path, tmp_path: Path) -> None:
    run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    result = run("search", SPACE, "accents tomatoes http", "--data", str(tmp_path / "d"), "--json",
                 "--author", "did:plc:other")
    assert [m["author"] for m in json.loads(result.stdout)["memories"]] == ["did:plc:other"]


def test_human_output_shows_the_snippet_and_terms(memories: Path, tmp_path: Path) -> None:
    run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    result = run("search", SPACE, "résumé", "--data", str(tmp_path / "d"))
    assert "1 results" in result.output and "résumé" in result.output and "exact/text" in result.output


def test_search_of_an_unknown_space_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["search", SPACE, "x", "--data", str(tmp_path / "d")])
    assert result.exit_code == 1 and "space not indexed here" in result.output


def test_import_needs_all_three_model_options_together(memories: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["import", SPACE, str(memories), "--data", str(tmp_path), "--model", "m"])
    assert result.exit_code == 2 and "go together" in result.output
