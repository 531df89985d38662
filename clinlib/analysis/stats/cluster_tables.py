"""Patient-clustered tables for the notebooks (07–11): accuracy with the question-level Wilson
interval beside the patient-clustered ones, the patient-level test beside McNemar, the design
effect per task and the MDE it implies (Table 7 at the effective sample size), the gap between
two strategies with both intervals, and which significance verdicts survive clustering.

The statistics are :mod:`clinlib.analysis.stats.cluster` (how questions are clustered, T6
included, is documented there); this module only applies them per cell and words the verdicts.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence

import numpy as np
import pandas as pd

from clinlib.analysis.stats.cluster import (
    CLUSTER_COLUMN,
    cluster_bootstrap_ci,
    cluster_robust_ci,
    cluster_sign_flip_test,
    design_effect,
    paired_cluster_bootstrap,
)
from clinlib.analysis.stats.question import (
    StatsInputError,
    as_bool_array,
    holm_bonferroni,
    minimum_detectable_effect,
    paired_bootstrap_diff,
    paired_correct,
    pairwise_mcnemar,
    wilson_ci,
)

log = logging.getLogger("clinlib.analysis")


def clustered_accuracy(
    frame: pd.DataFrame,
    by: Sequence[str] = ("strategy", "backbone"),
    cluster_col: str = CLUSTER_COLUMN,
    correct_col: str = "correct",
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> pd.DataFrame:
    """Accuracy per group with the question-level Wilson CI beside the patient-clustered ones.

    Args:
        frame: predictions with ``by``, ``cluster_col`` (:func:`with_clusters`) and
            ``correct_col``.
        by: grouping columns (one interval per group).
        n_boot, alpha, seed: the cluster bootstrap's resamples, level and seed (the same seed in
            every group).

    Returns:
        ``by`` + n, n_clusters, accuracy, wilson_low, wilson_high, boot_low, boot_high (cluster
        bootstrap), cr_low, cr_high (CR1), icc, deff (empirical), deff_icc, and the half-widths
        in pp: half_wilson_pp, half_boot_pp.
    """
    by = list(by)
    missing = [c for c in [*by, cluster_col, correct_col] if c not in frame.columns]
    if missing:
        raise StatsInputError(f"clustered_accuracy: frame lacks column(s) {missing}")
    if frame.empty:
        raise StatsInputError("clustered_accuracy: frame is empty")
    rows = []
    for keys, grp in frame.groupby(by, sort=True, dropna=False):
        y = as_bool_array(grp[correct_col], correct_col).astype(float)
        cl = grp[cluster_col].to_numpy()
        boot = cluster_bootstrap_ci(y, cl, n_boot, alpha, seed)
        cr = cluster_robust_ci(y, cl, alpha)
        de = design_effect(y, cl)
        w_lo, w_hi = wilson_ci(float(y.sum()), float(y.size), alpha)
        row = dict(zip(by, keys if isinstance(keys, tuple) else (keys,), strict=True))
        row.update(
            n=boot.n,
            n_clusters=boot.n_clusters,
            accuracy=boot.estimate,
            wilson_low=w_lo,
            wilson_high=w_hi,
            boot_low=boot.low,
            boot_high=boot.high,
            cr_low=cr.low,
            cr_high=cr.high,
            icc=de.icc,
            deff=de.deff,
            deff_icc=de.deff_icc,
        )
        rows.append(row)
    out = pd.DataFrame(rows)
    out["half_wilson_pp"] = 50 * (out["wilson_high"] - out["wilson_low"])
    out["half_boot_pp"] = 50 * (out["boot_high"] - out["boot_low"])
    return out


def _key_clusters(frame: pd.DataFrame, key: list[str], cluster_col: str) -> pd.Series:
    """One cluster per question key; a key mapped to two clusters is an error."""
    pairs = frame[[*key, cluster_col]].drop_duplicates()
    dup = pairs.duplicated(subset=key, keep=False)
    if dup.any():
        raise StatsInputError(
            f"pairwise_clustered: question {pairs.loc[dup, key].iloc[0].to_dict()} has more "
            f"than one {cluster_col!r}"
        )
    return pairs.set_index(key)[cluster_col]


def pairwise_clustered(
    frame: pd.DataFrame,
    cell: Sequence[str] = ("strategy",),
    pairs: Sequence[tuple[Hashable, Hashable]] | None = None,
    key: Sequence[str] = ("qid",),
    cluster_col: str = CLUSTER_COLUMN,
    correct_col: str = "correct",
    alpha: float = 0.05,
    n_boot: int = 2000,
    n_perm: int = 20_000,
    seed: int = 0,
) -> pd.DataFrame:
    """:func:`clinlib.analysis.stats.pairwise_mcnemar` with the patient-clustered test beside it.

    Each pair gets McNemar (question level, Holm over the family: p_adj, reject) and the
    patient-level sign-flip test (:func:`cluster_sign_flip_test`, Holm over the same family:
    p_cluster_adj, reject_cluster), plus the cluster-bootstrap CI of the difference.

    Returns:
        pairwise_mcnemar's columns + n_clusters, clusters_discordant (patients whose summed
        difference is non-zero), diff_low, diff_high, p_cluster, cluster_method, p_cluster_adj,
        reject_cluster, survives (reject and reject_cluster).
    """
    cell, key = list(cell), list(key)
    if cluster_col not in frame.columns:
        raise StatsInputError(
            f"pairwise_clustered: frame lacks column {cluster_col!r}; add it with with_clusters"
        )
    out = pairwise_mcnemar(
        frame, cell=cell, pairs=pairs, key=key, correct_col=correct_col, alpha=alpha
    )
    wide = paired_correct(frame, cell, key, correct_col)
    clusters = _key_clusters(frame, key, cluster_col).reindex(wide.index)
    lookup = {c if isinstance(c, tuple) else (c,): c for c in wide.columns}
    extra = []
    for _, row in out.iterrows():
        la = tuple(row[f"{c}_a"] for c in cell)
        lb = tuple(row[f"{c}_b"] for c in cell)
        both = wide[[lookup[la], lookup[lb]]].dropna()
        a = both.iloc[:, 0].astype(float).to_numpy()
        b = both.iloc[:, 1].astype(float).to_numpy()
        cl = clusters.loc[both.index].to_numpy()
        flip = cluster_sign_flip_test(a, b, cl, n_perm=n_perm, seed=seed)
        ci = paired_cluster_bootstrap(a, b, cl, n_boot=n_boot, alpha=alpha, seed=seed)
        extra.append(
            {
                "n_clusters": ci.n_clusters,
                "clusters_discordant": flip.n_nonzero,
                "diff_low": ci.low,
                "diff_high": ci.high,
                "p_cluster": flip.p_value,
                "cluster_method": flip.method,
            }
        )
    out = pd.concat([out, pd.DataFrame(extra, index=out.index)], axis=1)
    holm = holm_bonferroni(out["p_cluster"].to_numpy(), alpha=alpha)
    out["p_cluster_adj"] = holm["p_adj"].to_numpy()
    out["reject_cluster"] = holm["reject"].to_numpy()
    out["survives"] = out["reject"] & out["reject_cluster"]
    return out


def mde_with_design_effect(
    n: pd.Series, deff: pd.Series, p0: float = 0.5, alpha: float = 0.05, power: float = 0.8
) -> pd.DataFrame:
    """Table 7's two-proportion MDE beside the same MDE at the effective sample size n / deff.

    Args:
        n: questions per cell, indexed by task.
        deff: design effect per task (same index); values below 1 are kept (a negative ICC
            narrows the interval), NaN falls back to 1.

    Returns:
        task, n, deff, n_effective, mde_pp, mde_clustered_pp.
    """
    d = deff.reindex(n.index).astype(float).fillna(1.0)
    n_arr = n.astype(float).to_numpy()
    out = pd.DataFrame({"task": n.index, "n": n.to_numpy(), "deff": d.to_numpy()})
    out["n_effective"] = n_arr / d.to_numpy()
    out["mde_pp"] = 100 * np.asarray(minimum_detectable_effect(n_arr, p0, alpha, power))
    out["mde_clustered_pp"] = 100 * np.asarray(
        minimum_detectable_effect(n_arr, p0, alpha, power, design_effect=d.to_numpy())
    )
    return out.reset_index(drop=True)


def task_design_effects(task_cells: pd.DataFrame) -> pd.DataFrame:
    """The design effect per task: the median over cells of :func:`clustered_accuracy`'s
    empirical ``deff`` (cells with a constant outcome have none and are skipped).

    Args:
        task_cells: :func:`clustered_accuracy` output grouped with a ``task`` column.

    Returns:
        task, n_cells (cells with a design effect), deff_median, deff_min, deff_max, icc_median.
    """
    need = {"task", "deff", "icc"}
    if not need <= set(task_cells.columns):
        raise StatsInputError(f"task_design_effects: needs columns {sorted(need)}")
    g = task_cells.groupby("task", sort=True)
    out = pd.DataFrame(
        {
            "n_cells": g["deff"].count(),
            "deff_median": g["deff"].median(),
            "deff_min": g["deff"].min(),
            "deff_max": g["deff"].max(),
            "icc_median": g["icc"].median(),
        }
    )
    return out.reset_index()


def paired_gap(
    frame: pd.DataFrame,
    a: str,
    b: str,
    by: str = "backbone",
    cluster_col: str = CLUSTER_COLUMN,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> pd.DataFrame:
    """Accuracy gap ``a - b`` (two strategies, same questions) per ``by`` value, with the
    question-level paired bootstrap CI beside the patient-clustered one and both tests.

    Returns:
        ``by``, n, n_clusters, gap_pp, q_low_pp, q_high_pp (question-level paired bootstrap),
        c_low_pp, c_high_pp (patient-clustered bootstrap), half_q_pp, half_c_pp, p_mcnemar,
        p_cluster.
    """
    rows = []
    for value, sub in frame.groupby(by, sort=True):
        held = set(sub["strategy"])
        if a not in held or b not in held:  # e.g. an outside system's rows under other labels
            log.warning("paired_gap: %s %s lacks %s or %s: not compared", by, value, a, b)
            continue
        test = pairwise_clustered(
            sub, pairs=[(a, b)], cluster_col=cluster_col, alpha=alpha, n_boot=n_boot, seed=seed
        ).iloc[0]
        wide = paired_correct(sub, ["strategy"], ["qid"], "correct")[[a, b]].dropna()
        q = paired_bootstrap_diff(
            wide[a].astype(float), wide[b].astype(float), n_boot=n_boot, alpha=alpha, seed=seed
        )
        rows.append(
            {
                by: value,
                "n": int(test["n"]),
                "n_clusters": int(test["n_clusters"]),
                "gap_pp": 100 * test["diff"],
                "q_low_pp": 100 * q.low,
                "q_high_pp": 100 * q.high,
                "c_low_pp": 100 * test["diff_low"],
                "c_high_pp": 100 * test["diff_high"],
                "p_mcnemar": test["p_value"],
                "p_cluster": test["p_cluster"],
            }
        )
    cols = [by, "n", "n_clusters", "gap_pp", "q_low_pp", "q_high_pp", "c_low_pp", "c_high_pp"]
    out = pd.DataFrame(rows, columns=[*cols, "p_mcnemar", "p_cluster"])
    out["half_q_pp"] = (out["q_high_pp"] - out["q_low_pp"]) / 2
    out["half_c_pp"] = (out["c_high_pp"] - out["c_low_pp"]) / 2
    return out


def _pair_name(row: pd.Series, label_cols: Sequence[str]) -> str:
    """``a vs b`` from the last two label columns, prefixed ``x, y: `` by the others."""
    names = [str(row[c]) for c in label_cols]
    pair = " vs ".join(names[-2:])
    return f"{', '.join(names[:-2])}: {pair}" if len(names) > 2 else pair


def survival_summary(tests: pd.DataFrame, label_cols: Sequence[str]) -> dict[str, object]:
    """Which question-level (McNemar, Holm) rejections survive the patient-clustered test.

    Args:
        tests: :func:`pairwise_clustered`-shaped rows (reject, reject_cluster).
        label_cols: columns naming a comparison (e.g. backbone, strategy).

    Returns:
        dict: n (comparisons), n_reject, n_survive, lost (names of rejections that do not
        survive), gained (clustered rejections McNemar missed).
    """
    need = {"reject", "reject_cluster", *label_cols}
    if not need <= set(tests.columns):
        raise StatsInputError(f"survival_summary: needs columns {sorted(need)}")
    rej, rc = tests["reject"].astype(bool), tests["reject_cluster"].astype(bool)
    return {
        "n": int(len(tests)),
        "n_reject": int(rej.sum()),
        "n_survive": int((rej & rc).sum()),
        "lost": [_pair_name(r, label_cols) for _, r in tests[rej & ~rc].iterrows()],
        "gained": [_pair_name(r, label_cols) for _, r in tests[~rej & rc].iterrows()],
    }


def survival_text(tests: pd.DataFrame, label_cols: Sequence[str], what: str) -> str:
    """One Markdown paragraph, worded from :func:`survival_summary` (nothing hand-written)."""
    s = survival_summary(tests, label_cols)
    text = (
        f"**{what}:** {s['n_reject']} of {s['n']} comparisons are significant by McNemar "
        f"(Holm); {s['n_survive']} of them stay significant under the patient-level sign-flip "
        "test (Holm)."
    )
    if s["lost"]:
        text += " Lost once patients are clustered: " + "; ".join(s["lost"]) + "."
    elif s["n_reject"]:
        text += " Every question-level conclusion survives clustering."
    if s["gained"]:
        text += " Significant only when clustered: " + "; ".join(s["gained"]) + "."
    return text


def deff_text(cells: pd.DataFrame, what: str) -> str:
    """One Markdown sentence on the spread of the design effect and the interval widths."""
    d = cells["deff"].dropna()
    if d.empty:
        return f"**{what}:** no cell varies, so no design effect can be estimated."
    wider = cells.dropna(subset=["deff"])
    ratio = (wider["half_boot_pp"] / wider["half_wilson_pp"]).median()
    return (
        f"**{what}:** over {len(d)} cells with a design effect, it ranges from {d.min():.2f} "
        f"to {d.max():.2f} (median {d.median():.2f}; {int((d > 1).sum())} cells above 1); the "
        f"patient-clustered bootstrap half-width is a median {ratio:.2f}× the Wilson one. "
        f"{int(cells['n_clusters'].max())} patients, {int(cells['n'].max()):,} questions per "
        "cell at most."
    )


__all__ = [
    "clustered_accuracy",
    "deff_text",
    "mde_with_design_effect",
    "paired_gap",
    "pairwise_clustered",
    "survival_summary",
    "survival_text",
    "task_design_effects",
]
