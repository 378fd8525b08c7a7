"""The command line: import with line-numbered errors, idempotent re-import, search with explanations."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from engram_index.cli import main
from engram_index.engram.records import encode_query_vector

pytestmark = pytest.mark.long(20)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

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


def test_search_of_an_unknown_space_is_a_clear_error(memories: Path, tmp_path: Path) -> None:
    run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    other = SPACE.replace("/notes", "/other")
    result = CliRunner().invoke(main, ["search", other, "x", "--data", str(tmp_path / "d")])
    assert result.exit_code == 1 and "space not indexed here" in result.output


@pytest.mark.parametrize("command", [["search", SPACE, "x"], ["spaces", "list"]])
def test_a_read_command_on_a_missing_data_directory_says_so_and_creates_nothing(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "typo"
    result = CliRunner().invoke(main, [*command, "--data", str(missing)])
    assert result.exit_code == 1 and f"the data directory {missing} does not exist" in result.output
    assert not missing.exists()


def test_a_malformed_space_uri_is_reported_as_malformed_not_as_unindexed(memories: Path, tmp_path: Path) -> None:
    run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    result = CliRunner().invoke(main, ["search", "at://did:plc:x/notes", "x", "--data", str(tmp_path / "d")])
    assert result.exit_code == 1 and "not a space URI" in result.output and "not indexed" not in result.output


@pytest.mark.parametrize("owner_loaded", [True, False], ids=["keyword index current on disk", "never loaded"])
def test_search_runs_beside_the_process_that_owns_the_data_directory(
    memories: Path, tmp_path: Path, owner_loaded: bool
) -> None:
    from engram_index.collections import Collections
    from engram_index.engine.types import Document
    from engram_index.store.sqlite import StoredDocument

    data = tmp_path / "d"
    run("import", SPACE, str(memories), "--data", str(data), *MODEL)
    owner = Collections(data)  # as a running service holds it: the directory's lock, writing
    try:
        if owner_loaded:
            owner.index(SPACE)  # as the service loads its spaces at start
        owner.write(SPACE, [StoredDocument(Document(id=f"{SPACE}/did:plc:w/garden.engram.memory/new", author="did:plc:w",
                                                    text="written while serving", created_ms=1))])
        owner.commit()
        result = run("search", SPACE, "serving", "--data", str(data), "--json")
        assert result.exit_code == 0, result.output
        assert [m["text"] for m in json.loads(result.stdout)["memories"]] == ["written while serving"]
    finally:
        owner.close()


def test_human_output_off_a_terminal_keeps_every_uri_on_one_line(memories: Path, tmp_path: Path) -> None:
    run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    result = run("search", SPACE, "accents", "--data", str(tmp_path / "d"))
    uri_line = next(line for line in result.stdout.splitlines() if "at://" in line)
    assert f"{SPACE}/did:plc:other/garden.engram.memory/3kabc" in uri_line


def test_import_needs_all_three_model_options_together(memories: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["import", SPACE, str(memories), "--data", str(tmp_path), "--model", "m"])
    assert result.exit_code == 2 and "go together" in result.output


def test_import_with_embed_gives_vectors_to_records_without_them(tmp_path: Path) -> None:
    from engram_index.embed.hashing import HashingEmbedder

    ident = HashingEmbedder(16).identity
    model = ["--model", ident.model, "--model-digest", ident.digest, "--dims", "16"]
    path = write_jsonl(tmp_path / "plain.jsonl", [
        {"text": "the kubernetes cluster restarted", "tags": ["infra"], "createdAt": "2026-03-01T10:00:00Z"},
        {"text": "pasta with tomatoes", "createdAt": "2026-03-02T10:00:00Z"},
    ])
    data = str(tmp_path / "d")
    result = run("import", SPACE, str(path), "--data", data, *model, "--embed", "--embedder", "hashing:16")
    assert "2 records embedded" in result.output and "2 written" in result.output
    vec = encode_query_vector(HashingEmbedder(16).embed_queries(["kubernetes cluster"])[0])
    out = json.loads(run("search", SPACE, "--vector", vec, "--data", data, "--json").stdout)
    assert out["mode"] == "vector" and out["memories"][0]["text"].startswith("the kubernetes")
    again = run("import", SPACE, str(path), "--data", data, "--embed", "--embedder", "hashing:16")
    assert "0 written, 2 unchanged" in again.output


def test_import_with_an_embedder_of_another_model_is_refused(memories: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL,
                                       "--embed", "--embedder", "hashing:4"])
    assert result.exit_code == 1 and "not the space's model" in result.output


def test_embed_writes_one_normalised_row_per_line_matching_the_reference(tmp_path: Path, scifact_dir: Path) -> None:
    lines = (scifact_dir / "queries.jsonl").read_text().splitlines()[:5]
    path = write_jsonl(tmp_path / "q.jsonl", lines)
    out = tmp_path / "q.npy"
    result = run("embed", "--input", str(path), "--kind", "query", "--out", str(out))
    assert result.exit_code == 0, result.output
    got = np.load(out)
    want = np.load(scifact_dir / "queries.minilm.f32.npy")[:5]
    assert got.shape == (5, 384) and np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-3)
    cos = (got * want).sum(1) / np.linalg.norm(want, axis=1) / np.linalg.norm(got, axis=1)
    assert cos.min() >= 0.9999


def test_embed_reports_a_line_without_the_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [{"text": "ok"}, {"other": 1}])
    result = CliRunner().invoke(main, ["embed", "--input", str(path), "--out", str(tmp_path / "o.npy"),
                                       "--embedder", "hashing:8"])
    assert result.exit_code == 1 and "line 2" in result.output


def test_repack_rewrites_a_store_made_with_small_pages_and_says_what_it_saved(memories: Path, old_data_dir: Path) -> None:
    data = old_data_dir
    run("import", SPACE, str(memories), "--data", str(data), *MODEL)
    result = run("repack", "--data", str(data))
    assert result.exit_code == 0, result.output
    assert "4 KB pages to 16 KB" in result.output
    assert "already has 16 KB pages" in run("repack", "--data", str(data)).output
    found = run("search", SPACE, "pasta", "--data", str(data))
    assert "San Marzano" in found.output


def test_repack_refuses_a_data_directory_in_use(memories: Path, tmp_path: Path) -> None:
    from engram_index.collections import Collections

    run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    spaces = Collections(tmp_path / "d")
    try:
        result = CliRunner().invoke(main, ["repack", "--data", str(tmp_path / "d")])
        assert result.exit_code != 0
        assert "in use" in result.output
    finally:
        spaces.close()


MINILM_TEXTS = [
    {"text": "The deploy pipeline retries a failed step three times", "createdAt": "2026-03-01T10:00:00Z"},
    {"text": "Grandma's pasta recipe uses San Marzano tomatoes", "createdAt": "2026-03-01T10:00:01Z", "tags": ["food"]},
]


def test_import_embed_into_a_new_space_takes_the_embedders_model_and_text_alone_then_searches_hybrid(
    tmp_path: Path,
) -> None:
    # The README's example: no --model; the space takes the local model's, as its records are embedded with it.
    file = write_jsonl(tmp_path / "plain.jsonl", MINILM_TEXTS)
    data = tmp_path / "d"
    imported = run("import", SPACE, str(file), "--data", str(data), "--embed")
    assert imported.exit_code == 0, imported.output
    assert "2 records embedded" in imported.output and "2 written" in imported.output
    # Text alone: embedded with the space's model and searched hybrid, as the service's q alone is.
    result = run("search", SPACE, "how often are pipeline steps retried", "--data", str(data), "--json")
    out = json.loads(result.stdout)
    assert out["mode"] == "hybrid" and out["memories"][0]["text"].startswith("The deploy pipeline")
    keyword = json.loads(run("search", SPACE, "pipeline", "--data", str(data), "--json", "--embedder", "none").stdout)
    assert keyword["mode"] == "keyword"


def test_embed_text_prints_the_vector_parameter_the_service_takes(tmp_path: Path) -> None:
    from engram_index.embed.local import MiniLMEmbedder
    from engram_index.engram.records import decode_query_vector

    result = run("embed", "--text", "retry policy")
    assert result.exit_code == 0, result.output
    vector = result.stdout.strip()
    decoded = decode_query_vector(vector)
    with MiniLMEmbedder() as embedder:
        expected = embedder.embed_queries(["retry policy"])[0]
    assert decoded.shape == (384,) and float(np.dot(decoded, expected)) > 0.999
    assert "modelDigest=sha256:53aa" in result.stderr


def test_memories_of_norm_300_1_and_40_import_and_each_is_its_own_nearest_at_1000(tmp_path: Path) -> None:
    # Norm 300 in 384 dimensions (components ~15): half-precision sums of its squares overflow.
    rng = np.random.default_rng(40)
    directions = rng.standard_normal((3, 384))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    vectors = (directions * np.array([[300.0], [1.0], [40.0]])).astype("<f2")
    model = ["--model", "m", "--model-digest", "sha256:00", "--dims", "384"]

    def record(text: str, vector: np.ndarray) -> dict:
        return {"text": text, "createdAt": "2026-03-01T10:00:00Z", "embedding": {
            "model": "m", "modelDigest": "sha256:00", "dims": 384, "encoding": "f16le",
            "vector": {"$bytes": base64.b64encode(vector.tobytes()).rstrip(b"=").decode()}}}

    names = ["norm three hundred", "norm one", "norm forty"]
    lines = [record(name, vector) for name, vector in zip(names, vectors)]
    lines.append(record("all zeros", np.zeros(384, "<f2")))
    path = write_jsonl(tmp_path / "norms.jsonl", lines)
    result = run("import", SPACE, str(path), "--data", str(tmp_path / "d"), *model)
    assert "4 lines: 4 written, 0 unchanged, 0 skipped" in result.output, result.output
    assert "1 vectors not indexed: vector is all zeros: it has no direction" in result.output
    for name, vector in zip(names, vectors):
        found = run("search", SPACE, "--vector", encode_query_vector(vector), "--data", str(tmp_path / "d"), "--json")
        top = json.loads(found.stdout)["memories"]
        assert top[0]["text"] == name and top[0]["similarity"] == 1000
        assert "all zeros" not in [m["text"] for m in top]


def test_searching_with_a_vector_of_zeros_is_a_clear_error(memories: Path, tmp_path: Path) -> None:
    run("import", SPACE, str(memories), "--data", str(tmp_path / "d"), *MODEL)
    zeros = encode_query_vector(np.zeros(4, np.float32))
    result = CliRunner().invoke(main, ["search", SPACE, "--vector", zeros, "--data", str(tmp_path / "d")])
    assert result.exit_code == 1 and "vector is all zeros: it has no direction" in result.output
