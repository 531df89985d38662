"""Tests for clinlib.analysis.stats.cluster: hand-worked cases, and statsmodels (OLS with
cluster-robust errors) / scipy (exact paired permutation test, one-way ANOVA) as independent
implementations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats as sps

from clinlib.analysis import stats
from clinlib.analysis.stats import cluster as cs
from clinlib.analysis.stats import cluster_tables as cr
from clinlib.analysis.stats.question import StatsInputError

# Hand case: patient A answers 1,1,0; B 0,0; C 1.  N = 6, G = 3, p = 1/2.
Y = np.array([1, 1, 0, 0, 0, 1], dtype=float)
CL = np.array(["A", "A", "A", "B", "B", "C"])


def _sm_cluster_se(y: np.ndarray, clusters: np.ndarray) -> float:
    codes = pd.factorize(clusters)[0]
    fit = sm.OLS(y, np.ones((y.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": codes})
    return float(fit.bse[0])


def _random_clustered(seed: int, g: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Binary outcomes with a patient effect and unequal cluster sizes (1..30)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 31, size=g)
    p_g = rng.beta(2, 2, size=g)
    y = np.concatenate([rng.random(s) < p for s, p in zip(sizes, p_g, strict=True)])
    return y.astype(float), np.repeat(np.arange(g) * 7 + 3, sizes)


# ----------------------------------------------------------------------------- CR1 / deff


def test_cluster_robust_hand_value():
    # Residual sums: A 2 - 1.5 = 0.5, B 0 - 1 = -1, C 1 - 0.5 = 0.5; sum of squares 1.5.
    # Var = G/(G-1) * 1.5 / N^2 = 1.5 * 1.5 / 36 = 1/16 -> se = 0.25.
    res = cs.cluster_robust_ci(Y, CL)
    assert res.estimate == 0.5 and res.se == pytest.approx(0.25)
    z = sps.norm.ppf(0.975)
    assert (res.low, res.high) == pytest.approx((0.5 - 0.25 * z, 0.5 + 0.25 * z))
    assert (res.n, res.n_clusters) == (6, 3)
    # Binomial variance p(1-p)/N = 1/24; deff = (1/16) / (1/24) = 1.5.
    assert cs.design_effect(Y, CL).deff == pytest.approx(1.5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cluster_robust_se_matches_statsmodels_ols_cluster(seed):
    y, cl = _random_clustered(seed)
    assert cs.cluster_robust_ci(y, cl).se == pytest.approx(_sm_cluster_se(y, cl), rel=1e-10)


def test_icc_hand_value_and_kish_design_effect():
    # Means 2/3, 0, 1; MSB = (3(1/6)^2 + 2(1/2)^2 + (1/2)^2) / 2 = 5/12;
    # SSW = 3 - (4/3 + 0 + 1) = 2/3, MSW = (2/3) / 3 = 2/9; n0 = (6 - 14/6) / 2 = 11/6;
    # ICC = (5/12 - 2/9) / (5/12 + (5/6)(2/9)) = (7/36) / (65/108) = 21/65.
    de = cs.design_effect(Y, CL)
    assert de.icc == pytest.approx(21 / 65)
    assert de.size_weighted == pytest.approx(14 / 6)
    assert de.deff_icc == pytest.approx(1 + (14 / 6 - 1) * 21 / 65)


@pytest.mark.parametrize("seed", [3, 4])
def test_icc_matches_scipy_one_way_anova(seed):
    # Independent route: F = MSB / MSW from scipy's one-way ANOVA; ICC = (F - 1) / (F + n0 - 1).
    y, cl = _random_clustered(seed)
    groups = [y[cl == c] for c in pd.unique(cl)]
    f = sps.f_oneway(*groups).statistic
    sizes = np.array([g.size for g in groups], float)
    n0 = (sizes.sum() - np.sum(sizes**2) / sizes.sum()) / (sizes.size - 1)
    assert cs.icc_anova(y, cl) == pytest.approx((f - 1) / (f + n0 - 1), rel=1e-9)


def test_equal_sized_clusters_kish_formula():
    # Balanced: n0 = m, and deff_icc = 1 + (m - 1) ICC.
    y = np.array([1, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0], float)
    cl = np.repeat([1, 2, 3, 4], 3)
    de = cs.design_effect(y, cl)
    # Means 1, 0, 2/3, 0; p = 5/12. MSB = 3 * sum (p_g - p)^2 / 3;
    means = np.array([1, 0, 2 / 3, 0])
    msb = 3 * np.sum((means - 5 / 12) ** 2) / 3
    msw = 3 * np.sum(means * (1 - means)) / 8
    assert de.icc == pytest.approx((msb - msw) / (msb + 2 * msw))
    assert de.deff_icc == pytest.approx(1 + 2 * de.icc) and de.size_weighted == 3


def test_identical_clusters_have_negative_icc_and_no_spread():
    # Every patient answers 1, 0: MSB = 0, so ICC = -1 / (m - 1) = -1, and the cluster-robust
    # variance is 0 (every resample of patients gives p = 1/2).
    y = np.tile([1.0, 0.0], 5)
    cl = np.repeat(np.arange(5), 2)
    de = cs.design_effect(y, cl)
    assert de.icc == pytest.approx(-1.0) and de.deff == 0.0
    assert cs.cluster_robust_ci(y, cl)[1:4] == (0.0, 0.5, 0.5)
    boot = cs.cluster_bootstrap_ci(y, cl, n_boot=200)
    assert (boot.low, boot.high) == (0.5, 0.5)


def test_one_cluster_gives_nan_intervals():
    y, cl = np.array([1.0, 0.0, 1.0]), np.array([7, 7, 7])
    assert np.isnan(cs.cluster_bootstrap_ci(y, cl).low)
    assert np.isnan(cs.cluster_robust_ci(y, cl).se)
    de = cs.design_effect(y, cl)
    assert np.isnan(de.icc) and np.isnan(de.deff) and de.n_clusters == 1
    assert np.isnan(cs.paired_cluster_bootstrap(y, 1 - y, cl).high)
    assert np.isnan(cs.paired_cluster_robust(y, 1 - y, cl).p_value)


def test_constant_outcome_and_singleton_clusters():
    de = cs.design_effect(np.ones(6), np.arange(6) // 2)
    assert np.isnan(de.icc) and np.isnan(de.deff)
    # One question per patient: the CR1 variance is the binomial one times G / (G - 1), and
    # the ICC is undefined (no within-cluster variance).
    y = np.array([1, 0, 0, 1, 1, 1, 0, 1], float)
    de = cs.design_effect(y, np.arange(8))
    assert de.deff == pytest.approx(8 / 7) and np.isnan(de.icc)


# ----------------------------------------------------------------------------- bootstrap


def test_cluster_bootstrap_with_singletons_equals_the_question_bootstrap():
    # Same seed, same block layout: resampling singleton clusters draws the same indices as
    # resampling questions, so the two implementations give identical bounds.
    y = (np.random.default_rng(5).random(300) < 0.7).astype(float)
    ours = cs.cluster_bootstrap_ci(y, np.arange(300), n_boot=500, seed=11)
    ref = stats.bootstrap_ci(y, np.mean, n_boot=500, seed=11)
    assert (ours.low, ours.high) == pytest.approx(ref)


def test_cluster_bootstrap_close_to_cr1_and_wider_than_wilson():
    y, cl = _random_clustered(6, g=200)
    boot = cs.cluster_bootstrap_ci(y, cl, n_boot=4000, seed=1)
    cr = cs.cluster_robust_ci(y, cl)
    assert boot.high - boot.low == pytest.approx(cr.high - cr.low, rel=0.1)
    w_lo, w_hi = stats.wilson_ci(y.sum(), y.size)
    assert boot.high - boot.low > 1.5 * (w_hi - w_lo)  # beta(2, 2) patient effect: ICC ~ 0.2
    assert cs.cluster_bootstrap_ci(y, cl, n_boot=4000, seed=1) == boot  # seeded


def test_bad_cluster_labels():
    with pytest.raises(StatsInputError, match="one label per value"):
        cs.cluster_robust_ci(Y, CL[:-1])
    with pytest.raises(StatsInputError, match="missing label at position 2"):
        cs.design_effect(Y, np.array([1, 1, None, 2, 2, 3], dtype=object))


# ----------------------------------------------------------------------------- paired


def test_sign_flip_reproduces_issue_example():
    # 19 discordant questions, all A right / B wrong, spread over 9 of 20 patients; 11 patients
    # concordant. McNemar: 2 * 0.5^19 = 3.8e-6; patient sign flip: 2 / 2^9 = 0.0039.
    per_patient = [3, 3, 2, 2, 2, 2, 2, 2, 1] + [0] * 11
    a, b, cl = [], [], []
    for pid, k in enumerate(per_patient):
        a += [1] * k + [1, 0] * 4
        b += [0] * k + [1, 0] * 4
        cl += [pid] * (k + 8)
    assert stats.mcnemar(a, b).p_value == pytest.approx(2 * 0.5**19)
    res = cs.cluster_sign_flip_test(a, b, cl)
    assert (res.statistic, res.n_nonzero, res.n_clusters, res.method) == (19, 9, 20, "exact")
    assert res.p_value == pytest.approx(2 / 2**9)


@pytest.mark.parametrize("seed", [7, 8])
def test_sign_flip_exact_matches_scipy_paired_permutation(seed):
    rng = np.random.default_rng(seed)
    cl = np.repeat(np.arange(10), rng.integers(1, 6, size=10))
    a = (rng.random(cl.size) < 0.7).astype(float)
    b = (rng.random(cl.size) < 0.5).astype(float)
    ours = cs.cluster_sign_flip_test(a, b, cl)
    sa = np.bincount(cl, weights=a)
    sb = np.bincount(cl, weights=b)
    ref = sps.permutation_test(
        (sa, sb), lambda x, y, axis: np.abs(np.sum(x - y, axis=axis)),
        permutation_type="samples", n_resamples=np.inf, alternative="greater",
    )  # fmt: skip
    assert ours.method == "exact"
    assert ours.p_value == pytest.approx(ref.pvalue)


def test_sign_flip_monte_carlo_agrees_with_exact():
    rng = np.random.default_rng(9)
    cl = np.repeat(np.arange(18), 4)
    a = (rng.random(cl.size) < 0.65).astype(float)
    b = (rng.random(cl.size) < 0.45).astype(float)
    exact = cs.cluster_sign_flip_test(a, b, cl, exact_max=18)
    mc = cs.cluster_sign_flip_test(a, b, cl, exact_max=5, n_perm=40_000, seed=3)
    assert exact.method == "exact" and mc.method == "monte-carlo"
    assert mc.p_value == pytest.approx(exact.p_value, abs=0.01)
    assert mc == cs.cluster_sign_flip_test(a, b, cl, exact_max=5, n_perm=40_000, seed=3)


def test_sign_flip_no_difference():
    res = cs.cluster_sign_flip_test([1, 0, 1], [1, 0, 1], [1, 1, 2])
    assert res.p_value == 1.0 and res.n_nonzero == 0


@pytest.mark.parametrize("seed", [10, 11])
def test_paired_cluster_robust_matches_statsmodels(seed):
    y_a, cl = _random_clustered(seed)
    y_b = (np.random.default_rng(seed + 100).random(y_a.size) < 0.5).astype(float)
    res = cs.paired_cluster_robust(y_a, y_b, cl)
    d = y_a - y_b
    codes = pd.factorize(cl)[0]
    fit = sm.OLS(d, np.ones((d.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": codes})
    assert res.diff == pytest.approx(d.mean())
    assert res.se == pytest.approx(fit.bse[0], rel=1e-10)
    assert res.p_value == pytest.approx(fit.pvalues[0], rel=1e-8)


def test_paired_cluster_bootstrap_hand_bounds():
    # Two patients: differences +1,+1 (patient 1) and 0,0 (patient 2). Resamples: both patient 1
    # (diff 1), both 2 (diff 0), or one of each (1/2): bounds at the 2.5% / 97.5% quantiles.
    res = cs.paired_cluster_bootstrap([1, 1, 1, 0], [0, 0, 1, 0], [1, 1, 2, 2], n_boot=4000)
    assert res.estimate == 0.5 and (res.low, res.high) == (0.0, 1.0)


# ----------------------------------------------------------------------------- tables


def _questions() -> pd.DataFrame:
    return pd.DataFrame({
        "qid": ["q1", "q2", "q3", "q4", "q5", "q6"],
        "subject_ids": [[10], [10], [10], [20], [20], [30, 10]],
    })  # fmt: skip


def test_question_clusters_uses_the_first_named_patient():
    cl = cs.question_clusters(_questions())
    assert cl.to_dict() == {"q1": 10, "q2": 10, "q3": 10, "q4": 20, "q5": 20, "q6": 30}
    bad = _questions().assign(subject_ids=[[10], [], [10], [20], [20], [30]])
    with pytest.raises(StatsInputError, match="'q2' has no subject_ids"):
        cs.question_clusters(bad)
    with pytest.raises(StatsInputError, match="qid 'zz' is not in questions"):
        cs.with_clusters(pd.DataFrame({"qid": ["q1", "zz"]}), _questions())


def _frame() -> pd.DataFrame:
    full = [1, 1, 1, 1, 0, 1]
    last = [0, 0, 1, 1, 0, 0]
    rows = [(f"q{i + 1}", "full-context", c) for i, c in enumerate(full)]
    rows += [(f"q{i + 1}", "last-visit-only", c) for i, c in enumerate(last)]
    df = pd.DataFrame(rows, columns=["qid", "strategy", "correct"])
    return cs.with_clusters(df.assign(correct=df["correct"].astype(bool)), _questions())


def test_clustered_accuracy_beside_wilson():
    out = cr.clustered_accuracy(_frame(), by=["strategy"], n_boot=200).set_index("strategy")
    row = out.loc["last-visit-only"]
    assert (row["n"], row["n_clusters"], row["accuracy"]) == (6, 3, pytest.approx(2 / 6))
    assert (row["wilson_low"], row["wilson_high"]) == pytest.approx(stats.wilson_ci(2, 6))
    robust = cs.cluster_robust_ci([0, 0, 1, 1, 0, 0], [10, 10, 10, 20, 20, 30])
    assert (row["cr_low"], row["cr_high"]) == pytest.approx((robust.low, robust.high))
    assert row["half_wilson_pp"] == pytest.approx(50 * (row["wilson_high"] - row["wilson_low"]))


def test_clustered_accuracy_names_bad_correctness():
    bad = _frame().assign(correct=[1, 0, 2, 1, 1, 1, 0, 0, 1, 1, 0, 0])
    with pytest.raises(StatsInputError, match="correct must be boolean"):
        cr.clustered_accuracy(bad, by=["strategy"])


def test_pairwise_clustered_adds_patient_test_to_mcnemar():
    out = cr.pairwise_clustered(_frame(), pairs=[("full-context", "last-visit-only")])
    row = out.iloc[0]
    ref = stats.pairwise_mcnemar(_frame(), cell=["strategy"]).iloc[0]
    assert (row["b"], row["c"], row["p_value"]) == (ref["b"], ref["c"], ref["p_value"])
    # Differences per patient: 10 -> +2, 20 -> 0, 30 -> +1: two non-zero clusters, exact
    # sign flip p = 2/4 (both signs equal in 2 of the 4 vectors give |T| >= 3).
    assert (row["n_clusters"], row["clusters_discordant"]) == (3, 2)
    assert row["p_cluster"] == pytest.approx(0.5)
    assert row["survives"] == (row["reject"] and row["reject_cluster"])
    with pytest.raises(StatsInputError, match="lacks column 'cluster'"):
        cr.pairwise_clustered(_frame().drop(columns="cluster"))


def test_mde_with_design_effect():
    n = pd.Series({"T1": 1500, "T4": 53})
    out = cr.mde_with_design_effect(n, pd.Series({"T1": 2.0})).set_index("task")
    assert out.loc["T1", "mde_pp"] == pytest.approx(5.1, abs=0.05)  # Table 7
    assert out.loc["T1", "mde_clustered_pp"] == pytest.approx(
        100 * stats.minimum_detectable_effect(750)
    )
    assert out.loc["T4", "deff"] == 1.0  # missing design effect: independent questions
    assert out.loc["T4", "mde_clustered_pp"] == pytest.approx(out.loc["T4", "mde_pp"])
    with pytest.raises(StatsInputError, match="design_effect must be positive"):
        stats.minimum_detectable_effect(100, design_effect=0)


def test_task_design_effects_median_over_cells():
    cells = pd.DataFrame({"task": ["T1", "T1", "T1", "T2"], "deff": [1.0, 2.0, np.nan, 0.5],
                          "icc": [0.1, 0.3, np.nan, -0.2]})  # fmt: skip
    out = cr.task_design_effects(cells).set_index("task")
    assert out.loc["T1", "deff_median"] == 1.5 and out.loc["T1", "n_cells"] == 2
    assert out.loc["T2", "deff_max"] == 0.5 and out.loc["T1", "icc_median"] == pytest.approx(0.2)


def test_paired_gap_has_both_intervals():
    frame = _frame().assign(backbone="reference")
    out = cr.paired_gap(frame, "full-context", "last-visit-only", n_boot=500).iloc[0]
    assert out["gap_pp"] == pytest.approx(100 * 3 / 6) and out["n_clusters"] == 3
    q = stats.paired_bootstrap_diff([1, 1, 1, 1, 0, 1], [0, 0, 1, 1, 0, 0], n_boot=500)
    assert (out["q_low_pp"], out["q_high_pp"]) == pytest.approx((100 * q.low, 100 * q.high))
    c = cs.paired_cluster_bootstrap([1, 1, 1, 1, 0, 1], [0, 0, 1, 1, 0, 0],
                                    [10, 10, 10, 20, 20, 30], n_boot=500)  # fmt: skip
    assert (out["c_low_pp"], out["c_high_pp"]) == pytest.approx((100 * c.low, 100 * c.high))
    assert out["p_cluster"] == pytest.approx(0.5)


def test_survival_summary_and_text():
    tests = pd.DataFrame({
        "strategy": ["a", "b", "c", "d"], "reject": [True, True, False, False],
        "reject_cluster": [True, False, False, True],
    })  # fmt: skip
    s = cr.survival_summary(tests, ["strategy"])
    assert (s["n"], s["n_reject"], s["n_survive"]) == (4, 2, 1)
    assert s["lost"] == ["b"] and s["gained"] == ["d"]
    text = cr.survival_text(tests, ["strategy"], "K sweep")
    assert "2 of 4 comparisons" in text and "Lost once patients are clustered: b." in text
    three = tests.assign(backbone="eager", other="z")
    assert cr.survival_summary(three, ["backbone", "strategy", "other"])["lost"] == [
        "eager: b vs z"
    ]
    all_ok = cr.survival_text(tests.assign(reject_cluster=tests["reject"]), ["strategy"], "x")
    assert "Every question-level conclusion survives clustering." in all_ok


@pytest.mark.parametrize("seed", [12, 13])
def test_cr1_is_gee_sandwich_with_small_sample_factor(seed):
    # statsmodels GEE (independence working correlation, robust covariance) gives the CR0
    # sandwich; CR1 multiplies its variance by G / (G - 1).
    y, cl = _random_clustered(seed)
    codes = pd.factorize(cl)[0]
    gee = sm.GEE(y, np.ones((y.size, 1)), groups=codes, cov_struct=sm.cov_struct.Independence(),
                 family=sm.families.Binomial()).fit()  # fmt: skip
    # Binomial GEE's robust se is on the logit scale; the delta method maps it to p.
    p = y.mean()
    se_p = float(gee.bse[0]) * p * (1 - p)
    g = codes.max() + 1
    assert cs.cluster_robust_ci(y, cl).se == pytest.approx(se_p * np.sqrt(g / (g - 1)), rel=1e-6)


def test_overlap_robust_by_hand():
    """Rows 0-1 share patient a, rows 1-3 patient b, row 2 shares none: with y = 1, 1, 0, 0
    (e = .5, .5, -.5, -.5) the variance is (sum e^2 + 2 (e0 e1 + e1 e3)) / N^2 = 1 / 16."""
    from clinlib.analysis.stats.cluster import overlap_robust_ci

    r = overlap_robust_ci([1, 1, 0, 0], [{"a"}, {"a", "b"}, {"c"}, {"b"}])
    assert r.estimate == 0.5 and r.se == pytest.approx(0.25)
    assert r.low == pytest.approx(0.5 - 1.959963984540054 * 0.25)
    assert r.n_units == 3 and r.pair_overlap == pytest.approx(4 / 12)
    with pytest.raises(StatsInputError, match="empty set at position 1"):
        overlap_robust_ci([1, 0], [{"a"}, set()])
    linked = overlap_robust_ci([1, 0, 0.5], [{"a"}, {"a", "b"}, {"b", "a"}])  # one "cluster"
    assert linked.pair_overlap == 1.0 and np.isnan(linked.se) and np.isnan(linked.low)


def test_overlap_robust_on_a_partition_is_statsmodels_cr0():
    """One unit per row: the overlap-robust se is statsmodels' cluster se without the
    small-sample correction (intercept-only OLS)."""
    from clinlib.analysis.stats.cluster import overlap_robust_ci

    rng = np.random.default_rng(3)
    groups = rng.integers(0, 9, size=60)
    y = rng.random(60) + 0.1 * groups
    fit = sm.OLS(y, np.ones((60, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False}
    )
    r = overlap_robust_ci(y, [{g} for g in groups])
    assert r.se == pytest.approx(float(fit.bse[0]), rel=1e-10)
    assert r.estimate == pytest.approx(float(fit.params[0]))
