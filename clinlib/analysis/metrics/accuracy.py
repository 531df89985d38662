"""Accuracy tables with confidence intervals (paper §3 "Headline metric", §5.1, §5.3,
Table 1 / Table 2 / Table 14 cells, Appendices B and F strata).

Pooled accuracy weights each task by its size (sum of correct / sum of n); macro accuracy is
the unweighted mean of per-task accuracies; Delta_blind is macro minus the same-backbone
no-context-blind macro; Table 2's lift is the same per task ("mem-avg" = mean of Mem0 and
A-MEM).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from clinlib.analysis.metrics.common import (
    CELL,
    MetricsInputError,
    bool_col,
    example_id,
    group_counts,
    require,
    with_question_cols,
)
from clinlib.analysis.stats.question import bootstrap_ci, wilson_ci

log = logging.getLogger("clinlib.analysis")

BLIND_STRATEGY = "no-context-blind"
MEM_AVG = "mem-avg"  # same spelling as clinlib.analysis.paper and data/paper/table02
MEM_AVG_MEMBERS: tuple[str, ...] = ("mem0", "a-mem")
TABLE2_REGIMES: tuple[str, ...] = ("full-context", "dense-retrieval", MEM_AVG)

# by_group names -> column (Appendix B subtypes, F.1 patients, F.2 diseases, F.3 tertiles).
GROUP_COLUMNS: dict[str, str] = {
    "subtype": "subtype",
    "disease": "disease",
    "tertile": "tertile",
    "patient": "subject_ids",
}


def accuracy_table(
    preds: pd.DataFrame,
    by: Sequence[str] = ("strategy", "backbone", "task"),
    correct_col: str = "correct",
    alpha: float = 0.05,
    n_boot: int = 0,
    seed: int = 0,
) -> pd.DataFrame:
    """Accuracy with a Wilson CI per group (Table 1 / Table 14 cells, §3 CIs).

    Args:
        preds: predictions table.
        by: grouping columns (default one row per strategy x backbone x task).
        correct_col: boolean correctness column ("correct" strict, "correct_lenient").
        alpha: 1 - confidence level.
        n_boot: if > 0, also a percentile bootstrap CI (Appendix F.4; the paper used 100
            resamples, seed 20260519); the same seed is used in every group.
        seed: bootstrap seed.

    Returns:
        ``by`` columns + n, k, accuracy, ci_low, ci_high (+ boot_low, boot_high).
    """
    by = list(by)
    require(preds, [*by, correct_col], "accuracy_table")
    if preds.empty:
        raise MetricsInputError("accuracy_table: predictions table is empty")
    ok = bool_col(preds, correct_col, "accuracy_table")
    frame = preds[by].assign(n=1, k=ok.astype(int).to_numpy())
    out = group_counts(frame, by)
    out["accuracy"] = out["k"] / out["n"]
    out["ci_low"], out["ci_high"] = wilson_ci(out["k"].to_numpy(), out["n"].to_numpy(), alpha)
    if n_boot > 0:
        groups = ok.groupby([preds[c] for c in by], sort=True, dropna=False)
        bounds = [bootstrap_ci(g.to_numpy(float), np.mean, n_boot, alpha, seed) for _, g in groups]
        out["boot_low"] = [b[0] for b in bounds]
        out["boot_high"] = [b[1] for b in bounds]
    return out


def _common_tasks(df: pd.DataFrame, acc: pd.Series, cell: list[str], refuse: bool) -> tuple:
    """``df`` / ``acc`` without the cells that lack a task another cell has. Macro over
    different task sets would not be comparable across cells: a cell run on a subset of the
    tasks (an outside system's rows, `run --tasks`) is left out, in one line."""
    task_sets = df.groupby(cell, dropna=False)["task"].agg(frozenset)
    if task_sets.nunique() <= 1:
        return df, acc
    full = frozenset().union(*task_sets)
    short = task_sets[task_sets != full]
    if refuse or len(short) == len(task_sets):
        why = "every cell must cover the same tasks" if refuse else "no cell covers every task"
        raise MetricsInputError(
            f"summary_rows: cell {short.index[0]} lacks task(s) "
            f"{sorted(full - short.iloc[0])}; {why}"
        )
    log.warning(
        "summary_rows: %d cell(s) cover only some tasks and are left out of the pooled "
        "rows (e.g. %s lacks %s)",
        len(short),
        short.index[0],
        sorted(full - short.iloc[0]),
    )
    drop = {k if isinstance(k, tuple) else (k,) for k in short.index}
    kept = [k not in drop for k in df[cell].itertuples(index=False, name=None)]
    return df[kept], acc[kept]


def summary_rows(
    per_task: pd.DataFrame,
    task_n: Mapping[str, int] | None = None,
    baseline: str = BLIND_STRATEGY,
    cell: Sequence[str] = CELL,
    match: Sequence[str] = ("backbone",),
    alpha: float = 0.05,
    partial: str = "leave out",
) -> pd.DataFrame:
    """Pooled, macro and Delta_blind per cell (Table 1 bottom rows, §5.1, §5.3).

    Args:
        per_task: one row per (cell, task) with ``accuracy`` and ``n`` (e.g. the output of
            :func:`accuracy_table`, or the paper's published per-task accuracies).
        task_n: task -> size; overrides ``n`` (needed when ``per_task`` has no n column).
        baseline: strategy whose macro is subtracted for Delta_blind.
        cell: columns identifying a cell; must include "strategy".
        match: columns on which a cell is matched to its baseline (same backbone).
        alpha: 1 - confidence level of the pooled Wilson CI.
        partial: a cell lacking a task another cell has (a macro over other tasks is not
            comparable): ``"leave out"`` (default; a run's own rows on some ``--tasks``, an
            outside system's, with one warning line) or ``"refuse"`` (a paper table, where a
            missing cell is a transcription error).

    Returns:
        ``cell`` columns + n_tasks, n, pooled, pooled_ci_low, pooled_ci_high, macro,
        delta_blind (macro - same-backbone baseline macro; NaN for the baseline's own rows,
        which the paper prints as a dash, and where no baseline cell exists).
    """
    cell, match = list(cell), list(match)
    if "strategy" not in cell:
        raise MetricsInputError(f"summary_rows: cell must include 'strategy', got {cell}")
    require(per_task, [*cell, "task", "accuracy"], "summary_rows")
    df = per_task[[*cell, "task", "accuracy"]].copy()
    if task_n is not None:
        df["n"] = df["task"].map(dict(task_n))
        if df["n"].isna().any():
            task = df.loc[df["n"].isna(), "task"].iloc[0]
            raise MetricsInputError(f"summary_rows: task_n has no size for task {task!r}")
    else:
        require(per_task, ["n"], "summary_rows", "or pass task_n={task: size}")
        df["n"] = per_task["n"].to_numpy()
    acc = pd.to_numeric(df["accuracy"], errors="coerce")
    if acc.isna().any() or ((acc < 0) | (acc > 1)).any():
        raise MetricsInputError("summary_rows: accuracy must be numbers in [0, 1]")
    dup = df.duplicated([*cell, "task"])
    if dup.any():
        raise MetricsInputError(
            f"summary_rows: (cell, task) repeated: {df.loc[dup, [*cell, 'task']].iloc[0].to_dict()}"
        )
    df, acc = _common_tasks(df, acc, cell, partial == "refuse")
    df["k"] = acc * df["n"]
    out = (
        df.groupby(cell, sort=True, dropna=False)
        .agg(n_tasks=("task", "size"), n=("n", "sum"), k=("k", "sum"), macro=("accuracy", "mean"))
        .reset_index()
    )
    out["pooled"] = out["k"] / out["n"]
    out["pooled_ci_low"], out["pooled_ci_high"] = wilson_ci(
        out["k"].to_numpy(), out["n"].to_numpy(), alpha
    )
    base = out.loc[out["strategy"] == baseline, [*match, "macro"]]
    if base.duplicated(match).any():
        raise MetricsInputError(
            f"summary_rows: several {baseline!r} cells per {match}; add the distinguishing "
            "column to match="
        )
    out = out.merge(base.rename(columns={"macro": "_base"}), on=match, how="left")
    out["delta_blind"] = np.where(out["strategy"] == baseline, np.nan, out["macro"] - out["_base"])
    cols = [*cell, "n_tasks", "n", "pooled", "pooled_ci_low", "pooled_ci_high", "macro"]
    return out[[*cols, "delta_blind"]]


def _with_baseline(lifted: pd.DataFrame, match: list[str], baseline: str) -> pd.DataFrame:
    """``lifted`` without the cells that have no baseline accuracy (e.g. a backbone run
    without the blind cell: an outside or ``--tasks`` run), left out in one line."""
    gone = lifted["baseline_accuracy"].isna()
    if not gone.any():
        return lifted
    miss = lifted.loc[gone, [*match, "task"]].iloc[0]
    if gone.all():
        raise MetricsInputError(f"context_lift: no {baseline!r} accuracy for {miss.to_dict()}")
    log.warning(
        "context_lift: %d cell(s) without a %r accuracy left out (e.g. %s)",
        int(gone.sum()),
        baseline,
        miss.to_dict(),
    )
    return lifted[~gone]


def context_lift(
    per_task: pd.DataFrame,
    baseline: str = BLIND_STRATEGY,
    regimes: Sequence[str] | None = None,
    mem_members: Sequence[str] = MEM_AVG_MEMBERS,
    match: Sequence[str] = ("backbone",),
) -> pd.DataFrame:
    """Per-task accuracy lift over the same-backbone baseline (Table 2).

    The "mem-avg" regime is the per-task mean of the ``mem_members`` strategies' accuracies
    (Mem0 and A-Mem). A "macro" pseudo-task row per (regime, backbone) holds the mean over
    tasks (its lift equals Delta_blind).

    Args:
        per_task: one row per (strategy, backbone, task) with ``accuracy``.
        baseline: the no-context strategy.
        regimes: strategies (and/or "mem-avg") to report; default every non-baseline strategy
            present, plus "mem-avg" when all members are present. :data:`TABLE2_REGIMES` gives
            the paper's three.
        mem_members: strategies averaged into "mem-avg".
        match: columns matching a cell to its baseline.

    Returns:
        Long table: regime, ``match`` columns, task, accuracy, baseline_accuracy, lift.
    """
    match = list(match)
    require(per_task, ["strategy", *match, "task", "accuracy"], "context_lift")
    df = per_task[["strategy", *match, "task", "accuracy"]]
    if df.duplicated(["strategy", *match, "task"]).any():
        raise MetricsInputError("context_lift: (strategy, backbone, task) repeated in per_task")
    present = set(df["strategy"])
    if baseline not in present:
        raise MetricsInputError(f"context_lift: no rows for baseline strategy {baseline!r}")
    members_present = all(m in present for m in mem_members)
    if regimes is None:
        regimes = sorted(present - {baseline}) + ([MEM_AVG] if members_present else [])
    frames = []
    for regime in regimes:
        if regime == MEM_AVG:
            if not members_present:
                raise MetricsInputError(
                    f"context_lift: 'mem-avg' needs strategies {list(mem_members)}; "
                    f"present: {sorted(present)}"
                )
            mem = df[df["strategy"].isin(mem_members)]
            counts = mem.groupby([*match, "task"])["strategy"].nunique()
            short = counts[counts < len(mem_members)]
            if not short.empty:
                raise MetricsInputError(
                    f"context_lift: 'mem-avg' lacks a member for {short.index[0]}"
                )
            rows = mem.groupby([*match, "task"], sort=True)["accuracy"].mean().reset_index()
        elif regime in present:
            rows = df.loc[df["strategy"] == regime, [*match, "task", "accuracy"]]
        else:
            raise MetricsInputError(f"context_lift: unknown regime {regime!r}; {sorted(present)}")
        frames.append(rows.assign(regime=regime))
    lifted = pd.concat(frames, ignore_index=True)
    base = df.loc[df["strategy"] == baseline, [*match, "task", "accuracy"]].rename(
        columns={"accuracy": "baseline_accuracy"}
    )
    lifted = lifted.merge(base, on=[*match, "task"], how="left")
    lifted = _with_baseline(lifted, match, baseline)
    lifted["lift"] = lifted["accuracy"] - lifted["baseline_accuracy"]
    macro = (
        lifted.groupby(["regime", *match], sort=False)[["accuracy", "baseline_accuracy", "lift"]]
        .mean()
        .reset_index()
        .assign(task="macro")
    )
    out = pd.concat([lifted, macro], ignore_index=True)
    order = {r: i for i, r in enumerate(regimes)}
    out = out.assign(_r=out["regime"].map(order), _m=(out["task"] == "macro").astype(int))
    out = out.sort_values(["_r", *match, "_m", "task"], kind="mergesort")
    cols = ["regime", *match, "task", "accuracy", "baseline_accuracy", "lift"]
    return out[cols].reset_index(drop=True)


def by_group(
    preds: pd.DataFrame,
    group: str,
    cell: Sequence[str] = CELL,
    correct_col: str = "correct",
    questions: pd.DataFrame | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Accuracy per cell and stratum (Appendix B subtypes, F.1 patients, F.2 diseases, F.3
    tertiles).

    Args:
        preds: predictions; the group column is joined from ``questions`` when absent.
        group: "subtype", "disease", "tertile", "patient" (see :data:`GROUP_COLUMNS`) or any
            other column name. "patient" explodes ``subject_ids``: a cross-patient (T6)
            question counts once for each of its patients.
        cell: grouping columns; add "task" for per-task strata.
        correct_col: correctness column.
        questions: questions table for the join.
        alpha: 1 - confidence level.

    Returns:
        As :func:`accuracy_table` with ``cell`` + the group column ("subject_id" for patient).
    """
    col = GROUP_COLUMNS.get(group, group)
    rows = with_question_cols(preds, questions, [col], "by_group")
    if group == "patient":
        rows = rows.explode(col).rename(columns={col: "subject_id"})
        if rows["subject_id"].isna().any():
            bad = rows["subject_id"].isna()
            raise MetricsInputError(
                f"by_group: a question has no subject_ids{example_id(rows, bad)}"
            )
        col = "subject_id"
    return accuracy_table(rows, by=[*cell, col], correct_col=correct_col, alpha=alpha)
