"""The OpenAI-compatible client against a fake server over real HTTP: JSON answers, retries, failures."""

from __future__ import annotations

import pytest

from engram_index.llm.base import LLMUnavailable
from engram_index.llm.http import RetryPolicy
from engram_index.llm.openai_compat import API_KEY_ENV, OpenAICompatibleLLM, llm_from_spec, parse_json_text
from engram_index.testkit.fake_llm import FakeLLM

from tests.llm.conftest import FAST


def test_a_chat_completion_is_sent_in_openai_shape_and_its_json_answer_parsed(fake: FakeLLM,
                                                                               llm: OpenAICompatibleLLM) -> None:
    fake.reply('{"ok": true, "n": 3}')
    assert llm.chat_json("you answer", "hello") == {"ok": True, "n": 3}
    body = fake.chats()[0]
    assert body["model"] == fake.model
    assert body["messages"] == [{"role": "system", "content": "you answer"}, {"role": "user", "content": "hello"}]
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0 and body["stream"] is False


@pytest.mark.parametrize("content, expected", [
    ('```json\n{"a": 1}\n```', {"a": 1}),
    ('Here you go:\n```\n[1, 2]\n```\nBye', [1, 2]),
    ('Sure! {"a": {"b": [1]}} hope that helps', {"a": {"b": [1]}}),
    ('<think>{"wrong": 1} hmm</think>{"right": 2}', {"right": 2}),
    ('  {"a": "}"}  ', {"a": "}"}),
])
def test_json_wrapped_in_fences_prose_or_thinking_is_found(content: str, expected: object) -> None:
    assert parse_json_text(content) == expected


def test_an_answer_without_json_is_llm_unavailable_naming_what_came(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.reply("I cannot help with that.")
    with pytest.raises(LLMUnavailable, match="without JSON: 'I cannot help"):
        llm.chat_json("s", "u")


def test_a_fenced_answer_from_the_server_is_parsed(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.fence = True
    assert "rewrites" in llm.chat_json("(task: rewrite-query)", "Query: where is the cat")


def test_server_errors_are_retried_then_answered(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.fail(2, 500)
    fake.reply('{"after": "retries"}')
    assert llm.chat_json("s", "u") == {"after": "retries"}
    assert len(fake.chats()) == 3


def test_rate_limits_are_retried(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.fail(1, 429)
    fake.reply("[]")
    assert llm.chat_json("s", "u") == []


def test_persistent_server_errors_are_llm_unavailable_after_the_retries(fake: FakeLLM,
                                                                        llm: OpenAICompatibleLLM) -> None:
    fake.fail(5, 503)
    with pytest.raises(LLMUnavailable, match=r"answered 503: The server had an error.*after 3 tries"):
        llm.chat_json("s", "u")
    assert len(fake.chats()) == 3


def test_a_body_that_is_not_json_is_llm_unavailable(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.malform(1)
    with pytest.raises(LLMUnavailable, match="not JSON"):
        llm.chat_json("s", "u")


def test_an_unknown_model_is_refused_at_once_with_the_servers_message(fake: FakeLLM) -> None:
    client = OpenAICompatibleLLM(fake.url, "no-such-model", policy=FAST)
    with pytest.raises(LLMUnavailable, match=r"refused /chat/completions \(404\): The model `no-such-model`"):
        client.chat_json("s", "u")
    assert len(fake.chats()) == 1
    client.close()


def test_the_api_key_is_sent_as_a_bearer_token(fake: FakeLLM) -> None:
    fake.api_key = "sk-test"
    without = OpenAICompatibleLLM(fake.url, fake.model, policy=FAST)
    with pytest.raises(LLMUnavailable, match=r"\(401\): Incorrect API key"):
        without.chat_json("s", "u")
    with_key = OpenAICompatibleLLM(fake.url, fake.model, "sk-test", policy=FAST)
    fake.reply("{}")
    assert with_key.chat_json("s", "u") == {}
    assert fake.requests[-1]["authorization"] == "Bearer sk-test"
    without.close()
    with_key.close()


def test_a_server_that_refuses_response_format_is_asked_again_without_it(fake: FakeLLM,
                                                                         llm: OpenAICompatibleLLM) -> None:
    fake.json_mode_unsupported = True
    fake.fence = True
    assert "scores" in llm.chat_json("(task: rerank)", 'Query: cat\n\nPassages (JSON):\n[{"n": 1, "text": "a cat"}]')
    assert "response_format" in fake.chats()[0] and "response_format" not in fake.chats()[1]
    llm.chat_json("(task: rerank)", 'Query: cat\n\nPassages (JSON):\n[]')
    assert "response_format" not in fake.chats()[2]  # remembered


def test_a_slow_server_is_llm_unavailable_within_the_timeout(fake: FakeLLM) -> None:
    fake.delay_s = 1.0
    client = OpenAICompatibleLLM(fake.url, fake.model, policy=RetryPolicy(retries=0))
    with pytest.raises(LLMUnavailable, match=r"did not answer within 0.2 s"):
        client.chat_json("s", "u", timeout_s=0.2)
    client.close()


def test_an_unreachable_server_is_llm_unavailable() -> None:
    from engram_index.testkit.serve import free_port

    client = OpenAICompatibleLLM(f"http://127.0.0.1:{free_port()}/v1", "m", policy=FAST)
    with pytest.raises(LLMUnavailable, match=r"could not be reached \(ConnectError\)"):
        client.chat_json("s", "u")
    client.close()


def test_an_empty_message_is_llm_unavailable(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.reply("   ")
    with pytest.raises(LLMUnavailable, match="empty message"):
        llm.chat_json("s", "u")


def test_the_llm_flag_names_model_and_url_and_the_key_comes_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, "sk-env")
    llm = llm_from_spec("qwen2.5:3b@http://127.0.0.1:11434/v1/")
    assert isinstance(llm, OpenAICompatibleLLM)
    assert (llm.model, llm.base_url) == ("qwen2.5:3b", "http://127.0.0.1:11434/v1")
    assert llm._client.headers["authorization"] == "Bearer sk-env"
    assert llm_from_spec("org/model@v2@https://example.com/v1").model == "org/model@v2"


@pytest.mark.parametrize("spec", ["qwen2.5:3b", "@http://127.0.0.1/v1", "m@ftp://host/v1", "m@http://"])
def test_a_malformed_llm_flag_is_refused_with_the_expected_form(spec: str) -> None:
    with pytest.raises(ValueError, match="MODEL@URL|http:// or https://"):
        llm_from_spec(spec)
