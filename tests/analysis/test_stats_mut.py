"""clinlib.analysis.stats' bootstrap, Pearson and pairwise McNemar at their edges (issue 33
§3, the `stats` mutation group): every message whole, the input checks at their bounds, and
expected values by hand, from scipy, or from a numpy re-implementation written here.

The bootstrap's contract is "seeded percentile bootstrap with numpy.random.default_rng(seed)":
resample i draws its n row indices as row i of ``rng.integers(0, n, size=(n_boot, n))`` (the
same indices for both samples of a pair), and the CI is numpy's linear-interpolation
quantiles at alpha / 2 and 1 - alpha / 2. :func:`_reference` does exactly that in one draw.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats as sps

from clinlib.analysis.stats import question as stats  # reads its private helpers too
from clinlib.analysis.stats.question import (
    StatsInputError,
    bootstrap_ci,
    paired_bootstrap_diff,
    pairwise_mcnemar,
    pearson,
)


def _reference(samples, stat_rows, n_boot, alpha, seed):
    """Percentile bootstrap by hand: the resampled statistic of each sample, one draw."""
    n = len(samples[0])
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    boots = [stat_rows(np.asarray(s, dtype=float)[idx]) for s in samples]
    return boots, [alpha / 2, 1 - alpha / 2]


# distinct values, so resampled means and medians rarely tie: a quantile taken from 2,000 vs
# 2,001 resamples, or at 1/3 vs 1/2 of alpha, differs (with 0/1 data it often does not)
X = np.array([0.3, 1.7, 2.2, 0.9, 5.1, 3.3, 0.1, 4.4, 2.8, 1.1, 0.6, 7.9])
Y = np.array([1.2, 0.4, 2.9, 0.8, 3.5, 1.6, 0.2, 6.1, 0.7, 2.4, 1.9, 4.3])
# X's resampled means are multiples of 1/120 and still tie near the 2.5 % quantile; sums of
# square roots of distinct primes are equal only for the same multiset
R = np.sqrt([2.0, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37])


# --------------------------------------------------------------------------- bootstrap_ci
def test_bootstrap_defaults_are_2000_resamples_seed_0_alpha_005():
    (boot,), q = _reference([R], lambda s: s.mean(axis=1), 2000, 0.05, 0)
    assert bootstrap_ci(R) == tuple(np.quantile(boot, q))
    low, high = bootstrap_ci(R)
    assert type(low) is float and type(high) is float


@pytest.mark.parametrize(("n_boot", "alpha", "seed"), [(1, 0.05, 3), (2, 0.5, 1), (37, 0.2, 9)])
def test_bootstrap_matches_the_reference(n_boot, alpha, seed):
    (boot,), q = _reference([X], lambda s: s.mean(axis=1), n_boot, alpha, seed)
    got = bootstrap_ci(X, n_boot=n_boot, alpha=alpha, seed=seed)
    assert got == tuple(np.quantile(boot, q))
    if n_boot == 1:  # one resample: both ends are its mean
        assert got[0] == got[1] == boot[0]


def test_bootstrap_of_a_two_point_sample_by_hand():
    # two values 0 and 1: a resample's mean is 0, 1/2 or 1 (probabilities 1/4, 1/2, 1/4).
    # Of 2,000 means about 500 are 0 and 500 are 1; the 2.5 % quantile interpolates the 50th
    # and 51st smallest (both 0) and the 97.5 % one the 50th and 51st largest (both 1)
    assert bootstrap_ci([0.0, 1.0]) == (0.0, 1.0)
    # at alpha = 0.6 the 30 % and 70 % quantiles (the 600th and 1,400th smallest, about)
    # both fall among the ~1,000 means of 1/2
    assert bootstrap_ci([0.0, 1.0], alpha=0.6) == (0.5, 0.5)


def test_bootstrap_with_a_stat_without_axis_and_a_builtin():
    # max has no inspectable signature (inspect raises ValueError): called per resample
    (boot,), q = _reference([X], lambda s: s.max(axis=1), 300, 0.05, 5)
    expected = tuple(np.quantile(boot, q))
    assert bootstrap_ci(X, stat=max, n_boot=300, seed=5) == expected
    assert bootstrap_ci(X, stat=lambda v: v.max(), n_boot=300, seed=5) == expected
    assert stats._takes_axis(max) is False
    assert stats._takes_axis(np.mean) is True
    assert stats._takes_axis(lambda v: v) is False


def test_bootstrap_calls_a_vectorised_stat_once_per_block(monkeypatch):
    shapes = []

    def mean(values, axis=None):
        shapes.append(values.shape)
        return values.mean(axis=axis)

    # at most 120 elements per block: 12 rows of n = 10
    monkeypatch.setattr(stats, "_BOOT_BLOCK_ELEMENTS", 120)
    x = X[:10]
    (boot,), q = _reference([x], lambda s: s.mean(axis=1), 30, 0.05, 2)
    assert bootstrap_ci(x, stat=mean, n_boot=30, seed=2) == tuple(np.quantile(boot, q))
    assert shapes == [(12, 10), (12, 10), (6, 10)]
    # fewer elements than one row: one row per block, never zero
    monkeypatch.setattr(stats, "_BOOT_BLOCK_ELEMENTS", 5)
    shapes.clear()
    assert bootstrap_ci(x, stat=mean, n_boot=3, seed=2) == bootstrap_ci(x, n_boot=3, seed=2)
    assert shapes == [(1, 10)] * 3


def test_bootstrap_stat_values_are_floats():
    # a statistic returning booleans or integers is treated as 0/1 / numbers
    def any_two(values):
        return bool(values.sum() >= 30)

    def any_two_rows(values, axis):
        return values.sum(axis=axis) >= 30

    (boot,), q = _reference([X], lambda s: (s.sum(axis=1) >= 30).astype(float), 200, 0.5, 4)
    expected = tuple(np.quantile(boot, q))
    assert 0.0 < np.mean(boot) < 1.0  # both outcomes occur
    assert bootstrap_ci(X, stat=any_two, n_boot=200, alpha=0.5, seed=4) == expected
    assert bootstrap_ci(X, stat=any_two_rows, n_boot=200, alpha=0.5, seed=4) == expected


def test_bootstrap_argument_checks():
    bootstrap_ci(X, n_boot=1)  # the smallest n_boot
    for bad in (0, -3):
        with pytest.raises(StatsInputError, match=rf"^n_boot must be >= 1, got {bad}$"):
            bootstrap_ci(X, n_boot=bad)
    for alpha in (0.0, 1.0, 1.5):
        with pytest.raises(StatsInputError, match=rf"^alpha must be in \(0, 1\), got {alpha}$"):
            bootstrap_ci(X, alpha=alpha)
        with pytest.raises(StatsInputError, match=r"^alpha must be in \(0, 1\)"):
            paired_bootstrap_diff(X, X, alpha=alpha)
    with pytest.raises(StatsInputError, match=r"^n_boot must be >= 1, got 0$"):
        paired_bootstrap_diff(X, X, n_boot=0)


def test_one_dimensional_float_input_messages():
    with pytest.raises(
        StatsInputError, match=r"^values must be one-dimensional, got shape \(2, 2\)$"
    ):
        bootstrap_ci([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(StatsInputError, match=r"^values must be one-dimensional, got shape \(\)$"):
        bootstrap_ci(1.0)
    with pytest.raises(StatsInputError, match=r"^values is empty$"):
        bootstrap_ci([])
    with pytest.raises(StatsInputError, match=r"^values contains 2 NaN value\(s\)$"):
        bootstrap_ci([1.0, math.nan, 0.0, math.nan])
    with pytest.raises(StatsInputError, match=r"^a contains 1 NaN value\(s\)$"):
        paired_bootstrap_diff([math.nan, 1.0], [1.0, 1.0])
    with pytest.raises(StatsInputError, match=r"^b is empty$"):
        paired_bootstrap_diff([1.0], [])
    with pytest.raises(StatsInputError, match=r"^x must be one-dimensional"):
        pearson([[1, 2, 3, 4]], [1, 2, 3, 4])
    with pytest.raises(StatsInputError, match=r"^y contains 1 NaN"):
        pearson([1, 2, 3, 4], [1, 2, 3, math.nan])
    # booleans and integers are read as numbers
    assert stats.as_1d_float([True, False, 2], "v").tolist() == [1.0, 0.0, 2.0]
    assert stats.as_1d_float([True, False], "v").dtype == np.float64


# --------------------------------------------------------------------------- paired diff
def test_paired_bootstrap_diff_matches_the_reference():
    a, b = X, Y
    (ba, bb), q = _reference([a, b], lambda s: np.median(s, axis=1), 400, 0.1, 6)
    low, high = np.quantile(ba - bb, q)
    res = paired_bootstrap_diff(a, b, stat=np.median, n_boot=400, alpha=0.1, seed=6)
    # the estimate is median(a) - median(b) = (1.7 + 2.2) / 2 - (1.6 + 1.9) / 2 = 0.2, not
    # the median of the differences ((-0.1 + 0.1) / 2 = 0)
    assert res.estimate == pytest.approx(0.2, abs=1e-12)
    assert np.median(a - b) == pytest.approx(0.0, abs=1e-12)
    assert (res.estimate, res.low, res.high) == (np.median(a) - np.median(b), low, high)
    assert all(type(v) is float for v in res)
    (ba, bb), q = _reference([a, b], lambda s: s.mean(axis=1), 2000, 0.05, 0)
    low, high = np.quantile(ba - bb, q)
    assert paired_bootstrap_diff(a, b) == (a.mean() - b.mean(), low, high)


def test_paired_bootstrap_diff_length_message():
    with pytest.raises(StatsInputError, match=r"^paired samples differ in length: a=3, b=2$"):
        paired_bootstrap_diff([1.0, 0.0, 1.0], [1.0, 0.0])


# --------------------------------------------------------------------------- pearson
def test_pearson_at_n_four_by_hand():
    # xc = (-1.5, -.5, .5, 1.5), yc = (-1.5, .5, -.5, 1.5): r = 4 / sqrt(5 * 5) = 0.8;
    # t = 0.8 * sqrt(2 / 0.36) = 1.8856 on 2 df; Fisher z: atanh(0.8) +- 1.96 / sqrt(1)
    res = pearson([1, 2, 3, 4], [1, 3, 2, 4])
    assert res.r == pytest.approx(0.8, rel=1e-12)
    t = 0.8 * math.sqrt(2 / 0.36)
    assert res.p == pytest.approx(2 * sps.t.sf(t, 2), rel=1e-12)
    # with 2 df, P(|T| > t) = 1 - t / sqrt(t^2 + 2), and t / sqrt(t^2 + 2) = r: p = 0.2
    assert res.p == pytest.approx(0.2, rel=1e-9)
    z = float(sps.norm.ppf(0.975))
    assert res.ci_low == pytest.approx(math.tanh(math.atanh(0.8) - z), rel=1e-12)
    assert res.ci_high == pytest.approx(math.tanh(math.atanh(0.8) + z), rel=1e-12)
    assert res.n == 4 and type(res.n) is int


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_pearson_negative_r_matches_scipy(alpha):
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    y = [3.0, 1.0, 2.0, 0.5, 0.0, 1.5]
    res = pearson(x, y, alpha=alpha)
    ref = sps.pearsonr(x, y)
    ci = ref.confidence_interval(confidence_level=1 - alpha)
    assert res.r < 0
    assert res.r == pytest.approx(ref.statistic, rel=1e-12)
    assert res.p == pytest.approx(ref.pvalue, rel=1e-9)
    assert (res.ci_low, res.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-9)


def test_pearson_of_booleans():
    x = [True, False, True, False, True]
    y = [1.0, 2.0, 3.0, 4.0, 6.0]
    ref = sps.pearsonr([1.0, 0.0, 1.0, 0.0, 1.0], y)
    assert pearson(x, y).r == pytest.approx(ref.statistic, rel=1e-12)


def test_pearson_perfect_lines_and_float_overshoot():
    assert tuple(pearson([1, 2, 3, 4], [8, 6, 4, 2])) == (-1.0, 0.0, -1.0, -1.0, 4)
    # x = 0.1 .. 0.5, y = +-0.7 x: the formula gives |r| = 1 + 2.2e-16 in floating point; the
    # clip to [-1, 1] makes it the perfect line it is
    x = [0.1, 0.2, 0.3, 0.4, 0.5]
    for sign in (1, -1):
        y = [sign * 0.7 * v for v in x]
        assert tuple(pearson(x, y)) == (sign * 1.0, 0.0, sign * 1.0, sign * 1.0, 5)


def test_pearson_messages():
    with pytest.raises(StatsInputError, match=r"^x and y differ in length: 4 vs 5$"):
        pearson([1, 2, 3, 4], [1, 2, 3, 4, 5])
    with pytest.raises(
        StatsInputError, match=r"^pearson needs n >= 4 for a Fisher-z interval, got n=3$"
    ):
        pearson([1, 2, 3], [1, 2, 4])
    for x, y in (([1, 1, 1, 1], [1, 2, 3, 4]), ([1, 2, 3, 4], [5, 5, 5, 5])):
        with pytest.raises(
            StatsInputError, match=r"^pearson is undefined when x or y is constant$"
        ):
            pearson(x, y)
    with pytest.raises(StatsInputError, match=r"^alpha must be in \(0, 1\), got 1$"):
        pearson([1, 2, 3, 4], [1, 3, 2, 4], alpha=1)


# --------------------------------------------------------------------------- bool input
def test_bool_array_messages():
    with pytest.raises(StatsInputError, match=r"^a_correct has 2 missing value\(s\)$"):
        stats.mcnemar(pd.Series([True, None, math.nan]), [True, False, True])
    with pytest.raises(
        StatsInputError, match=r"^b_correct must be one-dimensional, got shape \(1, 2\)$"
    ):
        stats.mcnemar([True, False], [[True, False]])
    with pytest.raises(
        StatsInputError, match=r"^a_correct must be boolean \(or 0/1\), got dtype <U3$"
    ):
        stats.mcnemar(["yes", "no"], [True, False])
    with pytest.raises(
        StatsInputError,
        match=r"^b_correct must be boolean \(or 0/1\); found value 2 at position 2$",
    ):
        stats.mcnemar([1, 0, 1, 0], [1, 0, 2, 3])
    with pytest.raises(StatsInputError, match=r"found value -1.0 at position 0$"):
        stats.mcnemar([-1.0, 1.0], [1.0, 1.0])
    # a Series without missing values, 0/1 numbers and bools are all fine
    assert stats.as_bool_array(pd.Series([1, 0, 1]), "v").tolist() == [True, False, True]
    assert stats.as_bool_array(np.array([0.0, 1.0]), "v").dtype == bool
    both = np.array([True, False])
    assert stats.as_bool_array(both, "v") is both


# --------------------------------------------------------------------------- pairwise
# Eight questions, one cell column. A is always right; B right on q7, q8; C on q1..q7.
#   A vs B: b = 6, c = 0: exact p = 2 / 2^6 = 0.03125
#   A vs C: b = 1, c = 0: exact p = min(1, 2 * 1/2) = 1
#   B vs C: b = 1 (q8), c = 6 (q1..q6): p = 2 * (1 + 7) / 2^7 = 0.125
# Holm, m = 3: 0.03125 * 3 = 0.09375; 0.125 * 2 = 0.25; 1 * 1 = 1 (running maximum).
RIGHT = {"A": [1] * 8, "B": [0] * 6 + [1, 1], "C": [1] * 7 + [0]}


def _frame(cells=("C", "A", "B"), correct="correct"):
    return pd.DataFrame(
        [
            {"qid": f"q{q + 1}", "strategy": c, correct: bool(RIGHT[c][q])}
            for c in cells
            for q in range(8)
        ]
    )


def test_pairwise_by_hand():
    out = pairwise_mcnemar(_frame(), cell=("strategy",))
    assert list(out.columns) == [
        "strategy_a", "strategy_b", "n", "acc_a", "acc_b", "diff", "b", "c",
        "statistic", "p_value", "method", "p_adj", "reject",
    ]  # fmt: skip
    assert out[["strategy_a", "strategy_b"]].values.tolist() == [
        ["A", "B"], ["A", "C"], ["B", "C"],
    ]  # fmt: skip
    assert out["n"].tolist() == [8, 8, 8]
    assert out["acc_a"].tolist() == [1.0, 1.0, 0.25]
    assert out["acc_b"].tolist() == [0.25, 0.875, 0.875]
    assert out["diff"].tolist() == [0.75, 0.125, -0.625]
    assert out["b"].tolist() == [6, 1, 1] and out["c"].tolist() == [0, 0, 6]
    assert out["statistic"].tolist() == [0.0, 0.0, 1.0]  # min(b, c)
    assert out["p_value"].tolist() == pytest.approx([0.03125, 1.0, 0.125], rel=1e-12)
    assert out["method"].tolist() == ["exact"] * 3
    assert out["p_adj"].tolist() == pytest.approx([0.09375, 1.0, 0.25], rel=1e-12)
    assert out["reject"].tolist() == [False, False, False]
    # the family's alpha reaches Holm: at 0.1, A vs B is rejected
    looser = pairwise_mcnemar(_frame(), cell=("strategy",), alpha=0.1)
    assert looser["reject"].tolist() == [True, False, False]


def test_pairwise_options():
    frame = _frame(correct="ok")
    frame["ok"] = frame["ok"].astype(int)  # 0/1 numbers are fine
    out = pairwise_mcnemar(frame, cell=["strategy"], pairs=[("B", "A")], correct_col="ok")
    assert out[["strategy_a", "strategy_b", "b", "c", "diff"]].values.tolist() == [
        ["B", "A", 0, 6, -0.75]
    ]
    # a pair given as 1-tuples, and the chi-square test forced
    forced = pairwise_mcnemar(
        frame, cell=["strategy"], pairs=[(("A",), ("B",))], correct_col="ok", exact=False
    )
    # (|6 - 0| - 1)^2 / 6 = 25 / 6
    assert forced.loc[0, "method"] == "chi2"
    assert forced.loc[0, "statistic"] == pytest.approx(25 / 6, rel=1e-12)
    assert forced.loc[0, "p_value"] == pytest.approx(sps.chi2.sf(25 / 6, 1), rel=1e-12)


def test_pairwise_two_cell_columns_and_a_two_column_key():
    frame = _frame()
    frame["backbone"] = "hk"
    frame["setting"] = "s1"
    other = frame.assign(setting="s2")  # the same questions in another setting
    both = pd.concat([frame, other], ignore_index=True)
    out = pairwise_mcnemar(both, key=["qid", "setting"], pairs=[(("A", "hk"), ("B", "hk"))])
    assert out[["strategy_a", "backbone_a", "strategy_b", "backbone_b"]].values.tolist() == [
        ["A", "hk", "B", "hk"]
    ]
    assert (out.loc[0, "n"], out.loc[0, "b"], out.loc[0, "c"]) == (16, 12, 0)


def test_pairwise_pairs_only_shared_questions():
    frame = _frame()
    # B without q1 and q8: A vs B on q2..q7, b = 5 (q2..q6: B wrong), c = 0 (A never wrong)
    frame = frame[~((frame["strategy"] == "B") & frame["qid"].isin(["q1", "q8"]))]
    out = pairwise_mcnemar(frame, cell=["strategy"], pairs=[("A", "B"), ("A", "C")])
    assert out["n"].tolist() == [6, 8]
    assert (out.loc[0, "b"], out.loc[0, "c"], out.loc[0, "acc_b"]) == (5, 0, 1 / 6)


def test_pairwise_messages():
    frame = _frame()
    with pytest.raises(
        StatsInputError,
        match=r"^pairwise_mcnemar: unknown cell \('Z',\) for columns \['strategy'\]; "
        r"available: \[\('A',\), \('B',\), \('C',\)\]$",
    ):
        pairwise_mcnemar(frame, cell=["strategy"], pairs=[("A", "Z")])
    with pytest.raises(StatsInputError, match=r"^pairwise_mcnemar: unknown cell \('Z',\)"):
        pairwise_mcnemar(frame, cell=["strategy"], pairs=[("Z", "A")])
    for one, pairs in ((_frame(cells=("A",)), None), (frame, [])):
        with pytest.raises(
            StatsInputError, match=r"^pairwise_mcnemar: fewer than two cells to compare$"
        ):
            pairwise_mcnemar(one, cell=["strategy"], pairs=pairs)
    with pytest.raises(
        StatsInputError,
        match=r"^pairwise_mcnemar: frame lacks column\(s\) \['correct'\]; "
        r"has \['qid', 'strategy', 'ok'\]$",
    ):
        pairwise_mcnemar(_frame(correct="ok"), cell=["strategy"])
    with pytest.raises(StatsInputError, match=r"lacks column\(s\) \['backbone'\]"):
        pairwise_mcnemar(frame)
    # q4 and q6 of C twice each, q4's copy with the other answer: 4 rows, the first named
    copies = frame.iloc[[3, 5]].assign(correct=[False, True])
    dup = pd.concat([frame, copies], ignore_index=True)
    with pytest.raises(
        StatsInputError,
        match=r"^pairwise_mcnemar: 4 rows repeat a question within a cell, e\.g\. "
        r"\{'qid': 'q4', 'strategy': 'C'\}; filter by setting/task or add the "
        r"distinguishing column to `key`$",
    ):
        pairwise_mcnemar(dup, cell=["strategy"])
    disjoint = frame[
        ((frame["strategy"] == "A") & frame["qid"].isin(["q1", "q2"]))
        | ((frame["strategy"] == "B") & frame["qid"].isin(["q3"]))
    ]
    with pytest.raises(
        StatsInputError,
        match=r"^pairwise_mcnemar: cells \('A',\) and \('B',\) share no questions$",
    ):
        pairwise_mcnemar(disjoint, cell=["strategy"])
    with pytest.raises(StatsInputError, match=r"^correct must be boolean \(or 0/1\)"):
        pairwise_mcnemar(frame.assign(correct="yes"), cell=["strategy"])


def test_cell_label():
    assert stats._cell_label("A") == ("A",)
    assert stats._cell_label(("A", "hk")) == ("A", "hk")
