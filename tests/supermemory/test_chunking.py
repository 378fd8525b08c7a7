"""A document's chunks: whole sentences packed to about chunking.TARGET characters, overlapping by whole sentences."""

from __future__ import annotations

from engram_index.supermemory.chunking import OVERLAP, TARGET, chunk, sentences


def text_of(n_sentences: int) -> str:
    """Sentences of some 60 characters each, every one different."""
    return " ".join(f"Sentence number {i} says something about the river and the stone." for i in range(n_sentences))


def test_an_abstract_of_about_fifteen_hundred_characters_is_one_chunk() -> None:
    text = text_of(22)
    assert 1300 < len(text) < TARGET
    assert [(c.start, c.end) for c in chunk(text)] == [(0, len(text))]


def test_a_longer_document_is_cut_into_chunks_of_whole_sentences_that_overlap_and_cover_it() -> None:
    text = text_of(120)
    chunks = chunk(text)
    ends = {s.end for s in sentences(text)}
    starts = {s.start for s in sentences(text)}
    assert len(chunks) > 3
    assert all(c.end - c.start <= TARGET and c.start in starts and c.end in ends for c in chunks)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    for before, after in zip(chunks, chunks[1:]):
        assert before.start < after.start <= before.end  # each moves on, and none leaves a gap
        assert before.end - after.start <= OVERLAP


def test_a_target_given_is_kept_over_the_default() -> None:
    text = text_of(22)
    assert len(chunk(text, target=800)) > 1
    assert all(c.end - c.start <= 800 for c in chunk(text, target=800))
