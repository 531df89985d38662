"""Statistics that respect patients: intervals and paired tests clustered on the patient.

Each patient contributes many questions (about 16 on the paper profile), and a patient's
questions are read from the same dialogue and the same representation of it, so their
correctness is correlated. Question-level intervals (:func:`clinlib.analysis.stats.wilson_ci`)
and tests (:func:`clinlib.analysis.stats.mcnemar`) treat every question as independent and are
too narrow / too small when that correlation is positive. This module gives the clustered
counterparts, to be shown beside them:

- :func:`cluster_bootstrap_ci` — percentile bootstrap resampling whole patients (the ratio
  estimator sum(correct) / sum(n) of the resampled patients).
- :func:`cluster_robust_ci` — the cluster-robust (CR1, sandwich) variance of a proportion,
  ``Var = G / (G - 1) * sum_g (S_g - p n_g)^2 / N^2``; equal to the standard error of
  statsmodels' intercept-only OLS with ``cov_type="cluster"`` (whose small-sample factor is
  ``G/(G-1) * (N-1)/(N-1)`` for one regressor).
- :func:`icc_anova` / :func:`design_effect` — the one-way ANOVA estimator of the intraclass
  correlation for a binary outcome with unequal cluster sizes (``n0`` of Snedecor & Cochran),
  the empirical design effect (CR1 variance over the binomial variance p(1-p)/N) and the
  model-based one ``1 + (m_w - 1) ICC`` with ``m_w = sum n_g^2 / N``.
- :func:`cluster_sign_flip_test` — a patient-level permutation test of a paired difference:
  under H0 the labels A/B of a patient's questions are exchangeable as a block, so the
  patient's summed difference ``D_g = sum(a - b)`` flips sign; exact over all 2^m sign
  vectors of the m patients with ``D_g != 0`` when m is small, Monte Carlo otherwise.
- :func:`paired_cluster_bootstrap` — the percentile CI of the accuracy difference resampling
  patients, and :func:`paired_cluster_robust` — its CR1 Wald test.

The per-cell tables the notebooks show (clustered accuracy beside Wilson, the clustered test
beside McNemar, the MDE with the design effect) are in :mod:`clinlib.analysis.stats.cluster_tables`.

**How a question is clustered** (:func:`question_clusters`): on its first-named patient,
``subject_ids[0]``. Only T6 names two patients (A and B). T6 pairs each patient with its next
four same-disease partners and keeps the A/B order fixed within a pair, so every question of a
pair lands in the same cluster (patient A): clustering on A nests the pair clusters (it is at
least as coarse as clustering on the unordered pair, which would leave most T6 questions in
small clusters of their own), and it keeps one cluster per patient. The alternative that
captures B too — merging patients linked by a T6 pair — would chain each disease's patients
into one cluster (the pairs form a ring within a disease), leaving a handful of clusters.
What clustering on A does not capture is the correlation of a T6 question with patient B's
other questions.

Pure functions, seeded; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import sparse
from scipy import stats as sps

from clinlib.analysis.stats.question import (
    StatsInputError,
    as_1d_float,
    check_boot_args,
    z_value,
)
from clinlib.core.config import ALPHA

CLUSTER_COLUMN = "cluster"
# Exact sign-flip enumeration up to this many non-zero clusters (2^16 = 65,536 sign vectors).
EXACT_FLIP_MAX = 16
_BOOT_BLOCK_ELEMENTS = 4_000_000


class ClusterCI(NamedTuple):
    """An interval for a clustered mean: estimate, low, high, n questions, n clusters."""

    estimate: float
    low: float
    high: float
    n: int
    n_clusters: int


class ClusterRobust(NamedTuple):
    """CR1 result: estimate, its cluster-robust standard error, the normal interval."""

    estimate: float
    se: float
    low: float
    high: float
    n: int
    n_clusters: int


class DesignEffect(NamedTuple):
    """Design effect of a clustered proportion.

    Attributes:
        n, n_clusters: questions and clusters.
        size_weighted: ``m_w = sum n_g^2 / N`` (the mean cluster size a question sees).
        icc: ANOVA intraclass correlation (:func:`icc_anova`).
        deff: empirical design effect, CR1 variance / binomial variance (NaN if p is 0 or 1).
        deff_icc: model-based ``1 + (m_w - 1) * icc``.
    """

    n: int
    n_clusters: int
    size_weighted: float
    icc: float
    deff: float
    deff_icc: float


class SignFlipResult(NamedTuple):
    """Result of :func:`cluster_sign_flip_test`: statistic sum(a - b), p, method, clusters."""

    statistic: float
    p_value: float
    method: str
    n_clusters: int
    n_nonzero: int


class PairedClusterRobust(NamedTuple):
    """Result of :func:`paired_cluster_robust`: mean difference, CR1 se, z and p."""

    diff: float
    se: float
    z: float
    p_value: float
    n_clusters: int


# --------------------------------------------------------------------------- clusters


def question_clusters(questions: pd.DataFrame) -> pd.Series:
    """The cluster of each question: its first-named patient (T6: patient A; see module doc).

    Args:
        questions: questions.parquet rows (``qid``, ``subject_ids``).

    Returns:
        Series indexed by qid, named ``cluster``, holding the patient's subject_id (int).
    """
    missing = [c for c in ("qid", "subject_ids") if c not in questions.columns]
    if missing:
        raise StatsInputError(f"question_clusters: questions lack column(s) {missing}")
    dup = questions["qid"].duplicated()
    if dup.any():
        raise StatsInputError(
            f"question_clusters: duplicate qid {questions.loc[dup, 'qid'].iloc[0]!r}"
        )
    first = []
    for qid, ids in zip(questions["qid"], questions["subject_ids"], strict=True):
        if ids is None or len(ids) == 0:
            raise StatsInputError(f"question_clusters: question {qid!r} has no subject_ids")
        first.append(int(ids[0]))
    return pd.Series(first, index=pd.Index(questions["qid"], name="qid"), name=CLUSTER_COLUMN)


def with_clusters(
    preds: pd.DataFrame, questions: pd.DataFrame, column: str = CLUSTER_COLUMN
) -> pd.DataFrame:
    """``preds`` with a ``column`` holding each prediction's cluster (:func:`question_clusters`).

    Raises:
        StatsInputError: a prediction's qid is not in ``questions``.
    """
    if "qid" not in preds.columns:
        raise StatsInputError("with_clusters: predictions lack column 'qid'")
    clusters = question_clusters(questions)
    mapped = preds["qid"].map(clusters)
    if mapped.isna().any():
        qid = preds.loc[mapped.isna(), "qid"].iloc[0]
        raise StatsInputError(f"with_clusters: qid {qid!r} is not in questions")
    return preds.assign(**{column: mapped.astype("int64").to_numpy()})


def _cluster_sums(
    values: object, clusters: object, name: str = "values"
) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sums and sizes (clusters in order of first appearance)."""
    y = as_1d_float(values, name)
    cl = np.asarray(clusters)
    if cl.ndim != 1 or cl.size != y.size:
        raise StatsInputError(
            f"clusters must be one label per value: {cl.size} labels for {y.size} values"
        )
    if pd.isna(cl).any():
        i = int(np.flatnonzero(pd.isna(cl))[0])
        raise StatsInputError(f"clusters has a missing label at position {i}")
    codes, uniques = pd.factorize(cl)
    sums = np.bincount(codes, weights=y, minlength=len(uniques))
    sizes = np.bincount(codes, minlength=len(uniques)).astype(float)
    return sums, sizes


def _resample_clusters(
    sums: Sequence[np.ndarray], sizes: np.ndarray, n_boot: int, seed: int
) -> list[np.ndarray]:
    """Ratio estimates sum(S)/sum(n) over ``n_boot`` resamples of whole clusters."""
    g = sizes.size
    rng = np.random.default_rng(seed)
    block = max(1, _BOOT_BLOCK_ELEMENTS // g)
    out: list[list[np.ndarray]] = [[] for _ in sums]
    done = 0
    while done < n_boot:
        rows = min(block, n_boot - done)
        idx = rng.integers(0, g, size=(rows, g))
        n_tot = sizes[idx].sum(axis=1)
        for j, s in enumerate(sums):
            out[j].append(s[idx].sum(axis=1) / n_tot)
        done += rows
    return [np.concatenate(parts) for parts in out]


# --------------------------------------------------------------------------- intervals


def cluster_bootstrap_ci(
    values: object, clusters: object, n_boot: int = 2000, alpha: float = ALPHA, seed: int = 0
) -> ClusterCI:
    """Percentile bootstrap CI of a mean resampling whole clusters (patients).

    Args:
        values: 1-D outcomes (e.g. 0/1 correctness).
        clusters: one cluster label per value.
        n_boot, alpha, seed: resamples, 1 - confidence, ``numpy.random.default_rng`` seed.

    Returns:
        :class:`ClusterCI`; with a single cluster the bounds are NaN (no between-patient
        variation can be resampled).
    """
    check_boot_args(n_boot, alpha)
    sums, sizes = _cluster_sums(values, clusters)
    est = float(sums.sum() / sizes.sum())
    n, g = int(sizes.sum()), int(sizes.size)
    if g < 2:
        return ClusterCI(est, float("nan"), float("nan"), n, g)
    (boot,) = _resample_clusters([sums], sizes, int(n_boot), seed)
    low, high = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0])
    return ClusterCI(est, float(low), float(high), n, g)


def _cr1_var(resid_sums: np.ndarray, n_total: float) -> float:
    g = resid_sums.size
    return float(g / (g - 1) * np.sum(resid_sums**2) / n_total**2)


def cluster_robust_ci(values: object, clusters: object, alpha: float = ALPHA) -> ClusterRobust:
    """Cluster-robust (CR1) normal interval of a mean: ``p +- z * se_CR1``, clipped to [0, 1]
    for 0/1 outcomes.

    Returns:
        :class:`ClusterRobust`; NaN se and bounds with a single cluster.
    """
    z = z_value(alpha)
    sums, sizes = _cluster_sums(values, clusters)
    n_tot = float(sizes.sum())
    est = float(sums.sum() / n_tot)
    g = int(sizes.size)
    if g < 2:
        return ClusterRobust(est, float("nan"), float("nan"), float("nan"), int(n_tot), g)
    se = float(np.sqrt(_cr1_var(sums - est * sizes, n_tot)))
    y = as_1d_float(values, "values")
    lo_bound, hi_bound = (0.0, 1.0) if np.isin(y, (0.0, 1.0)).all() else (-np.inf, np.inf)
    low = float(np.clip(est - z * se, lo_bound, hi_bound))
    high = float(np.clip(est + z * se, lo_bound, hi_bound))
    return ClusterRobust(est, se, low, high, int(n_tot), g)


def icc_anova(values: object, clusters: object) -> float:
    """One-way ANOVA intraclass correlation for (binary) outcomes with unequal cluster sizes.

    ``ICC = (MSB - MSW) / (MSB + (n0 - 1) MSW)`` with ``MSB = sum n_g (p_g - p)^2 / (G - 1)``,
    ``MSW = sum n_g p_g (1 - p_g) / (N - G)`` and ``n0 = (N - sum n_g^2 / N) / (G - 1)``.
    It can be negative (clusters more alike than chance allows, down to -1/(n0 - 1), which is
    far below -1 when clusters hold about one value each, n0 close to 1: then the ICC says
    little and the design effect is about 1).

    Returns:
        The ICC; NaN with fewer than two clusters, when every cluster has one value
        (N = G), or when the outcome is constant (no variance to split).
    """
    sums, sizes = _cluster_sums(values, clusters)
    y = as_1d_float(values, "values")
    n_tot, g = float(sizes.sum()), sizes.size
    if g < 2 or n_tot <= g:
        return float("nan")
    means = sums / sizes
    grand = sums.sum() / n_tot
    ss_within = float(np.sum(y * y) - np.sum(sums**2 / sizes))
    msb = float(np.sum(sizes * (means - grand) ** 2) / (g - 1))
    msw = ss_within / (n_tot - g)
    n0 = (n_tot - np.sum(sizes**2) / n_tot) / (g - 1)
    denom = msb + (n0 - 1.0) * msw
    if denom <= 0 or not np.isfinite(denom):
        return float("nan")
    return float((msb - msw) / denom)


def design_effect(values: object, clusters: object) -> DesignEffect:
    """Empirical and ICC-based design effects of a clustered mean (see :class:`DesignEffect`).

    The empirical one is what widens an interval: a clustered half-width is about
    ``sqrt(deff)`` times the question-level one.
    """
    sums, sizes = _cluster_sums(values, clusters)
    n_tot, g = float(sizes.sum()), int(sizes.size)
    m_w = float(np.sum(sizes**2) / n_tot)
    icc = icc_anova(values, clusters)
    p = float(sums.sum() / n_tot)
    binom_var = p * (1.0 - p) / n_tot
    if g < 2 or binom_var <= 0:
        deff = float("nan")
    else:
        deff = _cr1_var(sums - p * sizes, n_tot) / binom_var
    return DesignEffect(int(n_tot), g, m_w, icc, deff, float(1.0 + (m_w - 1.0) * icc))


class OverlapRobust(NamedTuple):
    """Overlap-robust result: estimate, standard error, normal interval, n rows, n distinct
    units (patients) and the share of row pairs that share a unit."""

    estimate: float
    se: float
    low: float
    high: float
    n: int
    n_units: int
    pair_overlap: float


def overlap_robust_ci(
    values: object, members: Sequence[object], alpha: float = 0.05
) -> OverlapRobust:
    """Normal interval of a mean whose rows each involve a *set* of units (a population
    question's group of patients), correlated whenever two rows share a unit.

    ``Var = sum_{i,j} 1[S_i and S_j share a unit] e_i e_j / N^2`` with ``e = y - mean``: the
    cluster-robust sandwich with "same cluster" replaced by "share a patient" (the dyadic /
    network-robust form of Fafchamps & Gubert 2007, Aronow, Samii & Assenova 2015). When every
    row has one unit it is CR0 (statsmodels' cluster covariance without the G/(G-1) factor).
    Groups drawn from one cohort overlap so much that the connected components of the overlap
    graph are one cluster (nothing to resample); this form still bounds the correlation.

    Returns:
        :class:`OverlapRobust`; NaN se and bounds when every pair of rows shares a unit (the
        sum is then (sum e)^2 = 0, as with a single cluster) or the variance is not positive
        (the indicator matrix is not positive semi-definite, so it can be with few rows).
    """
    z = z_value(alpha)
    y = as_1d_float(values, "values")
    if len(members) != y.size:
        raise StatsInputError(f"members must be one set per value: {len(members)} for {y.size}")
    codes: dict[object, int] = {}
    rows, cols = [], []
    for i, ms in enumerate(members):
        units = list(ms) if ms is not None else []
        if not units:
            raise StatsInputError(f"members has an empty set at position {i}")
        for u in units:
            rows.append(i)
            cols.append(codes.setdefault(u, len(codes)))
    inc = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(y.size, len(codes)))
    shared = (inc @ inc.T) > 0
    est = float(y.mean())
    e = y - est
    var = float(e @ (shared @ e)) / y.size**2
    overlap = float((shared.nnz - y.size) / max(y.size * (y.size - 1), 1))
    # every pair linked: the sum is (sum e)^2 = 0, like a single cluster; it says nothing
    if overlap >= 1.0 or not var > 1e-12 * float(e @ e) / y.size**2:
        return OverlapRobust(
            est, float("nan"), float("nan"), float("nan"), int(y.size), len(codes), overlap
        )
    se = float(np.sqrt(var))
    lo_bound, hi_bound = (0.0, 1.0) if np.isin(y, (0.0, 1.0)).all() else (-np.inf, np.inf)
    low = float(np.clip(est - z * se, lo_bound, hi_bound))
    high = float(np.clip(est + z * se, lo_bound, hi_bound))
    return OverlapRobust(est, se, low, high, int(y.size), len(codes), overlap)


# --------------------------------------------------------------------------- paired tests


def _paired_sums(
    a: object, b: object, clusters: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a_arr = as_1d_float(a, "a")
    b_arr = as_1d_float(b, "b")
    if a_arr.size != b_arr.size:
        raise StatsInputError(f"paired samples differ in length: a={a_arr.size}, b={b_arr.size}")
    sa, sizes = _cluster_sums(a_arr, clusters, "a")
    sb, _ = _cluster_sums(b_arr, clusters, "b")
    return sa, sb, sizes


def _flip_counts(d: np.ndarray, observed: float) -> int:
    """How many of the 2^m sign vectors give |sum(s * d)| >= |observed| (exact)."""
    m = d.size
    count = 0
    step = 1 << min(m, 16)
    for start in range(0, 1 << m, step):
        codes = np.arange(start, start + step, dtype=np.int64)[:, None]
        signs = ((codes >> np.arange(m)) & 1) * 2 - 1
        count += int(np.sum(np.abs(signs @ d) >= abs(observed) - 1e-9))
    return count


def cluster_sign_flip_test(
    a: object,
    b: object,
    clusters: object,
    n_perm: int = 20_000,
    seed: int = 0,
    exact_max: int = EXACT_FLIP_MAX,
) -> SignFlipResult:
    """Patient-level permutation (sign-flip) test of a paired difference, two-sided.

    Statistic ``T = sum_i (a_i - b_i) = sum_g D_g`` (for 0/1 outcomes, McNemar's b - c).
    Under H0 each patient's block of A/B labels is exchangeable, so each ``D_g`` flips sign
    independently. Exact over all sign vectors of the non-zero ``D_g`` when there are at most
    ``exact_max`` of them; otherwise ``n_perm`` seeded random sign vectors with
    p = (1 + #{|T*| >= |T|}) / (1 + n_perm).

    Args:
        a, b: paired outcomes, aligned by question.
        clusters: one cluster label per question.
        n_perm, seed: Monte Carlo resamples and seed.
        exact_max: most non-zero clusters enumerated exactly.

    Returns:
        :class:`SignFlipResult` (p = 1 when no cluster has a non-zero difference).
    """
    sa, sb, sizes = _paired_sums(a, b, clusters)
    d = sa - sb
    d = d[np.abs(d) > 1e-12]
    observed = float(d.sum())
    m = int(d.size)
    if m == 0:
        return SignFlipResult(observed, 1.0, "exact", int(sizes.size), 0)
    if m <= exact_max:
        p = _flip_counts(d, observed) / float(1 << m)
        return SignFlipResult(observed, float(min(1.0, p)), "exact", int(sizes.size), m)
    if int(n_perm) < 1:
        raise StatsInputError(f"n_perm must be >= 1, got {n_perm!r}")
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    block = max(1, _BOOT_BLOCK_ELEMENTS // m)
    while done < n_perm:
        rows = min(block, n_perm - done)
        signs = rng.integers(0, 2, size=(rows, m)) * 2 - 1
        hits += int(np.sum(np.abs(signs @ d) >= abs(observed) - 1e-9))
        done += rows
    p = (1.0 + hits) / (1.0 + n_perm)
    return SignFlipResult(observed, float(p), "monte-carlo", int(sizes.size), m)


def paired_cluster_bootstrap(
    a: object,
    b: object,
    clusters: object,
    n_boot: int = 2000,
    alpha: float = ALPHA,
    seed: int = 0,
) -> ClusterCI:
    """Percentile CI of mean(a) - mean(b) resampling whole patients (same questions in both).

    Returns:
        :class:`ClusterCI` of the difference (NaN bounds with one cluster).
    """
    check_boot_args(n_boot, alpha)
    sa, sb, sizes = _paired_sums(a, b, clusters)
    n_tot = sizes.sum()
    est = float((sa.sum() - sb.sum()) / n_tot)
    g = int(sizes.size)
    if g < 2:
        return ClusterCI(est, float("nan"), float("nan"), int(n_tot), g)
    (boot,) = _resample_clusters([sa - sb], sizes, int(n_boot), seed)
    low, high = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0])
    return ClusterCI(est, float(low), float(high), int(n_tot), g)


def paired_cluster_robust(a: object, b: object, clusters: object) -> PairedClusterRobust:
    """CR1 Wald test of mean(a - b) = 0 (intercept-only OLS of a - b, clustered errors).

    Returns:
        :class:`PairedClusterRobust`; p = 1 when every difference is 0; NaN with one cluster.
    """
    sa, sb, sizes = _paired_sums(a, b, clusters)
    n_tot = float(sizes.sum())
    diff = float((sa.sum() - sb.sum()) / n_tot)
    g = int(sizes.size)
    if g < 2:
        return PairedClusterRobust(diff, float("nan"), float("nan"), float("nan"), g)
    se = float(np.sqrt(_cr1_var((sa - sb) - diff * sizes, n_tot)))
    if se == 0.0:  # every patient's difference is exactly diff * n_g: no sampling spread
        z = 0.0 if diff == 0.0 else float(np.copysign(np.inf, diff))
        return PairedClusterRobust(diff, 0.0, z, 1.0 if diff == 0.0 else 0.0, g)
    z = diff / se
    return PairedClusterRobust(diff, se, float(z), float(2.0 * sps.norm.sf(abs(z))), g)


__all__ = [
    "CLUSTER_COLUMN",
    "ClusterCI",
    "ClusterRobust",
    "DesignEffect",
    "PairedClusterRobust",
    "SignFlipResult",
    "cluster_bootstrap_ci",
    "cluster_robust_ci",
    "cluster_sign_flip_test",
    "design_effect",
    "icc_anova",
    "overlap_robust_ci",
    "OverlapRobust",
    "paired_cluster_bootstrap",
    "paired_cluster_robust",
    "question_clusters",
    "with_clusters",
]
