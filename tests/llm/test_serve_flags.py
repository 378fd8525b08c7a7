"""`serve --llm` and `--rerank`: checked before serving, and on app.state (one process or --workers)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from engram_index.app import WORKER_CONFIG_ENV, worker_app
from tests.limits import ROOMY_SERVE_OPTIONS, roomy_app
from engram_index.cli import main
from engram_index.engram.auth import InsecureOpen
from engram_index.llm.openai_compat import OpenAICompatibleLLM
from engram_index.rerank import LLMReranker, RemoteReranker
from engram_index.settings import ServeSettings
from engram_index.testkit.fake_llm import FakeLLM
from engram_index.testkit.serve import serving

DID = "did:web:localhost"


def test_the_app_holds_the_configured_llm_and_reranker(tmp_path: Path, fake: FakeLLM) -> None:
    llm = OpenAICompatibleLLM(fake.url, fake.model)
    reranker = LLMReranker(llm)
    app = roomy_app(tmp_path / "d", DID, authenticator=InsecureOpen(), llm=llm, reranker=reranker)
    with serving(app) as url:
        assert httpx.get(f"{url}/xrpc/_health").status_code == 200
        assert app.state.llm is llm and app.state.reranker is reranker
        assert reranker.scores("alice", ["alice", "bob"]) == [1.0, 0.0]


def test_without_flags_the_app_has_no_llm_and_no_reranker(tmp_path: Path) -> None:
    app = roomy_app(tmp_path / "d", DID, authenticator=InsecureOpen())
    with serving(app):
        assert app.state.llm is None and app.state.reranker is None


def test_workers_get_the_llm_and_reranker_from_the_parents_config(tmp_path: Path, fake: FakeLLM,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "d"
    with serving(roomy_app(data, DID, authenticator=InsecureOpen())):
        pass  # the data directory a worker opens read-only
    monkeypatch.setenv(WORKER_CONFIG_ENV, ServeSettings(
        data=str(data), service_did=DID, insecure_open=True, embedder="none", search_threads=1,
        llm=f"{fake.model}@{fake.url}", rerank=f"url:{fake.rerank_url}#rerank-v3.5",
    ).to_json())
    app = worker_app()
    with serving(app):
        assert isinstance(app.state.llm, OpenAICompatibleLLM) and app.state.llm.model == fake.model
        assert isinstance(app.state.reranker, RemoteReranker) and app.state.reranker.model == "rerank-v3.5"
        assert app.state.reranker.scores("alice", ["alice"]) == [1.0]


@pytest.mark.parametrize("args, message", [
    (["--llm", "qwen2.5:3b"], "Invalid value for --llm: --llm wants MODEL@URL"),
    (["--rerank", "llm"], "Invalid value for --rerank: --rerank llm needs an LLM"),
    (["--llm", "m@http://127.0.0.1:9/v1", "--rerank", "tei"], "--rerank wants url:"),
])
def test_malformed_llm_and_rerank_flags_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["serve", *ROOMY_SERVE_OPTIONS, "--data", str(tmp_path / "d"), "--insecure-open", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
