"""Rerankers against the fake server over real HTTP: Cohere/Jina and TEI /rerank shapes, and the LLM."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from engram_index.llm.base import LLMUnavailable
from engram_index.llm.openai_compat import OpenAICompatibleLLM
from engram_index.rerank import (API_KEY_ENV, LLM_BATCH, LLMReranker, RemoteReranker, RerankerUnavailable,
                                 reranker_from_spec)
from engram_index.testkit.fake_llm import FakeLLM

from tests.llm.conftest import FAST

QUERY = "alice berlin jazz"
TEXTS = ["Bob bakes bread.", "Alice lives in Berlin.", "Alice loves jazz in Berlin."]
EXPECTED = [0.0, 2 / 3, 1.0]


@pytest.fixture
def cohere(fake: FakeLLM) -> Iterator[RemoteReranker]:
    r = RemoteReranker(fake.rerank_url, "rerank-v3.5", policy=FAST)
    yield r
    r.close()


def test_a_cohere_shaped_endpoint_scores_each_text_in_order(fake: FakeLLM, cohere: RemoteReranker) -> None:
    assert cohere.scores(QUERY, TEXTS) == pytest.approx(EXPECTED)
    body = fake.requests[0]["body"]
    assert body == {"model": "rerank-v3.5", "query": QUERY, "documents": TEXTS, "top_n": 3}


def test_a_tei_endpoint_gets_texts_and_answers_a_bare_list(fake: FakeLLM) -> None:
    tei = RemoteReranker(fake.rerank_url, policy=FAST)
    assert tei.scores(QUERY, TEXTS) == pytest.approx(EXPECTED)
    assert set(fake.requests[0]["body"]) == {"query", "texts", "truncate"}
    tei.close()


def test_more_texts_than_one_call_takes_are_sent_in_batches(fake: FakeLLM, cohere: RemoteReranker) -> None:
    texts = [f"alice {i}" if i % 2 else f"bob {i}" for i in range(150)]
    got = cohere.scores("alice", texts)
    assert got == [1.0 if i % 2 else 0.0 for i in range(150)]
    assert [len(r["body"]["documents"]) for r in fake.requests] == [100, 50]


def test_rerank_server_errors_are_retried(fake: FakeLLM, cohere: RemoteReranker) -> None:
    fake.fail(2, 502)
    assert cohere.scores(QUERY, TEXTS) == pytest.approx(EXPECTED)


def test_a_failing_rerank_endpoint_is_reranker_unavailable(fake: FakeLLM, cohere: RemoteReranker) -> None:
    fake.fail(9, 500)
    with pytest.raises(RerankerUnavailable, match=r"answered 500.*after 3 tries"):
        cohere.scores(QUERY, TEXTS)


def test_a_refused_rerank_request_is_reranker_unavailable_with_the_message(fake: FakeLLM,
                                                                          cohere: RemoteReranker) -> None:
    fake.api_key = "k"
    with pytest.raises(RerankerUnavailable, match=r"refused /rerank \(401\): Incorrect API key"):
        cohere.scores(QUERY, TEXTS)


def test_a_rerank_answer_that_is_not_json_is_reranker_unavailable(fake: FakeLLM, cohere: RemoteReranker) -> None:
    fake.malform(1)
    with pytest.raises(RerankerUnavailable, match="not JSON"):
        cohere.scores(QUERY, TEXTS)


@pytest.mark.parametrize("model", ["m", None])
def test_a_rerank_answer_that_leaves_texts_out_is_reranker_unavailable(fake: FakeLLM, model: str | None) -> None:
    fake.rerank_limit = 2  # a server that caps the results below what was asked
    reranker = RemoteReranker(fake.rerank_url, model, policy=FAST)
    with pytest.raises(RerankerUnavailable, match="scored 2 of 3 texts"):
        reranker.scores(QUERY, TEXTS)
    reranker.close()


def test_the_llm_reranker_scores_passages_in_batches(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    reranker = LLMReranker(llm)
    texts = TEXTS * 10
    assert reranker.scores(QUERY, texts) == pytest.approx(EXPECTED * 10, abs=1e-3)
    assert len(fake.chats()) == len(texts) // LLM_BATCH + 1


def test_the_llm_rerankers_answer_is_clamped_and_missing_passages_score_zero(fake: FakeLLM,
                                                                            llm: OpenAICompatibleLLM) -> None:
    fake.reply(json.dumps({"scores": [{"n": 1, "score": 7}, {"n": 3, "score": -1}, {"n": 9, "score": 1},
                                      {"n": 2, "score": "high"}]}))
    assert LLMReranker(llm).scores(QUERY, TEXTS) == [1.0, 0.0, 0.0]
    fake.reply("[0.5, 0.25, 1]")
    assert LLMReranker(llm).scores(QUERY, TEXTS) == [0.5, 0.25, 1.0]
    fake.reply('{"ranking": [1, 2]}')
    with pytest.raises(LLMUnavailable, match="list of scores"):
        LLMReranker(llm).scores(QUERY, TEXTS)


def test_the_rerank_flag_builds_each_reranker(fake: FakeLLM, llm: OpenAICompatibleLLM,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, "rk")
    remote = reranker_from_spec(f"url:{fake.rerank_url}#jina-reranker-v2")
    assert isinstance(remote, RemoteReranker) and remote.model == "jina-reranker-v2"
    assert remote.scores(QUERY, TEXTS) == pytest.approx(EXPECTED)
    assert fake.requests[-1]["authorization"] == "Bearer rk"
    tei = reranker_from_spec(f"url:{fake.rerank_url}")
    assert isinstance(tei, RemoteReranker) and tei.model is None
    assert isinstance(reranker_from_spec("llm", llm), LLMReranker)


@pytest.mark.parametrize("spec, message", [
    ("llm", "needs an LLM"), ("local", "no PyPI package ships"), ("cohere", "wants url:"),
    ("url:ftp://x/rerank", "http:// or https://"),
])
def test_a_rerank_flag_that_cannot_be_served_is_refused_clearly(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reranker_from_spec(spec)
