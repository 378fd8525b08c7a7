"""`LLM` over an OpenAI-compatible chat completions endpoint (OpenAI, Ollama, vLLM, llama.cpp).

Each call asks for a JSON object (`response_format: json_object`, temperature 0); servers
that refuse `response_format` are asked again without it, and remembered. Models often wrap
JSON in Markdown fences, prose or a `<think>` block, so the answer is parsed leniently: the
first JSON object or array found in it. Every failure is `LLMUnavailable` with a message.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import httpx

from engram_index.llm.base import LLM, LLMUnavailable
from engram_index.llm.http import Rejected, RetryPolicy, check_base_url, post_json

API_KEY_ENV = "ENGRAM_LLM_API_KEY"
DEFAULT_MAX_TOKENS = 2048
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)


def parse_json_text(text: str) -> Any:
    """The JSON value in a model's answer: bare, fenced, or the first object/array inside prose."""
    text = _THINK.sub("", text).strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    for fenced in _FENCE.findall(text):
        try:
            return json.loads(fenced.strip())
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _end = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        return value
    raise ValueError("no JSON value in the answer")


class OpenAICompatibleLLM:
    """A chat model behind `POST {base_url}/chat/completions` that answers with JSON."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        policy: RetryPolicy = RetryPolicy(),
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        if not model.strip():
            raise ValueError("the LLM model name is empty")
        self.base_url = check_base_url(base_url, "LLM")
        self.model = model
        self.policy = policy
        self.max_tokens = max_tokens
        self.json_mode = True  # off once the server refuses response_format
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base_url, headers=headers)

    def __repr__(self) -> str:
        return f"OpenAICompatibleLLM({self.model!r})"

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def chat_json(self, system: str, user: str, *, timeout_s: float = 30.0) -> Any:
        """One chat completion whose answer is parsed as a JSON value (LLMUnavailable when it cannot be)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "stream": False,
        }
        service = f"the LLM {self.model!r}"
        try:
            answer = self._post(body, service, timeout_s)
        except Rejected as exc:
            raise LLMUnavailable(f"{service} refused /chat/completions ({exc.status}): {exc.detail}") from None
        content = _content(answer, service)
        try:
            return parse_json_text(content)
        except ValueError:
            raise LLMUnavailable(f"{service} answered without JSON: {content[:120]!r}") from None

    def _post(self, body: dict[str, Any], service: str, timeout_s: float) -> Any:
        start = time.monotonic()
        if self.json_mode:
            try:
                return post_json(self._client, "/chat/completions", {**body, "response_format": {"type": "json_object"}},
                                 service=service, error=LLMUnavailable, timeout_s=timeout_s, policy=self.policy)
            except Rejected as exc:
                if "response_format" not in exc.detail and "json" not in exc.detail.lower():
                    raise
                self.json_mode = False  # an older server: the prompt alone asks for JSON
        remaining = timeout_s - (time.monotonic() - start)  # one deadline for both tries
        if remaining <= 0:
            raise LLMUnavailable(f"{service} did not answer within {timeout_s:g} s")
        return post_json(self._client, "/chat/completions", body, service=service, error=LLMUnavailable,
                         timeout_s=remaining, policy=self.policy)


def _content(answer: Any, service: str) -> str:
    """The assistant message's text from a chat completion, checked."""
    try:
        choice = answer["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMUnavailable(f"{service} answered without choices[0].message.content") from None
    if not isinstance(content, str) or not content.strip():
        reason = choice.get("finish_reason") if isinstance(choice, dict) else None
        raise LLMUnavailable(f"{service} answered an empty message (finish_reason {reason!r})")
    return content


def llm_from_spec(spec: str, *, api_key: str | None = None) -> LLM:
    """The LLM a `--llm MODEL@URL` flag names (key from $ENGRAM_LLM_API_KEY); ValueError when malformed.

    Example: `qwen2.5:3b@http://127.0.0.1:11434/v1` (Ollama), `gpt-4o-mini@https://api.openai.com/v1`.
    """
    at = max(spec.rfind("@http://"), spec.rfind("@https://"))
    if at <= 0:
        raise ValueError(f"--llm wants MODEL@URL (e.g. qwen2.5:3b@http://127.0.0.1:11434/v1), got {spec!r}")
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
    return OpenAICompatibleLLM(spec[at + 1:], spec[:at], key)
