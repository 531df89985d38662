"""PopMedQA App. C metrics: by hand, against scikit-learn's rand_score and scipy's kendalltau,
and a Hajek IPW example worked by hand."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy.stats import kendalltau
from sklearn.metrics import rand_score

from clinlib.tasks.population import metrics as m


def test_precision_at_k_by_hand():
    assert m.precision_at_k(["a", "b", "c"], ["a", "c", "d"]) == pytest.approx(2 / 3)
    # extra predictions beyond k are cut; duplicates count once
    assert m.precision_at_k(["a", "a", "x", "c"], ["a", "c"]) == pytest.approx(1 / 2)
    with pytest.raises(ValueError):
        m.precision_at_k(["a"], [])


def test_accuracy_and_f1_by_hand():
    assert m.accuracy({"1": True, "2": False}, {"1": True, "2": True, "3": False}) == pytest.approx(
        1 / 3
    )
    # F1: P = 1/2, R = 1/3 -> 2 * (1/6) / (5/6) = 0.4
    assert m.f1(["a", "x"], ["a", "b", "c"]) == pytest.approx(0.4)
    assert m.f1([], []) == 1.0 and m.f1(["x"], ["a"]) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_rand_index_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    true = rng.integers(0, 3, size=12)
    pred = rng.integers(0, 4, size=12)
    as_clusters = lambda lab: [[i for i in range(12) if lab[i] == c] for c in sorted(set(lab))]  # noqa: E731
    assert m.rand_index(as_clusters(pred), as_clusters(true)) == pytest.approx(
        rand_score(true, pred)
    )


def test_rand_index_by_hand():
    # truth {a,b},{c}; prediction {a},{b,c}: pairs ab (same/diff: wrong), ac (diff/diff: right),
    # bc (diff/same: wrong) -> 1/3
    assert m.rand_index([["a"], ["b", "c"]], [["a", "b"], ["c"]]) == pytest.approx(1 / 3)
    # a missing item is a singleton: truth {a,b}; prediction {a} only -> ab wrong -> 0
    assert m.rand_index([["a"]], [["a", "b"]]) == 0.0


def _tau_between_scipy(pred, cohort):
    """scipy's tau-b on the between-cohort pairs: one pair at a time (2 items, untied) gives
    +1 / -1; averaging those is (C - D) / pairs."""
    pos = {x: i for i, x in enumerate(pred)}
    vals = []
    for a, b in combinations(sorted(cohort), 2):
        if cohort[a] != cohort[b]:
            vals.append(kendalltau([-pos[a], -pos[b]], [cohort[a], cohort[b]]).statistic)
    return float(np.mean(vals))


@pytest.mark.parametrize("seed", range(5))
def test_kendall_between_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    items = [f"p{i}" for i in range(9)]
    cohort = {x: int(c) for x, c in zip(items, rng.integers(1, 4, size=9), strict=True)}
    pred = list(rng.permutation(items))
    assert m.kendall_tau_between(pred, cohort) == pytest.approx(_tau_between_scipy(pred, cohort))


def test_kendall_between_all_pairs_equals_scipy_when_cohorts_are_singletons():
    cohort = {"a": 4, "b": 3, "c": 2, "d": 1}
    pred = ["b", "a", "d", "c"]
    ref = kendalltau([4, 3, 2, 1], [cohort[x] for x in ["a", "b", "c", "d"]])
    assert ref.statistic == 1.0
    # predicted positions: a=1, b=0, c=3, d=2 -> scipy on (-position, truth)
    expected = kendalltau([-1, 0, -3, -2], [4, 3, 2, 1]).statistic
    assert m.kendall_tau_between(pred, cohort) == pytest.approx(expected)
    assert m.kendall_tau_between(["a", "b", "c", "d"], cohort) == 1.0


def test_kendall_within_cohort_order_is_ignored():
    cohort = {"a": 2, "b": 2, "c": 1}
    assert m.kendall_tau_between(["b", "a", "c"], cohort) == 1.0
    assert m.kendall_tau_between(["c", "a", "b"], cohort) == -1.0


def test_hajek_worked_example():
    # Stratum X=1: 3 patients, 2 treated -> e = 2/3; stratum X=0: 2 patients, 1 treated -> e = 1/2.
    treated = [1, 1, 0, 1, 0]
    x = [1, 1, 1, 0, 0]
    y = [10.0, 12.0, 20.0, 5.0, 9.0]
    e = m.stratum_propensity(treated, x)
    assert e == pytest.approx([2 / 3, 2 / 3, 2 / 3, 1 / 2, 1 / 2])
    # treated arm: weights 1.5, 1.5, 2 -> (15 + 18 + 10) / 5 = 8.6
    # control arm: weights 1/(1/3) = 3 (y=20), 1/(1/2) = 2 (y=9) -> (60 + 18) / 5 = 15.6
    assert m.hajek_ate(treated, y, e) == pytest.approx(8.6 - 15.6)
    assert m.absolute_error(-7.5, m.hajek_ate(treated, y, e)) == pytest.approx(0.5)


def test_hajek_needs_positivity():
    with pytest.raises(ValueError):
        m.hajek_ate([1, 1], [1.0, 2.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        m.absolute_error(math.nan, 1.0)
