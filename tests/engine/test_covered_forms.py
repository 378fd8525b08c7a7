"""Exact forms covered by their stems: once a pass finds that every holder of a word's exact form holds
its stem too, later passes over the same postings leave the exact form's holders unread (its part is
never added where the stem's is), and never where a holder lacks the stem."""

from collections.abc import Iterator

import numpy as np
import pytest

from engram_index.engine import _kernels, termcounts
from engram_index.engine.search import SpaceIndex
from engram_index.engine.termcounts import QueryPlan, TermCounts
from engram_index.engine.types import Document, Filters, SearchRequest
from tests.engine.test_keyword_exact import brute_force, found
from tests.engine.test_search import Docs

PLAN = QueryPlan([("~zebra", 1, 1, 1.0), ("zebras", 2, 1, 1.0), ("stripe", 0, 0, 1.0)])
COVERED = [["zebras", "~zebra", "stripe"], ["zebra", "~zebra"], ["~zebra", "zebras", "zebras"], ["stripe"],
           ["zebras", "~zebra", "x"]]


def counts_of(rows: list[list[str] | None]) -> TermCounts:
    counts = TermCounts()
    counts.put_many(enumerate(rows))
    return counts


def sums(counts: TermCounts, ords: np.ndarray) -> np.ndarray:
    """The plan's scores from the rows: the stem's part where held, else the exact form's, plus stripe's."""
    parts = counts.term_scores(["~zebra", "zebras", "stripe"], ords)
    return np.where(parts[:, 0] > 0, parts[:, 0], parts[:, 1]) + parts[:, 2]


def scored(counts: TermCounts, allowed: np.ndarray | None = None) -> dict[int, float]:
    """matches' documents and sums, by ordinal, checked against the rows' sums."""
    ords, values, _ = counts.matches(PLAN, allowed)
    np.testing.assert_allclose(values, sums(counts, ords), rtol=1e-12)
    return dict(zip(ords.tolist(), values.tolist()))


def test_an_exact_form_whose_holders_all_hold_its_stem_is_read_once_then_left_unread() -> None:
    counts = counts_of(COVERED)  # type: ignore[arg-type]
    first = scored(counts)
    assert counts.unread == 0  # the first pass reads it, and so learns that the stem covers it
    assert scored(counts) == first
    assert counts.unread == 3  # the holders of "zebras": 0, 2 and 4
    assert sorted(first) == [0, 1, 2, 3, 4]


def test_an_exact_form_held_without_its_stem_is_read_by_every_pass() -> None:
    counts = counts_of(COVERED + [["zebras"]])  # type: ignore[arg-type]
    for _ in range(3):
        got = scored(counts)
        assert counts.unread == 0
        assert got[5] > 0  # the exact form's own part, where no stem is


def test_a_filter_that_hides_the_lone_holder_teaches_nothing() -> None:
    counts = counts_of(COVERED + [["zebras"]])  # type: ignore[arg-type]
    hidden = np.array([True] * 5 + [False])
    assert 5 not in scored(counts, hidden)
    assert scored(counts)[5] > 0
    assert counts.unread == 0


def test_what_a_pass_learnt_goes_with_the_postings_when_they_are_inverted_again() -> None:
    counts = counts_of(COVERED)  # type: ignore[arg-type]
    scored(counts)
    scored(counts)
    assert counts.unread == 3
    lone = len(COVERED)
    extra = termcounts.STALE_MAX + 1  # past this many writes the postings are inverted again
    counts.put_many([(lone + i, ["zebras"]) for i in range(extra)])
    got = scored(counts)
    assert counts.unread == 0 and all(got[lone + i] > 0 for i in range(extra))
    assert counts.matches(PLAN, None)[2].size == 0  # read from the new postings, not as stale rows


def test_a_written_document_holding_the_exact_form_alone_is_scored_before_the_next_inversion() -> None:
    counts = counts_of(COVERED)  # type: ignore[arg-type]
    scored(counts)
    scored(counts)
    counts.put_many([(len(COVERED), ["zebras"])])
    ords, _, stale = counts.matches(PLAN, None)
    assert stale.tolist() == [len(COVERED)]  # scored from its row by the caller, as every write since
    assert counts.unread == 3


@pytest.fixture
def space() -> Iterator[tuple[SpaceIndex, Docs]]:
    """Texts with "activation" as a word (its stem indexed beside it) and inside mixed-case identifiers
    ("ActIVatIOn": the whole indexed without a stem), some tagged "mixed"."""
    docs = Docs()
    index = SpaceIndex(None, None, docs.fetch)
    rng = np.random.default_rng(5)
    changes = []
    for ord_ in range(600):
        form = "ActIVatIOn" if ord_ % 50 == 7 else rng.choice(["activation", "activations", "activated", "other"])
        filler = " ".join(rng.choice(["cell", "signal", "path", "protein", "level"], size=int(rng.integers(1, 9))))
        tags = ("mixed",) if form == "ActIVatIOn" else ("plain",)
        doc = Document(id=f"m{ord_}", author="did:plc:a", text=f"{form} of {filler}", tags=tags, created_ms=1000 - ord_)
        docs.docs[ord_] = doc
        changes.append((ord_, doc))
    index.apply(changes, seq=1)
    index.commit()
    yield index, docs


@pytest.mark.parametrize("q", ["activation", "activation signal", "activations of protein", "activated cell"])
@pytest.mark.parametrize("limit", [1, 10, 60, 600])
def test_keyword_search_stays_the_exact_top_k_across_passes_that_learn(space, q: str, limit: int) -> None:
    index, docs = space
    plain = {o for o, d in docs.docs.items() if "plain" in d.tags}
    assert found(index, q, limit, Filters(tags=("plain",))) == brute_force(index, q, limit, plain)
    for _ in range(3):
        assert found(index, q, limit) == brute_force(index, q, limit)


def test_the_mixed_case_identifiers_score_by_their_exact_form(space) -> None:
    index, docs = space
    got = dict(found(index, "activation", 600))
    for _ in range(2):
        assert dict(found(index, "activation", 600)) == got
    assert all(got.get(o, 0.0) > 0 for o, d in docs.docs.items() if "mixed" in d.tags)


def test_a_hybrid_search_gives_the_same_answer_on_every_pass() -> None:
    docs = Docs()
    index = SpaceIndex(None, 4, docs.fetch)
    rng = np.random.default_rng(9)
    changes = []
    for ord_ in range(300):
        text = "ActIVatIOn path" if ord_ % 40 == 3 else f"activation {'path ' * int(rng.integers(1, 4))}"
        vector = rng.standard_normal(4).astype("<f2").tobytes()
        doc = Document(id=f"m{ord_}", author="did:plc:a", text=text, vector=vector, created_ms=1000 - ord_)
        docs.docs[ord_] = doc
        changes.append((ord_, doc))
    index.apply(changes, seq=1)
    index.commit()
    req = SearchRequest(mode="hybrid", q="path activation", vector=[1.0, 0.0, 0.0, 0.0], limit=20, explain=True)
    first = [(h.document.id, h.score, h.bm25) for h in index.search(req).hits]
    for _ in range(2):
        assert [(h.document.id, h.score, h.bm25) for h in index.search(req).hits] == first
    assert index.keyword.counts.unread > 0  # "path", which its stem covers ("activation" it does not)


def _kernel_args(counts: TermCounts) -> list[object]:
    """postings_top's arguments for PLAN over the counts, unpruned, its idf left to the kernel."""
    postings, _, _ = counts.inverted()
    vocab = counts._vocab
    tids = np.array([vocab["~zebra"], vocab["zebras"], vocab["stripe"]], np.int64)
    size = counts._lengths.size
    return [postings.starts, postings.ords, postings.tfs, counts._doc_lengths, postings.max_part, postings.average,
            tids, PLAN.kinds, PLAN.groups, PLAN.weights, None, termcounts.K1, termcounts.B, postings.average,
            None, None, 0, 0.0, np.zeros(size), np.zeros(size, np.int32), np.empty(size, np.int64), np.empty(size),
            postings.lengths]


def test_the_pass_writes_which_stem_covers_an_exact_form_it_read_whole_and_leaves_it_out_after() -> None:
    counts = counts_of(COVERED)  # type: ignore[arg-type]
    args = _kernel_args(counts)
    vocab = counts._vocab
    covered_by = np.full(len(vocab), -1, np.int32)
    live = float(len(COVERED))
    first = _kernels.postings_top(*args, covered_by, counts._df, live)
    assert first[2] == 0 and covered_by[vocab["zebras"]] == vocab["~zebra"]
    assert (covered_by[[vocab["~zebra"], vocab["stripe"]]] == -1).all()  # only exact forms are learnt
    second = _kernels.postings_top(*args, covered_by, counts._df, live)
    assert second[0] == first[0] and second[2] == 3  # the same documents; the form's 3 entries unread


def test_the_pass_learns_nothing_of_an_exact_form_held_without_its_stem() -> None:
    counts = counts_of(COVERED + [["zebras"]])  # type: ignore[arg-type]
    covered_by = np.full(len(counts._vocab), -1, np.int32)
    for _ in range(2):
        assert _kernels.postings_top(*_kernel_args(counts), covered_by, counts._df, 6.0)[2] == 0
    assert (covered_by == -1).all()


def test_the_pass_refuses_a_bad_covered_by_buffer_and_a_missing_idf_without_df() -> None:
    counts = counts_of(COVERED)  # type: ignore[arg-type]
    args = _kernel_args(counts)
    size = len(counts._vocab)
    for bad in (np.full(size - 1, -1, np.int32), np.full(size, -1, np.int64), np.full(size, -1.0)):
        with pytest.raises((ValueError, TypeError)):
            _kernels.postings_top(*args, bad, counts._df, 5.0)
    with pytest.raises((ValueError, TypeError)):
        _kernels.postings_top(*args)  # no idf and no df
    with pytest.raises(ValueError):
        _kernels.postings_top(*args, None, counts._df, 0.0)  # no live document to take idf over
    with pytest.raises(ValueError):
        _kernels.postings_top(*args, None, counts._df[:1], 5.0)  # a term past df's end
