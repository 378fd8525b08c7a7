"""The SciFact evaluation: metric definitions and the shape of its report."""

from pathlib import Path

import pytest

from engram_index.evaluation import evaluate, ndcg_at, recall_at

pytestmark = pytest.mark.long(25)  # seconds in all on a 2-core machine: run first (tests/conftest.py)


def test_ndcg_is_one_for_a_perfect_ranking_and_discounts_lower_ranks() -> None:
    assert ndcg_at(["a", "b"], {"a": 1, "b": 1}) == pytest.approx(1.0)
    assert ndcg_at(["x", "a"], {"a": 1}) == pytest.approx(1 / 1.5849625, rel=1e-6)
    assert ndcg_at(["x"], {"a": 1}) == 0.0


def test_recall_counts_relevant_documents_in_the_top_k() -> None:
    assert recall_at(["a", "x", "b"], {"a": 1, "b": 1, "c": 1}, k=2) == pytest.approx(1 / 3)


def test_evaluation_reports_every_method_with_both_metrics(scifact_dir: Path) -> None:
    some = {"1", "3", "5", "13", "36", "42", "48", "49", "50", "51"}
    result = evaluate(scifact_dir, query_ids=some)
    assert set(result) == {"keyword", "vector", "hybrid_convex", "hybrid_rrf"}
    for scores in result.values():
        assert set(scores) == {"ndcg@10", "recall@100"}
        assert 0.0 <= scores["ndcg@10"] <= 1.0 and 0.0 < scores["recall@100"] <= 1.0
