"""clinlib.analysis.meaning: comparisons name pooling, population and role from the labels;
intervals stay inside their quantity's range; sign words follow the sign (cases by hand)."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.analysis import meaning
from clinlib.analysis.meaning import Figure, Incomparable


def test_clip_interval_keeps_a_difference_of_proportions_in_range():
    # notebook 03's worst case: diff -0.98, CR1 interval -1.019 to -0.942
    assert meaning.clip_interval(-1.019, -0.942, "difference of proportions") == (-1.0, -0.942)
    assert meaning.clip_interval(0.95, 1.07, "proportion") == (0.95, 1.0)
    assert meaning.clip_interval(-0.2, 0.3, "difference of proportions") == (-0.2, 0.3)
    with pytest.raises(ValueError, match="quantity"):
        meaning.clip_interval(0, 1, "odds")
    with pytest.raises(ValueError, match="low above high"):
        meaning.clip_interval(0.5, 0.1, "proportion")


@pytest.mark.parametrize(
    ("delta", "want"), [(0.043, "rise"), (-0.14, "drop"), (0.0, "no change"), (0.001, "rise")]
)
def test_sign_word_follows_the_sign(delta, want):
    assert meaning.sign_word(delta) == want


def test_sign_word_tolerance_and_words():
    assert meaning.sign_word(0.001, tol=0.005) == "no change"
    assert meaning.sign_word(-0.2, up="gain", down="loss") == "loss"


@pytest.mark.parametrize(
    ("strategy", "want"),
    [
        ("mem0", "paper strategy"),
        ("oracle", "control"),
        ("event-table", "control"),
        ("core-memory", "variant"),
        ("dense-retrieval[k=3]", "variant"),
    ],
)
def test_role_from_the_strategy_label(strategy, want):
    assert meaning.role(strategy) == want


def test_compare_refuses_across_pooling_population_and_role():
    kit_macro = Figure(0.61, "macro", "full cohort")
    paper_pooled = Figure(0.55, "pooled", "full cohort")
    with pytest.raises(Incomparable, match="macro figure with a pooled"):
        meaning.compare(kit_macro, paper_pooled)
    with pytest.raises(Incomparable, match="population"):
        meaning.compare(Figure(0.4, "pooled", "20-patient subset"), paper_pooled)
    with pytest.raises(Incomparable, match="role"):
        meaning.compare(Figure(0.9, "pooled", "full cohort", "control"), paper_pooled)
    assert meaning.compare(Figure(0.6, "pooled", "full cohort"), paper_pooled) == (
        "pooled, full cohort, paper strategy"
    )
    with pytest.raises(ValueError, match="pooling"):
        Figure(0.5, "mean", "full cohort")


def test_populations_and_labels_from_the_answered_questions():
    questions = pd.DataFrame({"qid": ["a", "b", "c"], "subject_ids": [[1], [2], [3, 1]]})
    preds = pd.DataFrame(
        {
            "strategy": ["mem0", "mem0", "mem0", "history-visits(m=1)", "oracle", "oracle"],
            "qid": ["a", "b", "c", "a", "b", "c"],
        }
    )
    pops = meaning.populations(preds, questions)
    assert pops["mem0"] == "full cohort"
    assert pops["history-visits(m=1)"] == "1-patient subset"  # patient 1 only
    assert pops["oracle"] == "full cohort"  # b and c cover patients 1, 2, 3
    table = pd.DataFrame({"strategy": ["mem0", "history-visits(m=1)", "oracle"]})
    out = meaning.label_strategies(table, preds, questions)
    assert out["role"].tolist() == ["paper strategy", "variant", "control"]
    assert out["population"].tolist() == ["full cohort", "1-patient subset", "full cohort"]
