"""Query rewriting and aggregation with an LLM (the fake server over real HTTP)."""

from __future__ import annotations

import json

import pytest

from engram_index.llm.base import LLMUnavailable
from engram_index.llm.openai_compat import OpenAICompatibleLLM
from engram_index.llm.query import MAX_AGGREGATE_TEXTS, MAX_REWRITES, aggregate, rewrite_query
from engram_index.testkit.fake_llm import FakeLLM


def test_rewrites_are_deduplicated_and_exclude_the_original(llm: OpenAICompatibleLLM) -> None:
    # The fake answers: without stop words, reversed, the query again, and the first one in capitals.
    assert rewrite_query(llm, "Where does Alice live") == ["alice live", "live alice does where"]


def test_rewrites_are_bounded_cleaned_and_non_strings_dropped(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.reply(json.dumps({"rewrites": ["  a   b ", 3, None, "", "WHERE is it", "c", "d", "e"]}))
    got = rewrite_query(llm, "where is it")
    assert got == ["a b", "c", "d"] and len(got) == MAX_REWRITES


def test_a_bare_list_of_rewrites_is_accepted(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.reply('["cat food"]')
    assert rewrite_query(llm, "what do cats eat") == ["cat food"]


def test_an_empty_query_asks_nothing(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    assert rewrite_query(llm, "   ") == []
    assert fake.chats() == []


def test_a_rewrite_answer_without_a_list_is_llm_unavailable(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.reply('{"rewrite": "one"}')
    with pytest.raises(LLMUnavailable, match="list of rewrites"):
        rewrite_query(llm, "q")


def test_aggregate_merges_the_passages_that_answer_the_query(llm: OpenAICompatibleLLM) -> None:
    texts = ["Alice lives in Berlin. She likes jazz.", "Alice lives in Berlin.", "Bob bakes bread."]
    assert aggregate(llm, "Where does Alice live?", texts) == "Alice lives in Berlin."


def test_aggregate_sends_at_most_twenty_numbered_passages(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    aggregate(llm, "q", [f"text {i}" for i in range(30)])
    user = fake.chats()[0]["messages"][1]["content"]
    passages = json.loads(user.partition("Passages (JSON):\n")[2])
    assert [p["n"] for p in passages] == list(range(1, MAX_AGGREGATE_TEXTS + 1))


def test_aggregate_of_nothing_is_empty_without_asking(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    assert aggregate(llm, "q", []) == ""
    assert fake.chats() == []


@pytest.mark.parametrize("answer", ['{"answer": ""}', '{"text": "x"}', "[1]"])
def test_aggregate_without_an_answer_is_llm_unavailable(fake: FakeLLM, llm: OpenAICompatibleLLM,
                                                        answer: str) -> None:
    fake.reply(answer)
    with pytest.raises(LLMUnavailable, match="aggregated answer"):
        aggregate(llm, "q", ["t"])
