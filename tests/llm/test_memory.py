"""Forming memories with an LLM (the fake server over real HTTP): facts, relations, strict validation."""

from __future__ import annotations

import json

import pytest

from engram_index.llm.base import KnownMemory, LLMUnavailable, ProposedMemory
from engram_index.llm.memory import MAX_DOCUMENT_CHARS, MAX_MEMORIES, MAX_MEMORY_CHARS, form_memories
from engram_index.llm.openai_compat import OpenAICompatibleLLM
from engram_index.testkit.fake_llm import FakeLLM

KNOWN = [KnownMemory("m1", "Alice lives in Paris."), KnownMemory("m2", "Bob works at the bakery on Main Street.")]


def test_each_sentence_becomes_a_new_memory_when_nothing_is_known(llm: OpenAICompatibleLLM) -> None:
    got = form_memories(llm, "Carol plays the cello. Her name is Carol Jones.", [])
    assert got == [ProposedMemory("Carol plays the cello."),
                   ProposedMemory("Her name is Carol Jones.", is_static=True)]


def test_a_fact_about_a_known_subject_updates_that_memory(llm: OpenAICompatibleLLM) -> None:
    got = form_memories(llm, "Alice lives in Berlin.", KNOWN)
    assert got == [ProposedMemory("Alice lives in Berlin.", "updates", "m1")]


def test_extends_and_derives_name_their_target_and_derives_is_an_inference(llm: OpenAICompatibleLLM) -> None:
    got = form_memories(llm, "Also, the bakery on Main Street opens at six. So Bob works early mornings.", KNOWN)
    assert got == [ProposedMemory("Also, the bakery on Main Street opens at six.", "extends", "m2"),
                   ProposedMemory("So Bob works early mornings.", "derives", "m2", is_inference=True)]


def test_the_prompt_shows_the_known_memories_the_context_and_the_document(fake: FakeLLM,
                                                                          llm: OpenAICompatibleLLM) -> None:
    form_memories(llm, "Alice lives in Berlin.", KNOWN, context="Notes about the user's friends.")
    user = fake.chats()[0]["messages"][1]["content"]
    assert json.dumps([{"id": "m1", "memory": "Alice lives in Paris."},
                       {"id": "m2", "memory": "Bob works at the bakery on Main Street."}]) in user
    assert "Supporting context:\nNotes about the user's friends." in user
    assert user.endswith("Document:\n<<<\nAlice lives in Berlin.\n>>>")


def test_a_known_memory_restated_unchanged_is_not_proposed_again(llm: OpenAICompatibleLLM) -> None:
    assert form_memories(llm, "Alice lives in Paris. Dan sings.", KNOWN) == [ProposedMemory("Dan sings.")]


def test_an_empty_document_asks_nothing(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    assert form_memories(llm, "  \n ", KNOWN) == []
    assert fake.chats() == []


def test_the_llms_answer_is_validated_strictly(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.reply(json.dumps({"memories": [
        {"memory": "Alice moved to Rome.", "relation": "updates", "target": "m1", "static": "yes"},
        {"memory": "Eve has a dog.", "relation": "updates", "target": "no-such-id"},
        {"memory": "Eve's dog is called Rex.", "relation": "supersedes", "target": "m2"},
        {"memory": "Eve walks Rex daily.", "relation": "new", "target": "m2"},
        {"memory": "   "}, {"memory": 42}, {"relation": "new"}, "Frank cooks.", None, 7,
        {"memory": "  Eve   has a dog. ", "relation": "new"},
        {"fact": "Gina paints.", "relation": "DERIVES", "target": "m2", "is_static": True},
    ]}))
    assert form_memories(llm, "some document", KNOWN) == [
        ProposedMemory("Alice moved to Rome.", "updates", "m1"),
        ProposedMemory("Eve has a dog."),
        ProposedMemory("Eve's dog is called Rex."),
        ProposedMemory("Eve walks Rex daily."),
        ProposedMemory("Frank cooks."),
        ProposedMemory("Gina paints.", "derives", "m2", is_static=True, is_inference=True),
    ]


def test_the_number_and_length_of_memories_are_bounded(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    long = "word " * 400
    fake.reply(json.dumps([{"memory": f"Fact number {i}."} for i in range(100)] + [{"memory": long}]))
    got = form_memories(llm, "doc", [])
    assert len(got) == MAX_MEMORIES
    fake.reply(json.dumps({"memories": [{"memory": long}]}))
    (one,) = form_memories(llm, "doc", [])
    assert len(one.memory) <= MAX_MEMORY_CHARS and one.memory.startswith("word word")


def test_a_long_document_is_cut_before_it_is_sent(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    form_memories(llm, "Zed naps. " * 3000, [])
    user = fake.chats()[0]["messages"][1]["content"]
    assert len(user) < MAX_DOCUMENT_CHARS + 200


@pytest.mark.parametrize("answer", ['{"facts_here": []}', '"just text"', '{"memories": "Alice"}'])
def test_an_answer_without_a_list_of_memories_is_llm_unavailable(fake: FakeLLM, llm: OpenAICompatibleLLM,
                                                                 answer: str) -> None:
    fake.reply(answer)
    with pytest.raises(LLMUnavailable, match="without a list of memories"):
        form_memories(llm, "doc", KNOWN)


def test_an_empty_list_is_a_valid_answer(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.reply('{"memories": []}')
    assert form_memories(llm, "Nothing to remember here", KNOWN) == []


def test_a_failing_llm_is_llm_unavailable(fake: FakeLLM, llm: OpenAICompatibleLLM) -> None:
    fake.fail(9, 500)
    with pytest.raises(LLMUnavailable):
        form_memories(llm, "Alice lives in Berlin.", KNOWN)
