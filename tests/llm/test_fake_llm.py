"""The fake OpenAI-compatible server answers malformed requests as the real servers do."""

from __future__ import annotations

import httpx

from engram_index.testkit.fake_llm import FakeLLM


def test_the_models_route_lists_the_served_model(fake: FakeLLM) -> None:
    answer = httpx.get(f"{fake.url}/models").json()
    assert answer["object"] == "list" and [m["id"] for m in answer["data"]] == [fake.model]


def test_a_chat_request_without_messages_or_with_a_bad_body_is_a_400_in_openais_shape(fake: FakeLLM) -> None:
    for content in (b'{"model": "fake-model"}', b"not json"):
        response = httpx.post(f"{fake.url}/chat/completions", content=content,
                              headers={"content-type": "application/json"})
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"


def test_an_unknown_task_gets_a_json_answer_that_says_so(fake: FakeLLM) -> None:
    response = httpx.post(f"{fake.url}/chat/completions", json={
        "model": fake.model, "messages": [{"role": "user", "content": "hello"}]})
    message = response.json()["choices"][0]["message"]
    assert message["role"] == "assistant" and "do not know" in message["content"]


def test_the_rerank_route_refuses_a_body_without_documents(fake: FakeLLM) -> None:
    assert httpx.post(fake.rerank_url, json={"query": "q"}).status_code == 400
