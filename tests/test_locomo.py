"""`engram-index eval locomo` on a tiny fixture conversation: parsing, scoring, and every face over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from engram_index.cli import main
from engram_index.locomo import load, recall_at, session_date_ms
from engram_index.embed.hashing import HashingEmbedder
from engram_index.locomo_faces import FACES, answers

TINY = Path(__file__).parent / "data" / "locomo-tiny"


def test_session_dates_are_read_as_utc_milliseconds() -> None:
    assert session_date_ms("1:56 pm on 8 May, 2023") == 1683554160000


def test_only_questions_of_categories_1_to_4_with_present_evidence_are_scored() -> None:
    (conv,) = load(TINY)
    assert len(conv.turns) == 14
    assert [q.category for q in conv.questions] == [4, 1, 2, 3, 4, 4]  # the adversarial and the evidence-less left out
    pottery = conv.questions[4]
    assert pottery.evidence == ("D2:4",)  # D9:9 is not a turn of the conversation
    photo = next(t for t in conv.turns if t.dia_id == "D2:4")
    assert photo.text == "Ben: Yes, I did. [shares a photo: a photo of a clay bowl on a wheel]"


def test_recall_counts_the_first_k_distinct_turns() -> None:
    assert recall_at(["a", "a", "b", "c"], ["c"], 2) == 0.0
    assert recall_at(["a", "a", "a", "c"], ["c"], 2) == 1.0  # a repeated turn takes no second place
    assert recall_at(["a", "b"], ["a", "x"], 5) == 0.5


def test_eval_locomo_scores_every_face_and_mode_over_http() -> None:
    result = CliRunner().invoke(main, ["eval", "locomo", "--data-dir", str(TINY), "--json", "--embedder", "hashing:64"])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert {face: list(modes) for face, modes in scores.items()} == {f: list(m) for f, m in FACES.items()}
    for face, modes in scores.items():
        for mode, table in modes.items():
            assert table["n"] == 6
            assert 0 <= table["R@5"] <= table["R@10"] <= table["R@20"] <= 1
            assert set(table["categories"]) == {"multi-hop", "temporal", "open-domain", "single-hop"}
        # Fourteen turns: at 20 results the default mode finds nearly every evidence turn.
        assert modes[next(iter(modes))]["R@20"] >= 0.8, (face, modes)


def test_the_table_names_each_face_mode_and_category() -> None:
    result = CliRunner().invoke(main, ["eval", "locomo", "--data-dir", str(TINY), "--embedder", "hashing:64",
                                       "--faces", "kindgi"])
    assert result.exit_code == 0, result.output
    for word in ("kindgi", "both", "keyword", "semantic", "R@10", "temporal"):
        assert word in result.stdout


def test_an_unknown_face_is_a_usage_error_naming_the_option() -> None:
    result = CliRunner().invoke(main, ["eval", "locomo", "--data-dir", str(TINY), "--faces", "nope"])
    assert result.exit_code == 2 and "--faces" in result.output


def test_a_folder_without_locomo_data_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["eval", "locomo", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1 and "cannot read the LoCoMo data" in result.output


def test_two_identical_runs_give_identical_rankings_on_every_face() -> None:
    conversations = load(TINY)
    first = answers(conversations, HashingEmbedder(64), tuple(FACES))
    second = answers(conversations, HashingEmbedder(64), tuple(FACES))
    assert first == second
    # The fixture holds one text twice: its two turns tie, and the older (inserted first) comes first.
    for face, modes in first.items():
        for mode, found in modes.items():
            park = found[5]
            if "D1:7" in park and "D2:7" in park and mode not in ("hybrid", "both"):
                assert park.index("D1:7") < park.index("D2:7"), (face, mode, park)
