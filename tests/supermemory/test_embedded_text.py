"""What a v5 chunk or memory is embedded as: its text, then its document's metadata that says something."""

from __future__ import annotations

from engram_index.supermemory.pipeline import embedded_text


def test_metadata_words_are_embedded_as_tags_in_the_order_sent() -> None:
    out = embedded_text({"speaker": "Ana", "topic": "garden plans"}, "We planted tulips.")
    assert out == "We planted tulips.\n\nTags: speaker:Ana, topic:garden plans"


def test_identifier_keys_are_not_embedded_whatever_their_value() -> None:
    metadata = {"id": "x1", "diaId": "D1:3", "source_id": "abc", "docID": "Q7", "user-id": "u9", "speaker": "Ana"}
    assert embedded_text(metadata, "Hi.") == "Hi.\n\nTags: speaker:Ana"


def test_values_without_a_letter_are_not_embedded() -> None:
    metadata = {"session": 3, "score": 0.5, "scifact": "4983", "padded": " 12 ", "day": "2023-05-08",
                "speaker": "Ana", "model": "GPT-4"}
    assert embedded_text(metadata, "Hi.") == "Hi.\n\nTags: speaker:Ana, model:GPT-4"


def test_a_key_that_merely_ends_in_id_letters_is_still_embedded() -> None:
    assert embedded_text({"paid": "yes", "valid": "no"}, "Hi.") == "Hi.\n\nTags: paid:yes, valid:no"


def test_booleans_lists_and_empty_metadata_add_no_tags() -> None:
    assert embedded_text({"done": True, "labels": ["a", "b"]}, "Hi.") == "Hi."
    assert embedded_text(None, "Hi.") == "Hi."
    assert embedded_text({}, "Hi.") == "Hi."
