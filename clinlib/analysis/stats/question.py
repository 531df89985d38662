"""Statistics for comparing history-representation cells (paper §3 "Evaluation set", §5.4,
§6, Appendix F.4 and Appendix G.2).

Pure functions over numpy arrays and scalars: no I/O and no LLM imports, so scoring and
figures can depend on this module without pulling in the backbone layer.

What each function reproduces:

- :func:`wilson_ci` — the Wilson score intervals of §3. The paper's "pooled ±0.6 pp" and
  "±1.3 pp (T1, T9)" half-widths at p = 0.5 match n = 4 x 6,271 and n = 4 x 1,500, i.e. the
  four backbones pooled, not a single cell (one cell at n = 6,271 gives ±1.2 pp). The "±9 pp
  (T4)" figure matches neither n = 53 (±13 pp) nor 4 x 53 (±6.7 pp) at p = 0.5; we do not try
  to reproduce it.
- :func:`bootstrap_ci` / :func:`paired_bootstrap_diff` — Appendix F.4 (D8) percentile
  bootstrap. The paper used 100 resamples with seed 20260519 (:data:`PAPER_N_BOOT`,
  :data:`PAPER_BOOT_SEED`); our defaults (2,000 resamples, seed 0) are steadier.
- :func:`mcnemar` / :func:`pairwise_mcnemar` — the paired tests of §3 and §5.4 on the fixed
  question set shared by all 32 cells.
- :func:`holm_bonferroni` — the step-down correction of §3 (m = 12 headline comparisons).
- :func:`minimum_detectable_effect` — Table 7 (Appendix G.2). The paper's figures are the
  two-proportion normal approximation with both arms at p0 = 0.5:
  ``MDE = (z_{1-alpha/2} + z_{power}) * sqrt(2 p0 (1 - p0) / n)``, which gives exactly
  5.1 / 6.6 / 7.5 / 8.1 / 8.9 / 9.9 / 17.1 / 27.2 pp for n = 1500 / 889 / 700 / 600 / 495 /
  400 / 134 / 53. It is "conservative" because it ignores the pairing that McNemar exploits;
  ``paired=True`` gives the McNemar (Connor 1987) alternative.
- :func:`pearson` — §6 / Appendix C.3 (Mem0 size vs T1 accuracy, r = -0.129, n = 210) with
  a Fisher-z confidence interval.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as sps

from clinlib.core.config import ALPHA

# Appendix F.4: "100 resamples per cell, seed 20260519".
PAPER_N_BOOT = 100
PAPER_BOOT_SEED = 20260519

# McNemar: below this many discordant pairs the chi-square approximation is poor, so the
# exact binomial test is used by default (the usual rule of thumb, b + c < 25).
MCNEMAR_EXACT_BELOW = 25

# Largest resample block (rows x n) materialised at once by the bootstrap, to bound memory.
_BOOT_BLOCK_ELEMENTS = 4_000_000


class StatsInputError(ValueError):
    """Raised when a statistics function receives input it cannot use."""


class McNemarResult(NamedTuple):
    """Result of :func:`mcnemar`.

    Attributes:
        b: pairs where A is correct and B is wrong.
        c: pairs where A is wrong and B is correct.
        statistic: min(b, c) for the exact test; the continuity-corrected chi-square otherwise.
        p_value: two-sided p-value.
        method: "exact" (binomial) or "chi2" (chi-square, 1 df, continuity corrected).
    """

    b: int
    c: int
    statistic: float
    p_value: float
    method: str


class PairedDiff(NamedTuple):
    """Result of :func:`paired_bootstrap_diff`: ``stat(a) - stat(b)`` and its CI."""

    estimate: float
    low: float
    high: float


class PearsonResult(NamedTuple):
    """Result of :func:`pearson`: r, two-sided p (t test, n - 2 df), Fisher-z CI and n."""

    r: float
    p: float
    ci_low: float
    ci_high: float
    n: int


def _check_alpha(alpha: float) -> float:
    if not 0.0 < float(alpha) < 1.0:
        raise StatsInputError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)


def z_value(alpha: float) -> float:
    """Two-sided critical value z_{1 - alpha/2}."""
    return float(sps.norm.ppf(1.0 - _check_alpha(alpha) / 2.0))


def as_1d_float(values: object, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise StatsInputError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise StatsInputError(f"{name} is empty")
    if np.isnan(arr).any():
        raise StatsInputError(f"{name} contains {int(np.isnan(arr).sum())} NaN value(s)")
    return arr


def as_bool_array(values: object, name: str) -> np.ndarray:
    """A 1-D boolean array from bools or 0/1 numbers; anything else is an error."""
    if isinstance(values, pd.Series) and values.isna().any():
        raise StatsInputError(f"{name} has {int(values.isna().sum())} missing value(s)")
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise StatsInputError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr
    try:
        num = arr.astype(float)
    except (TypeError, ValueError):
        raise StatsInputError(f"{name} must be boolean (or 0/1), got dtype {arr.dtype}") from None
    bad = ~np.isin(num, (0.0, 1.0))
    if bad.any():
        first = arr[bad].tolist()[0]  # a Python value: its repr is 2, not np.int64(2)
        raise StatsInputError(
            f"{name} must be boolean (or 0/1); found value {first!r} at position "
            f"{int(np.flatnonzero(bad)[0])}"
        )
    return num.astype(bool)


def wilson_ci(k: object, n: object, alpha: float = ALPHA) -> tuple[object, object]:
    """Wilson score interval for a binomial proportion k/n (§3), vectorised.

    Args:
        k: successes (scalar or array; non-integer values are accepted, e.g. pooled
            ``sum(accuracy * n)``).
        n: trials, same shape as ``k`` (or broadcastable). ``n == 0`` gives NaN bounds.
        alpha: 1 - confidence level.

    Returns:
        ``(low, high)``: floats for scalar input, arrays otherwise.
    """
    z = z_value(alpha)
    k_arr = np.asarray(k, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    if np.isnan(k_arr).any() or np.isnan(n_arr).any():
        raise StatsInputError("wilson_ci: k and n must not be NaN")
    if (n_arr < 0).any() or (k_arr < 0).any():
        raise StatsInputError("wilson_ci: k and n must be non-negative")
    k_b, n_b = np.broadcast_arrays(k_arr, n_arr)
    if (k_b > n_b).any():
        i = int(np.flatnonzero((k_b > n_b).ravel())[0])
        raise StatsInputError(
            f"wilson_ci: k exceeds n (k={k_b.ravel()[i]:g}, n={n_b.ravel()[i]:g})"
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k_b / n_b
        denom = 1.0 + z * z / n_b
        centre = (p + z * z / (2.0 * n_b)) / denom
        half = z / denom * np.sqrt(p * (1.0 - p) / n_b + z * z / (4.0 * n_b * n_b))
    # Clip only floating-point overshoot (the interval lies in [0, 1] mathematically).
    low = np.clip(centre - half, 0.0, 1.0)
    high = np.clip(centre + half, 0.0, 1.0)
    low = np.where(n_b == 0, np.nan, low)
    high = np.where(n_b == 0, np.nan, high)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


def _takes_axis(stat: Callable) -> bool:
    try:
        return "axis" in inspect.signature(stat).parameters
    except (TypeError, ValueError):  # some builtins/ufuncs have no inspectable signature
        return False


def _boot_stats(
    arrays: Sequence[np.ndarray], stat: Callable, n_boot: int, seed: int
) -> list[np.ndarray]:
    """Resample rows with replacement (same indices for every array); ``stat`` per resample."""
    n = arrays[0].size
    rng = np.random.default_rng(seed)
    vectorised = _takes_axis(stat)
    block = max(1, _BOOT_BLOCK_ELEMENTS // n)
    out: list[list[np.ndarray]] = [[] for _ in arrays]
    done = 0
    while done < n_boot:
        rows = min(block, n_boot - done)
        idx = rng.integers(0, n, size=(rows, n))
        for j, arr in enumerate(arrays):
            sample = arr[idx]
            if vectorised:
                vals = np.asarray(stat(sample, axis=1), dtype=float)
            else:
                vals = np.array([stat(row) for row in sample], dtype=float)
            out[j].append(vals)
        done += rows
    return [np.concatenate(parts) for parts in out]


def check_boot_args(n_boot: int, alpha: float) -> None:
    _check_alpha(alpha)
    if int(n_boot) < 1:
        raise StatsInputError(f"n_boot must be >= 1, got {n_boot!r}")


def bootstrap_ci(
    values: object,
    stat: Callable = np.mean,
    n_boot: int = 2000,
    alpha: float = ALPHA,
    seed: int = 0,
) -> tuple[float, float]:
    """Seeded percentile-bootstrap CI of ``stat(values)`` (Appendix F.4).

    Args:
        values: 1-D sample (e.g. a cell's 0/1 correctness).
        stat: statistic; called as ``stat(x, axis=1)`` when it accepts ``axis``.
        n_boot: resamples (the paper used :data:`PAPER_N_BOOT`).
        alpha: 1 - confidence level.
        seed: seed of ``numpy.random.default_rng`` (the paper's is :data:`PAPER_BOOT_SEED`).

    Returns:
        ``(low, high)``: the alpha/2 and 1 - alpha/2 quantiles (linear interpolation) of the
        bootstrap distribution.
    """
    check_boot_args(n_boot, alpha)
    arr = as_1d_float(values, "values")
    (boot,) = _boot_stats([arr], stat, int(n_boot), seed)
    low, high = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


def paired_bootstrap_diff(
    a: object,
    b: object,
    stat: Callable = np.mean,
    n_boot: int = 2000,
    alpha: float = ALPHA,
    seed: int = 0,
) -> PairedDiff:
    """Percentile-bootstrap CI of ``stat(a) - stat(b)`` resampling *pairs* (same questions).

    Args:
        a, b: paired 1-D samples of equal length (row i of both is the same question).
        stat, n_boot, alpha, seed: as in :func:`bootstrap_ci`.

    Returns:
        :class:`PairedDiff` (estimate on the full sample, low, high).
    """
    check_boot_args(n_boot, alpha)
    a_arr = as_1d_float(a, "a")
    b_arr = as_1d_float(b, "b")
    if a_arr.size != b_arr.size:
        raise StatsInputError(f"paired samples differ in length: a={a_arr.size}, b={b_arr.size}")
    boot_a, boot_b = _boot_stats([a_arr, b_arr], stat, int(n_boot), seed)
    low, high = np.quantile(boot_a - boot_b, [alpha / 2.0, 1.0 - alpha / 2.0])
    estimate = float(stat(a_arr)) - float(stat(b_arr))
    return PairedDiff(estimate, float(low), float(high))


def mcnemar(a_correct: object, b_correct: object, exact: bool | None = None) -> McNemarResult:
    """McNemar's test on paired correctness of two cells over the same questions (§3, §5.4).

    Rule: with ``exact=None`` the exact two-sided binomial test (b ~ Bin(b + c, 1/2)) is used
    when ``b + c < 25`` (:data:`MCNEMAR_EXACT_BELOW`), else the chi-square test with
    Edwards' continuity correction ``(|b - c| - 1)^2 / (b + c)``, 1 df. Both match
    ``statsmodels.stats.contingency_tables.mcnemar`` (including its convention that the
    corrected statistic is 1 / (b + c), not 0, when b == c). With no discordant pairs there is
    no evidence of a difference: statistic 0, p = 1.

    Args:
        a_correct, b_correct: equal-length boolean (or 0/1) arrays, aligned by question.
        exact: force the exact (True) or chi-square (False) test; None applies the rule.

    Returns:
        :class:`McNemarResult`.
    """
    a = as_bool_array(a_correct, "a_correct")
    b_arr = as_bool_array(b_correct, "b_correct")
    if a.size != b_arr.size:
        raise StatsInputError(f"paired arrays differ in length: a={a.size}, b={b_arr.size}")
    if a.size == 0:
        raise StatsInputError("mcnemar needs at least one paired question")
    b = int(np.sum(a & ~b_arr))
    c = int(np.sum(~a & b_arr))
    use_exact = (b + c) < MCNEMAR_EXACT_BELOW if exact is None else bool(exact)
    method = "exact" if use_exact else "chi2"
    if b + c == 0:
        return McNemarResult(b, c, 0.0, 1.0, method)
    if use_exact:
        p = sps.binomtest(min(b, c), b + c, 0.5, alternative="two-sided").pvalue
        return McNemarResult(b, c, float(min(b, c)), float(min(1.0, p)), method)
    statistic = (abs(b - c) - 1.0) ** 2 / (b + c)
    return McNemarResult(b, c, float(statistic), float(sps.chi2.sf(statistic, 1)), method)


def holm_bonferroni(p_values: object, alpha: float = ALPHA) -> pd.DataFrame:
    """Holm's step-down adjustment of a family of p-values (§3: m = 12, alpha = 0.05).

    ``p_adj`` of the i-th smallest p is ``max_{j <= i} min(1, (m - j + 1) * p_(j))``;
    a hypothesis is rejected when ``p_adj <= alpha``.

    Args:
        p_values: p-values (list, array or Series; a Series keeps its index).
        alpha: family-wise error rate.

    Returns:
        DataFrame with columns p, p_adj, reject, in the input order.
    """
    _check_alpha(alpha)
    index = p_values.index if isinstance(p_values, pd.Series) else None
    p = np.asarray(p_values, dtype=float).ravel()
    if p.size == 0:
        raise StatsInputError("holm_bonferroni needs at least one p-value")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        bad = float(p[np.isnan(p) | (p < 0) | (p > 1)][0])
        raise StatsInputError(f"p-values must lie in [0, 1]; got {bad!r}")
    m = p.size
    order = np.argsort(p, kind="mergesort")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adj_sorted = np.maximum.accumulate(scaled)
    p_adj = np.empty(m)
    p_adj[order] = adj_sorted
    return pd.DataFrame({"p": p, "p_adj": p_adj, "reject": p_adj <= alpha}, index=index)


def minimum_detectable_effect(
    n: object,
    p0: float = 0.5,
    alpha: float = ALPHA,
    power: float = 0.8,
    paired: bool = False,
    discordance: float | None = None,
    design_effect: object = 1.0,
) -> object:
    """Minimum detectable accuracy difference between two cells of n questions (Table 7).

    ``paired=False`` (the paper's "conservative two-proportion approximation"):
    ``(z_{1-alpha/2} + z_{power}) * sqrt(2 * p0 * (1 - p0) / n)`` — two independent arms of
    n with variance p0 (1 - p0) in both. At p0 = 0.5 this reproduces Table 7 exactly.

    ``paired=True``: the McNemar design (Connor 1987),
    ``n = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2 / d^2`` solved for d in closed form, where
    psi is the discordant-pair proportion (default ``2 p0 (1 - p0)``, the value if the two
    cells erred independently). Returns NaN where no d <= psi satisfies it (n too small).

    Args:
        n: questions per cell (scalar or array).
        p0: baseline accuracy.
        alpha: two-sided significance level.
        power: desired power, in [0.5, 1).
        paired: use the McNemar formula instead of the two-proportion one.
        discordance: psi for ``paired=True``.
        design_effect: variance inflation from clustering (scalar or like ``n``); the MDE is
            computed at the effective size ``n / design_effect`` (patient-clustered questions,
            :mod:`clinlib.analysis.stats.cluster`). 1 = independent questions.

    Returns:
        The MDE as a proportion (multiply by 100 for pp): float or array like ``n``.
    """
    z_a = z_value(alpha)
    if not 0.5 <= float(power) < 1.0:
        raise StatsInputError(f"power must be in [0.5, 1), got {power!r}")
    if not 0.0 < float(p0) < 1.0:
        raise StatsInputError(f"p0 must be in (0, 1), got {p0!r}")
    z_b = float(sps.norm.ppf(power))
    n_arr = np.asarray(n, dtype=float)
    if np.isnan(n_arr).any() or (n_arr <= 0).any():
        raise StatsInputError("n must be positive")
    deff = np.asarray(design_effect, dtype=float)
    if np.isnan(deff).any() or (deff <= 0).any():
        raise StatsInputError(f"design_effect must be positive, got {design_effect!r}")
    n_arr = n_arr / deff
    if not paired:
        if discordance is not None:
            raise StatsInputError("discordance applies only with paired=True")
        out = (z_a + z_b) * np.sqrt(2.0 * p0 * (1.0 - p0) / n_arr)
    else:
        psi = 2.0 * p0 * (1.0 - p0) if discordance is None else float(discordance)
        if not 0.0 < psi <= 1.0:
            raise StatsInputError(f"discordance must be in (0, 1], got {discordance!r}")
        # Square n d^2 = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2 and take the root with
        # sqrt(n) d >= z_a sqrt(psi): a quadratic in d.
        with np.errstate(invalid="ignore"):
            disc = n_arr + z_b * z_b - z_a * z_a
            out = np.sqrt(psi) * (z_a * np.sqrt(n_arr) + z_b * np.sqrt(disc)) / (n_arr + z_b * z_b)
        out = np.where((disc < 0) | (out > psi), np.nan, out)
    return float(out) if np.ndim(out) == 0 else out


def pearson(x: object, y: object, alpha: float = ALPHA) -> PearsonResult:
    """Pearson correlation with a Fisher-z confidence interval (§6, Appendix C.3).

    Args:
        x, y: equal-length numeric samples (n >= 4, neither constant).
        alpha: 1 - confidence level of the interval ``tanh(atanh(r) +- z / sqrt(n - 3))``.

    Returns:
        :class:`PearsonResult` (r, p, ci_low, ci_high, n); p is the two-sided t test.
    """
    z = z_value(alpha)
    xa = as_1d_float(x, "x")
    ya = as_1d_float(y, "y")
    if xa.size != ya.size:
        raise StatsInputError(f"x and y differ in length: {xa.size} vs {ya.size}")
    n = xa.size
    if n < 4:
        raise StatsInputError(f"pearson needs n >= 4 for a Fisher-z interval, got n={n}")
    if np.ptp(xa) == 0 or np.ptp(ya) == 0:
        raise StatsInputError("pearson is undefined when x or y is constant")
    xc = xa - xa.mean()
    yc = ya - ya.mean()
    r = float(np.clip(np.sum(xc * yc) / np.sqrt(np.sum(xc * xc) * np.sum(yc * yc)), -1, 1))
    if abs(r) == 1.0:
        return PearsonResult(r, 0.0, r, r, n)
    t = r * np.sqrt((n - 2) / (1.0 - r * r))
    p = float(2.0 * sps.t.sf(abs(t), n - 2))
    zr = np.arctanh(r)
    se = 1.0 / np.sqrt(n - 3)
    return PearsonResult(r, p, float(np.tanh(zr - z * se)), float(np.tanh(zr + z * se)), n)


def _cell_label(cell: Hashable) -> tuple:
    return cell if isinstance(cell, tuple) else (cell,)


def pairwise_mcnemar(
    frame: pd.DataFrame,
    cell: Sequence[str] = ("strategy", "backbone"),
    pairs: Sequence[tuple[Hashable, Hashable]] | None = None,
    key: Sequence[str] = ("qid",),
    correct_col: str = "correct",
    exact: bool | None = None,
    alpha: float = ALPHA,
) -> pd.DataFrame:
    """McNemar tests for many pairs of cells, Holm-adjusted as one family (§3).

    Questions are paired on ``key``; each pair of cells is tested on the questions both
    answered. Filter ``frame`` first to the task/setting the comparison is about.

    Args:
        frame: predictions with the ``key``, ``cell`` and ``correct_col`` columns.
        cell: columns that identify a cell.
        pairs: ``(cell_a, cell_b)`` pairs; a cell is a tuple of ``cell`` values (or a scalar
            when ``cell`` has one column). Default: every pair of cells present.
        key: columns identifying a question; must be unique within each cell.
        correct_col: boolean correctness column.
        exact: passed to :func:`mcnemar`.
        alpha: family-wise level for the Holm correction.

    Returns:
        One row per pair: ``<cell>_a`` and ``<cell>_b`` columns, n (paired questions),
        acc_a, acc_b, diff (acc_a - acc_b), b (A right, B wrong), c (A wrong, B right),
        statistic, p_value, method, p_adj, reject.
    """
    cell = list(cell)
    wide = paired_correct(frame, cell, list(key), correct_col)
    available = [_cell_label(c) for c in wide.columns]
    lookup = dict(zip(available, wide.columns, strict=True))
    if pairs is None:
        pairs = list(itertools.combinations(sorted(available), 2))
    if len(pairs) == 0:
        raise StatsInputError("pairwise_mcnemar: fewer than two cells to compare")
    rows = []
    for pa, pb in pairs:
        la, lb = _cell_label(pa), _cell_label(pb)
        for lab in (la, lb):
            if lab not in lookup:
                raise StatsInputError(
                    f"pairwise_mcnemar: unknown cell {lab} for columns {cell}; "
                    f"available: {sorted(available)}"
                )
        rows.append(_mcnemar_row(wide[[lookup[la], lookup[lb]]], cell, la, lb, exact))
    out = pd.DataFrame(rows)
    holm = holm_bonferroni(out["p_value"].to_numpy(), alpha=alpha)
    out["p_adj"] = holm["p_adj"].to_numpy()
    out["reject"] = holm["reject"].to_numpy()
    return out


def paired_correct(
    frame: pd.DataFrame, cell: list[str], key: list[str], correct_col: str
) -> pd.DataFrame:
    """Correctness with one row per question (``key``) and one column per cell."""
    missing = [c for c in [*key, *cell, correct_col] if c not in frame.columns]
    if missing:
        raise StatsInputError(
            f"pairwise_mcnemar: frame lacks column(s) {missing}; has {list(frame.columns)}"
        )
    dup = frame.duplicated(subset=key + cell, keep=False)
    if dup.any():
        row = frame.loc[dup, key + cell].iloc[0].to_dict()
        raise StatsInputError(
            f"pairwise_mcnemar: {int(dup.sum())} rows repeat a question within a cell, e.g. "
            f"{row}; filter by setting/task or add the distinguishing column to `key`"
        )
    correct = pd.Series(as_bool_array(frame[correct_col], correct_col), index=frame.index)
    return (
        frame[key + cell]
        .assign(_correct=correct)
        .set_index(key + cell)["_correct"]
        .unstack(cell if len(cell) > 1 else cell[0])
    )


def _mcnemar_row(
    two: pd.DataFrame, cell: list[str], la: tuple, lb: tuple, exact: bool | None
) -> dict[str, object]:
    """One output row of :func:`pairwise_mcnemar`: cells ``la`` / ``lb`` (the two columns of
    ``two``) tested on the questions both answered."""
    both = two.dropna()
    if both.empty:
        raise StatsInputError(f"pairwise_mcnemar: cells {la} and {lb} share no questions")
    a = both.iloc[:, 0].astype(bool).to_numpy()
    b = both.iloc[:, 1].astype(bool).to_numpy()
    res = mcnemar(a, b, exact=exact)
    row: dict[str, object] = {f"{c}_a": v for c, v in zip(cell, la, strict=True)}
    row.update({f"{c}_b": v for c, v in zip(cell, lb, strict=True)})
    row.update(
        n=int(a.size),
        acc_a=float(a.mean()),
        acc_b=float(b.mean()),
        diff=float(a.mean() - b.mean()),
        b=res.b,
        c=res.c,
        statistic=res.statistic,
        p_value=res.p_value,
        method=res.method,
    )
    return row
