"""clinlib.analysis.stats at its edges: the survivors of `make bench-mutation`'s stats group
(issue 33 §3) — input checks at their exact bounds, the messages that name the bad value, the
n = 0 and all-agree cases, and the design effect. Expected values by hand (z from scipy)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats as sps

from clinlib.analysis.stats.question import (
    StatsInputError,
    holm_bonferroni,
    mcnemar,
    minimum_detectable_effect,
    wilson_ci,
)

Z_A, Z_B = float(sps.norm.ppf(0.975)), float(sps.norm.ppf(0.8))


# --------------------------------------------------------------------------- wilson_ci
def test_wilson_nan_in_either_argument_is_refused():
    for k, n in ((math.nan, 10), (3, math.nan)):
        with pytest.raises(StatsInputError, match=r"^wilson_ci: k and n must not be NaN$"):
            wilson_ci(k, n)
    with pytest.raises(StatsInputError, match=r"^wilson_ci: k and n must be non-negative$"):
        wilson_ci(-1, 10)


def test_wilson_k_above_n_names_the_first_offending_pair():
    # pair 0 has k == n (allowed), pair 1 has k > n: the message names pair 1
    with pytest.raises(StatsInputError, match=r"k exceeds n \(k=3, n=2\)"):
        wilson_ci([2, 3], [2, 2])


def test_wilson_bounds_never_leave_zero_one():
    # k = 0 gives low = 0 and k = n gives high = 1 mathematically, but in floating point
    # centre - half is -1.4e-17 at n = 27 and centre + half is 1 + 2.2e-16 at n = 16 (found by
    # evaluating the formula unclipped over n = 1..5000): the clip keeps them in [0, 1]
    assert wilson_ci(0, 27)[0] == 0.0 and wilson_ci(16, 16)[1] == 1.0
    n = np.arange(1, 400)
    low, _ = wilson_ci(np.zeros_like(n), n)
    _, high = wilson_ci(n, n)
    assert (low >= 0.0).all() and (high <= 1.0).all()


def test_wilson_n_zero_is_nan_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no divide / invalid warning escapes
        low, high = wilson_ci(0, 0)
        lows, highs = wilson_ci([0, 1], [0, 2])
    assert math.isnan(low) and math.isnan(high)
    assert math.isnan(lows[0]) and not math.isnan(lows[1]) and math.isnan(highs[0])


# --------------------------------------------------------------------------- mcnemar
def test_mcnemar_names_the_bad_argument():
    with pytest.raises(StatsInputError, match=r"^a_correct must be boolean"):
        mcnemar([2, 0], [1, 0])
    with pytest.raises(StatsInputError, match=r"^b_correct must be boolean"):
        mcnemar([1, 0], [1, 5])
    with pytest.raises(StatsInputError, match=r"^mcnemar needs at least one paired question$"):
        mcnemar([], [])


def test_mcnemar_one_pair_and_all_agree():
    one = mcnemar([True], [False])  # b = 1, c = 0: exact, P(min <= 0 | Bin(1, 1/2)) * 2 -> 1
    assert (one.b, one.c, one.p_value, one.method) == (1, 0, 1.0, "exact")
    agree = mcnemar([True, False, True], [True, False, True])
    assert (agree.b, agree.c, agree.statistic, agree.p_value, agree.method) == (
        0,
        0,
        0.0,
        1.0,
        "exact",
    )
    forced = mcnemar([True, False], [True, False], exact=False)
    assert (forced.b, forced.c, forced.method) == (0, 0, "chi2")


# --------------------------------------------------------------------------- holm_bonferroni
def test_holm_columns_and_rejection_at_exactly_alpha():
    out = holm_bonferroni([0.05])  # m = 1: p_adj = p = alpha is rejected (p_adj <= alpha)
    assert list(out.columns) == ["p", "p_adj", "reject"]
    assert out.loc[0, "p_adj"] == 0.05 and bool(out.loc[0, "reject"])
    # zero is a valid p-value
    assert holm_bonferroni([0.0, 0.5])["p_adj"].tolist() == [0.0, 0.5]


@pytest.mark.parametrize(
    ("p", "bad"), [([0.2, 1.5], "1.5"), ([0.0, -0.1], "-0.1"), ([1.0, 1.5], "1.5")]
)
def test_holm_names_the_value_outside_zero_one(p, bad):
    with pytest.raises(StatsInputError, match=rf"^p-values must lie in \[0, 1\]; got {bad}$"):
        holm_bonferroni(p)
    with pytest.raises(StatsInputError, match=r"^holm_bonferroni needs at least one p-value$"):
        holm_bonferroni([])


# --------------------------------------------------------------------------- MDE
def test_mde_argument_bounds():
    minimum_detectable_effect(100, power=0.5)  # the closed end of [0.5, 1)
    minimum_detectable_effect(1)  # any positive n
    minimum_detectable_effect(100, paired=True, discordance=1.0)  # psi's closed end
    bad = [
        ({"power": 1.0}, r"^power must be in \[0.5, 1\), got 1.0$"),
        ({"power": 1.5}, r"^power must be in"),
        ({"p0": 0.0}, r"^p0 must be in \(0, 1\), got 0.0$"),
        ({"p0": 1.0}, r"^p0 must be in \(0, 1\)"),
        ({"p0": 1.5}, r"^p0 must be in \(0, 1\)"),
        ({"n": 0}, r"^n must be positive$"),
        ({"design_effect": math.nan}, r"^design_effect must be positive, got nan$"),
        ({"design_effect": 0.0}, r"^design_effect must be positive, got 0.0$"),
        ({"discordance": 0.3}, r"^discordance applies only with paired=True$"),
        ({"paired": True, "discordance": 0.0}, r"^discordance must be in \(0, 1\], got 0.0$"),
        ({"paired": True, "discordance": 1.5}, r"^discordance must be in \(0, 1\]"),
    ]
    for kwargs, message in bad:
        with pytest.raises(StatsInputError, match=message):
            minimum_detectable_effect(**{"n": 100, **kwargs})


def test_mde_design_effect_divides_n():
    # deff = 2 halves the effective size: MDE(200, deff=2) = MDE(100) = 2.8016 * sqrt(0.5 / 100)
    by_hand = (Z_A + Z_B) * math.sqrt(2 * 0.25 / 100)
    assert minimum_detectable_effect(200, design_effect=2.0) == pytest.approx(by_hand, rel=1e-12)
    assert minimum_detectable_effect(50, design_effect=0.5) == pytest.approx(by_hand, rel=1e-12)


def test_paired_mde_near_its_smallest_n():
    # n = 4, psi = 1: disc = 4 + z_b^2 - z_a^2 = 0.863 (> 0) and
    # d = (z_a * 2 + z_b * sqrt(disc)) / (4 + z_b^2) = 0.9986 <= psi: a value, not NaN
    disc = 4 + Z_B**2 - Z_A**2
    d = (Z_A * 2 + Z_B * math.sqrt(disc)) / (4 + Z_B**2)
    got = minimum_detectable_effect(4, paired=True, discordance=1.0)
    assert type(got) is float and got == pytest.approx(d, rel=1e-12) and 0.99 < got < 1.0
    # psi = 0.5: the same root times sqrt(0.5) is 0.706 > psi: no d <= psi exists -> NaN
    assert math.isnan(minimum_detectable_effect(4, paired=True, discordance=0.5))
    # n = 3: disc < 0 -> NaN, quietly
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(minimum_detectable_effect(3, paired=True, discordance=1.0))
