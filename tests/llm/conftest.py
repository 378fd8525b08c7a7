"""One fake OpenAI-compatible server (real HTTP on loopback) for the LLM tests, reset per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram_index.llm.http import RetryPolicy
from engram_index.llm.openai_compat import OpenAICompatibleLLM
from engram_index.testkit.fake_llm import FakeLLM, fake_llm_server

FAST = RetryPolicy(retries=2, backoff_s=0.01, max_backoff_s=0.05)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLM]:
    with fake_llm_server() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeLLM) -> Iterator[FakeLLM]:
    server.reset()
    yield server
    server.reset()


@pytest.fixture
def llm(fake: FakeLLM) -> Iterator[OpenAICompatibleLLM]:
    client = OpenAICompatibleLLM(fake.url, fake.model, policy=FAST)
    yield client
    client.close()
