"""Tests for clinlib.analysis.stats against statsmodels / scipy and values worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint

from clinlib.analysis import stats
from clinlib.analysis.stats.question import StatsInputError

# ----------------------------------------------------------------------------- Wilson


def test_wilson_hand_value():
    # k=5, n=10, z=1.959964: centre = 0.5, half = z/(1+z^2/n) * sqrt(.025 + z^2/400)
    # = 1.416013 * 0.186021 = 0.263407.
    low, high = stats.wilson_ci(5, 10)
    assert isinstance(low, float)
    assert low == pytest.approx(0.236593, abs=1e-6)
    assert high == pytest.approx(0.763407, abs=1e-6)


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.1])
def test_wilson_matches_statsmodels_vectorised(alpha):
    n = np.array([1, 7, 53, 53, 53, 134, 600, 1500, 1500, 6271])
    k = np.array([0, 7, 0, 10, 53, 31, 300, 1, 1499, 4212])
    low, high = stats.wilson_ci(k, n, alpha=alpha)
    ref_low, ref_high = proportion_confint(k, n, alpha=alpha, method="wilson")
    np.testing.assert_allclose(low, ref_low, atol=1e-12)
    np.testing.assert_allclose(high, ref_high, atol=1e-12)
    assert low.shape == n.shape


def test_wilson_zero_n_gives_nan_and_bad_input_errors():
    low, high = stats.wilson_ci(np.array([0, 2]), np.array([0, 4]))
    assert np.isnan(low[0]) and np.isnan(high[0]) and low[1] > 0
    with pytest.raises(StatsInputError, match="k exceeds n"):
        stats.wilson_ci(5, 4)
    with pytest.raises(StatsInputError, match="non-negative"):
        stats.wilson_ci(-1, 4)
    with pytest.raises(StatsInputError, match="alpha"):
        stats.wilson_ci(1, 4, alpha=1.5)


def test_wilson_reproduces_paper_half_widths_for_four_backbones_pooled():
    # §3: "pooled Wilson 95% CI is ±0.6 pp" and "±1.3 pp (T1, T9)" at p = 0.5 hold for the
    # four backbones pooled (n = 4 x 6271 and 4 x 1500); a single cell at 6271 gives ±1.2 pp.
    def half(n):
        low, high = stats.wilson_ci(n / 2, n)
        return round(100 * (high - low) / 2, 1)

    assert half(4 * 6271) == 0.6
    assert half(4 * 1500) == 1.3
    assert half(6271) == 1.2


# ----------------------------------------------------------------------------- bootstrap


def test_bootstrap_equals_independent_percentile_implementation():
    # n = 5000 forces several resample blocks; one big draw from the same seed must agree.
    rng = np.random.default_rng(11)
    x = (rng.random(5000) < 0.3).astype(float)
    low, high = stats.bootstrap_ci(x, n_boot=2000, seed=4)
    ref_rng = np.random.default_rng(4)
    idx = ref_rng.integers(0, x.size, size=(2000, x.size))
    means = x[idx].mean(axis=1)
    assert (low, high) == tuple(np.quantile(means, [0.025, 0.975]))


def test_bootstrap_close_to_normal_theory_and_scipy():
    rng = np.random.default_rng(0)
    x = (rng.random(2000) < 0.3).astype(float)
    low, high = stats.bootstrap_ci(x, n_boot=4000, seed=1)
    p = x.mean()
    se = np.sqrt(p * (1 - p) / x.size)
    assert low == pytest.approx(p - 1.959964 * se, abs=0.004)
    assert high == pytest.approx(p + 1.959964 * se, abs=0.004)
    ref = sps.bootstrap(
        (x,), np.mean, n_resamples=4000, method="percentile", random_state=np.random.default_rng(2)
    ).confidence_interval
    assert low == pytest.approx(ref.low, abs=0.005)
    assert high == pytest.approx(ref.high, abs=0.005)


def test_bootstrap_seeded_axis_and_loop_paths_agree():
    x = np.arange(30, dtype=float) ** 1.5
    a = stats.bootstrap_ci(x, stat=np.median, n_boot=300, seed=7)
    b = stats.bootstrap_ci(x, stat=lambda v: float(np.median(v)), n_boot=300, seed=7)
    assert a == b
    assert stats.bootstrap_ci(x, n_boot=300, seed=7) == stats.bootstrap_ci(x, n_boot=300, seed=7)
    assert stats.bootstrap_ci(x, n_boot=300, seed=7) != stats.bootstrap_ci(x, n_boot=300, seed=8)


def test_bootstrap_constant_and_errors():
    assert stats.bootstrap_ci(np.ones(20)) == (1.0, 1.0)
    with pytest.raises(StatsInputError, match="NaN"):
        stats.bootstrap_ci([1.0, np.nan])
    with pytest.raises(StatsInputError, match="empty"):
        stats.bootstrap_ci([])
    with pytest.raises(StatsInputError, match="n_boot"):
        stats.bootstrap_ci([1.0, 0.0], n_boot=0)


def test_paired_bootstrap_diff():
    rng = np.random.default_rng(5)
    a = (rng.random(400) < 0.7).astype(float)
    b = a.copy()
    flip = rng.choice(400, size=40, replace=False)
    b[flip[:30]] = 0.0  # b loses 30 of a's correct answers ...
    b[flip[30:]] = 1.0  # ... and gains at most 10
    res = stats.paired_bootstrap_diff(a, b, n_boot=2000, seed=0)
    assert res.estimate == pytest.approx(a.mean() - b.mean())
    assert res.low < res.estimate < res.high
    # Pairing removes the shared variance: the interval is far narrower than independent
    # resampling of the two cells (whose CI half-widths add roughly in quadrature).
    lo_a, hi_a = stats.bootstrap_ci(a, seed=0)
    lo_b, hi_b = stats.bootstrap_ci(b, seed=1)
    unpaired = np.hypot(hi_a - lo_a, hi_b - lo_b)
    assert res.high - res.low < 0.5 * unpaired
    same = stats.paired_bootstrap_diff(a, a, n_boot=100)
    assert same == (0.0, 0.0, 0.0)
    with pytest.raises(StatsInputError, match="differ in length"):
        stats.paired_bootstrap_diff(a, b[:-1])


# ----------------------------------------------------------------------------- McNemar


def _pairs(b, c, both=5, neither=3):
    """Paired arrays with b (A right, B wrong) and c (A wrong, B right) discordant pairs."""
    a = [True] * b + [False] * c + [True] * both + [False] * neither
    bb = [False] * b + [True] * c + [True] * both + [False] * neither
    return np.array(a), np.array(bb)


def test_mcnemar_exact_hand_value():
    # b=10, c=2: p = 2 * P(X <= 2 | 12, 1/2) = 2 * (1 + 12 + 66) / 4096 = 0.0385742.
    res = stats.mcnemar(*_pairs(10, 2))
    assert (res.b, res.c, res.method) == (10, 2, "exact")
    assert res.statistic == 2
    assert res.p_value == pytest.approx(158 / 4096)
    assert res.p_value == pytest.approx(sps.binomtest(2, 12, 0.5).pvalue)


def test_mcnemar_chi2_hand_value():
    # b=30, c=10: (|30-10| - 1)^2 / 40 = 9.025, p = chi2_1 sf = 0.002663.
    res = stats.mcnemar(*_pairs(30, 10))
    assert res.method == "chi2"
    assert res.statistic == pytest.approx(9.025)
    assert res.p_value == pytest.approx(sps.chi2.sf(9.025, 1))
    assert res.p_value == pytest.approx(0.002663, abs=1e-6)


@pytest.mark.parametrize("b,c", [(0, 3), (4, 4), (12, 12), (24, 0), (13, 12), (40, 15), (7, 90)])
def test_mcnemar_matches_statsmodels(b, c):
    a, bb = _pairs(b, c)
    table = [[5, b], [c, 3]]  # rows: A right/wrong; cols: B right/wrong
    res = stats.mcnemar(a, bb)
    expect_exact = b + c < 25
    ref = sm_mcnemar(table, exact=expect_exact, correction=True)
    assert res.method == ("exact" if expect_exact else "chi2")
    assert res.statistic == pytest.approx(ref.statistic)
    assert res.p_value == pytest.approx(ref.pvalue)
    forced = stats.mcnemar(a, bb, exact=not expect_exact)
    ref2 = sm_mcnemar(table, exact=not expect_exact, correction=True)
    assert forced.p_value == pytest.approx(ref2.pvalue)


def test_mcnemar_rule_boundary_and_no_discordance():
    assert stats.mcnemar(*_pairs(20, 4)).method == "exact"  # b + c = 24
    assert stats.mcnemar(*_pairs(20, 5)).method == "chi2"  # b + c = 25
    res = stats.mcnemar(*_pairs(0, 0), exact=False)
    assert (res.statistic, res.p_value) == (0.0, 1.0)


def test_mcnemar_input_errors():
    with pytest.raises(StatsInputError, match="boolean"):
        stats.mcnemar([0, 1, 2], [0, 1, 1])
    with pytest.raises(StatsInputError, match="missing"):
        stats.mcnemar(pd.Series([True, None]), [True, False])
    with pytest.raises(StatsInputError, match="differ in length"):
        stats.mcnemar([1, 0], [1, 0, 1])
    assert stats.mcnemar([1, 0, 1], [0.0, 1.0, 1.0])[:2] == (1, 1)  # 0/1 numbers are fine


# ----------------------------------------------------------------------------- Holm


def test_holm_hand_example():
    # sorted p: .005*4 = .02, .01*3 = .03, .03*2 = .06, .04*1 -> max(.06, .04) = .06
    out = stats.holm_bonferroni(pd.Series([0.01, 0.04, 0.03, 0.005], index=list("abcd")))
    assert list(out.index) == list("abcd")
    np.testing.assert_allclose(out["p_adj"], [0.03, 0.06, 0.06, 0.02])
    assert out["reject"].tolist() == [True, False, False, True]


def test_holm_matches_statsmodels():
    rng = np.random.default_rng(3)
    p = np.concatenate([rng.random(8) * 0.02, rng.random(4), [1.0, 0.0]])
    for alpha in (0.05, 0.01):
        out = stats.holm_bonferroni(p, alpha=alpha)
        reject, p_adj, _, _ = multipletests(p, alpha=alpha, method="holm")
        np.testing.assert_allclose(out["p_adj"], p_adj)
        assert out["reject"].tolist() == reject.tolist()


def test_holm_errors():
    with pytest.raises(StatsInputError, match=r"\[0, 1\]"):
        stats.holm_bonferroni([0.1, 1.2])
    with pytest.raises(StatsInputError, match=r"\[0, 1\]"):
        stats.holm_bonferroni([0.1, np.nan])
    with pytest.raises(StatsInputError, match="at least one"):
        stats.holm_bonferroni([])


# ----------------------------------------------------------------------------- pairwise


def _cells_frame():
    rng = np.random.default_rng(9)
    rows = []
    acc = {("full", "hk"): 0.9, ("full", "sn"): 0.8, ("blind", "hk"): 0.2}
    for (s, bb), p in acc.items():
        for q in range(60):
            rows.append(
                {"qid": f"q{q}", "strategy": s, "backbone": bb, "correct": rng.random() < p}
            )
    return pd.DataFrame(rows)


def test_pairwise_mcnemar_counts_and_holm():
    df = _cells_frame()
    out = stats.pairwise_mcnemar(df)
    assert len(out) == 3
    wide = df.pivot(index="qid", columns=["strategy", "backbone"], values="correct")
    for _, row in out.iterrows():
        a = wide[(row["strategy_a"], row["backbone_a"])].to_numpy(bool)
        b = wide[(row["strategy_b"], row["backbone_b"])].to_numpy(bool)
        direct = stats.mcnemar(a, b)
        assert (row["b"], row["c"], row["n"]) == (direct.b, direct.c, 60)
        assert row["p_value"] == pytest.approx(direct.p_value)
        assert row["diff"] == pytest.approx(a.mean() - b.mean())
    _, p_adj, _, _ = multipletests(out["p_value"], method="holm")
    np.testing.assert_allclose(out["p_adj"], p_adj)
    assert out["reject"].tolist() == (p_adj <= 0.05).tolist()


def test_pairwise_mcnemar_explicit_pairs_and_partial_overlap():
    df = _cells_frame()
    df = df[~((df["qid"] == "q0") & (df["strategy"] == "blind"))]
    out = stats.pairwise_mcnemar(df, pairs=[(("full", "hk"), ("blind", "hk"))])
    assert len(out) == 1 and out.loc[0, "n"] == 59
    one = df[df["backbone"] == "hk"]
    out1 = stats.pairwise_mcnemar(one, cell=("strategy",), pairs=[("full", "blind")])
    assert out1.loc[0, "strategy_a"] == "full" and out1.loc[0, "b"] == out.loc[0, "b"]


def test_pairwise_mcnemar_errors():
    df = _cells_frame()
    with pytest.raises(StatsInputError, match="unknown cell"):
        stats.pairwise_mcnemar(df, pairs=[(("full", "hk"), ("dense", "hk"))])
    with pytest.raises(StatsInputError, match="repeat a question"):
        stats.pairwise_mcnemar(pd.concat([df, df.head(1)]))
    with pytest.raises(StatsInputError, match="lacks column"):
        stats.pairwise_mcnemar(df.drop(columns="correct"))


# ----------------------------------------------------------------------------- MDE

# Table 7 (Appendix G.2): task n -> MDE in pp.
TABLE7 = {1500: 5.1, 889: 6.6, 700: 7.5, 600: 8.1, 495: 8.9, 400: 9.9, 134: 17.1, 53: 27.2}


def test_mde_reproduces_table7():
    n = np.array(list(TABLE7))
    mde = stats.minimum_detectable_effect(n)
    assert np.round(100 * mde, 1).tolist() == list(TABLE7.values())
    # Hand value for T4: (1.959964 + 0.841621) * sqrt(0.5 / 53) = 2.801585 * 0.097129.
    assert stats.minimum_detectable_effect(53) == pytest.approx(0.272115, abs=1e-6)


def test_mde_matches_statsmodels_normal_ind_power():
    # NormalIndPower solves for a standardised difference; at p0 the SD is sqrt(p0 (1 - p0)).
    # It also counts the (negligible) wrong-tail rejections, hence rel=1e-5 not exact.
    for n in TABLE7:
        for p0 in (0.5, 0.2):
            es = NormalIndPower().solve_power(nobs1=n, alpha=0.05, power=0.8, ratio=1.0)
            ours = stats.minimum_detectable_effect(n, p0=p0)
            assert ours == pytest.approx(es * np.sqrt(p0 * (1 - p0)), rel=1e-5)


def test_mde_paired_solves_connor_equation():
    za, zb = sps.norm.ppf(0.975), sps.norm.ppf(0.8)
    for n in (53, 134, 1500):
        for psi in (0.5, 0.2):
            d = stats.minimum_detectable_effect(n, paired=True, discordance=psi)
            root = optimize.brentq(
                lambda x, n=n, psi=psi: (
                    n * x * x - (za * np.sqrt(psi) + zb * np.sqrt(max(psi - x * x, 0.0))) ** 2
                ),
                1e-9,
                np.sqrt(psi),
            )
            assert d == pytest.approx(root, rel=1e-9)
    # With independent errors (psi = 0.5) the paired MDE is a little below the unpaired one.
    paired = stats.minimum_detectable_effect(53, paired=True)
    assert paired < stats.minimum_detectable_effect(53)
    assert stats.minimum_detectable_effect(53, paired=True, discordance=0.2) < paired


def test_mde_unreachable_and_errors():
    assert np.isnan(stats.minimum_detectable_effect(3, paired=True, discordance=0.05))
    with pytest.raises(StatsInputError, match="power"):
        stats.minimum_detectable_effect(100, power=0.3)
    with pytest.raises(StatsInputError, match="positive"):
        stats.minimum_detectable_effect([100, 0])
    with pytest.raises(StatsInputError, match="paired=True"):
        stats.minimum_detectable_effect(100, discordance=0.3)


# ----------------------------------------------------------------------------- Pearson


def _with_exact_r(r, n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    e = rng.normal(size=n)
    x = (x - x.mean()) / x.std()
    e = e - e.mean()
    e = e - (e @ x) / (x @ x) * x  # orthogonal to x
    e = e / e.std()
    return x, r * x + np.sqrt(1 - r * r) * e


def test_pearson_matches_scipy():
    x, y = _with_exact_r(0.4, 50, seed=1)
    res = stats.pearson(x, y)
    ref = sps.pearsonr(x, y)
    ci = ref.confidence_interval(confidence_level=0.95)
    assert res.r == pytest.approx(0.4)
    assert res.r == pytest.approx(ref.statistic)
    assert res.p == pytest.approx(ref.pvalue)
    assert (res.ci_low, res.ci_high) == pytest.approx((ci.low, ci.high))
    assert res.n == 50


def test_pearson_paper_mem0_size_vs_accuracy_not_significant():
    # §6 / C.3: r = -0.129 on n = 210 patients is "uncorrelated": p > 0.05 and the
    # Fisher-z 95% CI, tanh(atanh(-0.129) +- 1.96 / sqrt(207)), spans 0.
    x, y = _with_exact_r(-0.129, 210, seed=2)
    res = stats.pearson(x, y)
    assert res.r == pytest.approx(-0.129)
    assert res.p > 0.05
    assert res.ci_low == pytest.approx(np.tanh(np.arctanh(-0.129) - 1.959964 / np.sqrt(207)))
    assert res.ci_low < 0 < res.ci_high


def test_pearson_edge_cases():
    res = stats.pearson([1, 2, 3, 4], [2, 4, 6, 8])
    assert (res.r, res.p, res.ci_low, res.ci_high) == (1.0, 0.0, 1.0, 1.0)
    with pytest.raises(StatsInputError, match="constant"):
        stats.pearson([1, 1, 1, 1], [1, 2, 3, 4])
    with pytest.raises(StatsInputError, match="n >= 4"):
        stats.pearson([1, 2, 3], [1, 2, 3])
    with pytest.raises(StatsInputError, match="differ in length"):
        stats.pearson([1, 2, 3, 4], [1, 2, 3, 4, 5])
