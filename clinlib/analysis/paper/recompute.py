"""Recompute Table 1's Pool., Macro and Δblind rows from per-task cells (§3 "Headline
metric") and list every printed number that differs from its recomputation.

Pooled weights each task by its §3 evaluation-set size, macro is the unweighted mean over
the nine tasks, Δblind is macro minus the same-backbone no-context-blind macro. These
helpers never "fix" the transcription.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from clinlib.analysis.metrics import MetricsInputError, summary_rows
from clinlib.analysis.paper.specs import (
    BACKBONES,
    BLIND,
    STRATEGIES,
    SUMMARY_TASKS,
    TASK_N,
    TASKS,
    UNIT_SCALE,
    PaperTableError,
    canonical_order,
)


def _require(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise PaperTableError(f"{what} lacks column(s) {missing}; has {list(df.columns)}")


def _uniform_unit(df: pd.DataFrame) -> str | None:
    if "unit" not in df.columns:
        return None
    units = df["unit"].dropna().unique()
    if len(units) > 1:
        raise PaperTableError(f"per-task cells mix units {sorted(map(str, units))}")
    return str(units[0]) if len(units) else None


def recompute_pooled_macro(
    per_task: pd.DataFrame,
    task_n: Mapping[str, int] | None = None,
    tasks: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Recompute Table 1's Pool., Macro and Δblind rows from per-task cells.

    Pooled = sum(acc_t * n_t) / sum(n_t) over ``tasks`` (weights :data:`TASK_N`); macro =
    unweighted mean over ``tasks``; delta_blind = macro minus the same-backbone
    no-context-blind macro (NaN when that backbone has no blind cells). Rows whose task is
    not in ``tasks`` (e.g. Table 1's own summary rows) are ignored.

    Args:
        per_task: columns strategy, backbone, task, value (+ optional unit), one row per
            (strategy, backbone, task); e.g. ``load_table(14)`` or ``load_table(1)``.
        task_n: per-task weights for pooling (default :data:`TASK_N`).
        tasks: tasks to include (default T1–T9; see :data:`TASK_SUBSETS`).

    Returns:
        Columns strategy, backbone, task ("pooled" / "macro" / "delta_blind"), metric,
        value, unit — in the input's scale (delta_blind unit "pp" for percent input).
    """
    _require(per_task, ("strategy", "backbone", "task", "value"), "per_task")
    tasks = tuple(tasks or TASKS)
    weights = dict(task_n or TASK_N)
    no_weight = [t for t in tasks if t not in weights]
    if no_weight:
        raise PaperTableError(f"no task size for {no_weight} in task_n")
    unit = _uniform_unit(per_task[per_task["task"].isin(tasks)])
    cells = _complete_cells(per_task, tasks)
    # The arithmetic lives in metrics.summary_rows, which takes proportions in [0, 1].
    # Pooled and macro are affine in the cell values (weights sum to 1), so map the values
    # affinely into [0, 1] and back: exact for percent, fraction or any other scale.
    lo = min(0.0, float(cells["value"].min()))
    scale = max(1.0, float(cells["value"].max()) - lo)
    try:
        rows = summary_rows(
            cells.assign(accuracy=(cells["value"] - lo) / scale),
            task_n={t: weights[t] for t in tasks},
            baseline=BLIND,
            partial="refuse",
        )
    except MetricsInputError as exc:
        raise PaperTableError(str(exc)) from None
    summary = rows[["strategy", "backbone"]].assign(
        pooled=rows["pooled"] * scale + lo,
        macro=rows["macro"] * scale + lo,
        # summary_rows leaves the baseline's own Δblind empty (the paper's dash); here it is
        # the baseline minus itself.
        delta_blind=np.where(rows["strategy"] == BLIND, 0.0, rows["delta_blind"] * scale),
    )
    return _summary_long(summary, unit)


def _complete_cells(per_task: pd.DataFrame, tasks: Sequence[str]) -> pd.DataFrame:
    """The per-task cells of ``tasks``: numeric, one per (strategy, backbone, task), none
    missing for any (strategy, backbone) present."""
    cells = per_task.loc[per_task["task"].isin(tasks), ["strategy", "backbone", "task", "value"]]
    cells = cells.astype({"strategy": str, "backbone": str, "task": str})
    values = pd.to_numeric(cells["value"], errors="coerce")
    if values.isna().any():
        row = cells[values.isna()].iloc[0]
        raise PaperTableError(
            f"per-task value missing or not numeric for ({row.strategy}, {row.backbone}, "
            f"{row.task}): {row.value!r}"
        )
    cells = cells.assign(value=values.astype(float))
    dup = cells.duplicated(["strategy", "backbone", "task"], keep=False)
    if dup.any():
        row = cells[dup].iloc[0]
        raise PaperTableError(
            f"more than one per-task cell for ({row.strategy}, {row.backbone}, {row.task})"
        )
    wide = cells.pivot(index=["strategy", "backbone"], columns="task", values="value")
    for t in tasks:
        if t not in wide.columns:
            wide[t] = np.nan
    wide = wide[list(tasks)]
    if wide.isna().any().any():
        (st, bb), t = next(
            (idx, t) for idx, row in wide.iterrows() for t in tasks if pd.isna(row[t])
        )
        raise PaperTableError(f"per-task cell missing for ({st}, {bb}, {t})")
    return cells


def _summary_long(summary: pd.DataFrame, unit: str | None) -> pd.DataFrame:
    """Table 1's layout: one row per (strategy, backbone, summary task), in the paper's order."""
    long = summary.melt(
        id_vars=["strategy", "backbone"],
        value_vars=list(SUMMARY_TASKS),
        var_name="task",
        value_name="value",
    )
    long["metric"] = np.where(long["task"] == "delta_blind", "delta_blind", "accuracy")
    delta_unit = "pp" if unit == "percent" else unit
    long["unit"] = np.where(long["task"] == "delta_blind", delta_unit, unit)
    long["unit"] = long["unit"].astype("string")
    order_s = canonical_order(long["strategy"], STRATEGIES)
    order_b = canonical_order(long["backbone"], BACKBONES)
    long = long.assign(
        _s=long["strategy"].map(order_s.index),
        _b=long["backbone"].map(order_b.index),
        _t=long["task"].map(SUMMARY_TASKS.index),
    ).sort_values(["_t", "_s", "_b"])
    cols = ["strategy", "backbone", "task", "metric", "value", "unit"]
    return long[cols].reset_index(drop=True)


def _scale_to(df: pd.DataFrame, target_unit: pd.Series) -> pd.Series:
    """Values of ``df`` expressed in ``target_unit`` (fraction <-> percent/pp)."""
    src = df["unit"].astype(str)
    dst = target_unit.astype(str)
    same = src == dst
    known = src.isin(list(UNIT_SCALE)) & dst.isin(list(UNIT_SCALE))
    if not (same | known).all():
        i = int(np.flatnonzero(~(same | known).to_numpy())[0])
        raise PaperTableError(f"cannot compare unit {src.iloc[i]!r} with {dst.iloc[i]!r}")
    factor = np.where(same, 1.0, dst.map(UNIT_SCALE).fillna(1.0) / src.map(UNIT_SCALE).fillna(1.0))
    return df["value"].astype(float) * factor


def compare_reported(
    recomputed: pd.DataFrame,
    reported: pd.DataFrame,
    tol: float,
    keys: Sequence[str] | None = None,
) -> pd.DataFrame:
    """List every printed number that differs from its recomputation by more than ``tol``.

    Rows are matched on ``keys`` (default: the columns both frames share except value,
    unit and n); only rows present in both are compared, and a reported NaN (a printed
    dash) is not a discrepancy. When both frames carry a ``unit`` column, recomputed values
    are converted to the reported unit (fraction x100 = percent / pp).

    Choose ``tol`` from the printed precision: e.g. Table 14 (3-decimal fractions) against
    Table 1 (integer percent) can differ by rounding alone by up to 0.5 + 0.05 = 0.55.

    Args:
        recomputed: frame with the key columns and value (+ unit).
        reported: frame with the key columns and value (+ unit), e.g. ``load_table(1)``.
        tol: largest difference (in the reported unit) still attributed to rounding.
        keys: matching columns (default as above).

    Returns:
        One row per discrepancy, largest first: key columns, recomputed, reported,
        diff (reported - recomputed), abs_diff, and unit when known.
    """
    if not np.isfinite(tol) or tol < 0:
        raise PaperTableError(f"tol must be a finite number >= 0, got {tol!r}")
    _require(recomputed, ("value",), "recomputed")
    _require(reported, ("value",), "reported")
    if keys is None:
        skip = {"value", "unit", "n"}
        keys = [c for c in reported.columns if c in recomputed.columns and c not in skip]
    keys = list(keys)
    if not keys:
        raise PaperTableError("no common key columns to match recomputed and reported rows")
    _require(recomputed, keys, "recomputed")
    _require(reported, keys, "reported")
    has_unit = "unit" in recomputed.columns and "unit" in reported.columns
    left = recomputed[keys + ["value"] + (["unit"] if has_unit else [])]
    right = reported[keys + ["value"] + (["unit"] if has_unit else [])]
    for what, frame in (("recomputed", left), ("reported", right)):
        dup = frame.duplicated(keys, keep=False)
        if dup.any():
            row = frame[dup].iloc[0]
            key = {k: row[k] for k in keys}
            raise PaperTableError(f"{what} has more than one row for {key}; pass keys=")
    norm = {k: str for k in keys}
    merged = left.astype(norm).merge(right.astype(norm), on=keys, suffixes=("_rec", "_rep"))
    if merged.empty:
        raise PaperTableError(f"recomputed and reported share no rows on keys {keys}")
    if has_unit:
        rec = _scale_to(
            merged.rename(columns={"value_rec": "value", "unit_rec": "unit"}), merged["unit_rep"]
        )
    else:
        rec = merged["value_rec"].astype(float)
    rep = pd.to_numeric(merged["value_rep"], errors="coerce")
    out = merged[keys].copy()
    out["recomputed"] = rec.to_numpy()
    out["reported"] = rep.to_numpy()
    out["diff"] = out["reported"] - out["recomputed"]
    out["abs_diff"] = out["diff"].abs()
    if has_unit:
        out["unit"] = merged["unit_rep"].astype("string").to_numpy()
    # Slack for binary floating point: 0.55 - 0.5 must not count as a discrepancy.
    flagged = out["reported"].notna() & (out["abs_diff"] > tol + 1e-9)
    out = out[flagged].sort_values(["abs_diff"] + keys, ascending=[False] + [True] * len(keys))
    return out.reset_index(drop=True)
