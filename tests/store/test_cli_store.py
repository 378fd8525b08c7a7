"""The command line on a PostgreSQL store: import into it, search it from another cache, keys in it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from engram_index.cli import main
from tests.test_cli import MODEL, SPACE, memories  # noqa: F401  (a fixture)


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_records_imported_through_one_cache_are_searched_through_another(
        memories: Path, tmp_path: Path, postgres_server: object) -> None:  # noqa: F811
    url = postgres_server.database()  # type: ignore[attr-defined]
    run("import", SPACE, str(memories), "--data", str(tmp_path / "node-a"), "--store", url, *MODEL)
    out = json.loads(run("search", SPACE, "http server", "--data", str(tmp_path / "node-b"), "--store", url, "--json"))
    assert out["mode"] == "keyword" and out["memories"][0]["text"].startswith("The HTTPServer")
    assert not (tmp_path / "node-a" / "records.sqlite").exists()


def test_keys_made_with_store_are_listed_and_revoked_through_any_cache(tmp_path: Path, postgres_server: object) -> None:
    url = postgres_server.database()  # type: ignore[attr-defined]
    made = run("keys", "create", "kindgi", "--data", str(tmp_path / "a"), "--store", url, "--tenant", "acme",
               "--user", "alice")
    key_id = made.split()[-1].split("_")[1]
    listed = [json.loads(line)["id"] for line in
              run("keys", "list", "--data", str(tmp_path / "b"), "--store", url, "--json").splitlines()]
    assert listed == [key_id]
    assert "revoked" in run("keys", "revoke", key_id, "--data", str(tmp_path / "c"), "--store", url)


def test_a_store_that_is_not_a_postgresql_url_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["search", SPACE, "x", "--data", str(tmp_path), "--store", "mysql://h/db"])
    assert result.exit_code == 2 and "postgresql://" in result.output
