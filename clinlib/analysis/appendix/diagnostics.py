"""Pipeline-quality and robustness diagnostics D1–D8 (paper Appendices E–F, Figs 17–24).

- D1 :func:`empty_rate` — empty responses per cell (a call that succeeded with no text; an
  API error is counted apart, in ``n_error``);
- D2 :func:`clinlib.analysis.metrics.parse_failure_rate` (re-exported by the package);
- D3 :func:`output_lengths` — recorded output tokens per task with the task's max_tokens;
- D4 :func:`truncation_rate` — share of responses whose ``finish_reason`` is ``length``;
- D5 :func:`patient_accuracy` — per-patient mean accuracy per cell;
- D6 / D7 :func:`stratum_accuracy` — full-context accuracy per disease / per tertile;
- D8 :func:`ci_widths` — bootstrap 95% CI width per (task, strategy, backbone) cell
  (100 resamples, seed 20260519, the paper's), beside the Wilson width.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from clinlib.analysis import metrics, stats
from clinlib.analysis.figures import FULL
from clinlib.analysis.metrics.common import (
    CELL,
    MetricsInputError,
    group_counts,
    num_col,
    require,
)
from clinlib.tasks.answers.formats import MAX_TOKENS

TRUNCATED = "length"  # the OpenAI-style finish_reason of a reply cut at max_tokens
BOOT_N = stats.PAPER_N_BOOT  # Appendix F.4: "100 resamples per cell, seed 20260519"
BOOT_SEED = stats.PAPER_BOOT_SEED
LENGTH_BIN = 4  # output-token histogram bin width (D3)


def empty_flags(preds: pd.DataFrame) -> pd.Series:
    """Per row: an empty response (a call that succeeded with no text).

    ``empty`` is the harness flag; rows without it (or with it NA) count as empty when
    ``response`` is blank and ``error`` is null.
    """
    require(preds, ["response", "error"], "empty_flags")
    err = preds["error"].notna()
    blank = preds["response"].isna() | (preds["response"].astype(str).str.strip() == "")
    derived = blank & ~err
    if "empty" not in preds.columns:
        return derived.rename("empty")
    flag = preds["empty"].astype("boolean")
    return flag.fillna(derived).astype(bool).rename("empty")


def empty_rate(preds: pd.DataFrame, cell: Sequence[str] = CELL) -> pd.DataFrame:
    """D1 (Fig. 17): empty responses per cell.

    See :func:`empty_flags`.

    Returns:
        ``cell`` + n, n_empty, n_error, empty_rate, error_rate.
    """
    cell = list(cell)
    require(preds, cell, "empty_rate")
    empty = empty_flags(preds)
    err = preds["error"].notna()
    flags = preds[cell].assign(
        n=1, n_empty=empty.astype(int).to_numpy(), n_error=err.astype(int).to_numpy()
    )
    out = group_counts(flags, cell)
    out["empty_rate"] = out["n_empty"] / out["n"]
    out["error_rate"] = out["n_error"] / out["n"]
    return out


def output_lengths(preds: pd.DataFrame, bin_width: int = LENGTH_BIN) -> pd.DataFrame:
    """D3 (Fig. 19): histogram of recorded output tokens per (task, backbone).

    Rows with an API error carry no output and are left out.

    Returns:
        task, backbone, bin_start, bin_end, n, max_tokens (the task's cap).
    """
    require(preds, ["task", "backbone", "output_tokens", "error"], "output_lengths")
    if bin_width < 1:
        raise MetricsInputError(f"output_lengths: bin_width must be >= 1, got {bin_width}")
    rows = preds[preds["error"].isna()]
    tokens = num_col(rows, "output_tokens", "output_lengths")
    start = (tokens // bin_width * bin_width).astype(int)
    out = (
        rows[["task", "backbone"]]
        .assign(bin_start=start.to_numpy())
        .groupby(["task", "backbone", "bin_start"], sort=True)
        .size()
        .rename("n")
        .reset_index()
    )
    out["bin_end"] = out["bin_start"] + bin_width
    out["max_tokens"] = out["task"].map(MAX_TOKENS)
    return out


def truncation_rate(preds: pd.DataFrame, by: Sequence[str] = ("task", "backbone")) -> pd.DataFrame:
    """D4 (Fig. 20): share of answered rows with ``finish_reason == "length"``, and the share
    at the ceiling (output tokens >= max_tokens - 1, the paper's "ceiling minus one").

    Returns:
        ``by`` + n, n_truncated, truncation_rate, n_at_cap, at_cap_rate, max_tokens.
    """
    by = list(by)
    require(preds, [*by, "task", "finish_reason", "output_tokens", "error"], "truncation_rate")
    rows = preds[preds["error"].isna()]
    if rows.empty:
        raise MetricsInputError("truncation_rate: no answered rows")
    cap = rows["task"].map(MAX_TOKENS)
    if cap.isna().any():
        raise MetricsInputError(
            f"truncation_rate: no max_tokens for task {rows.loc[cap.isna(), 'task'].iloc[0]!r}"
        )
    tokens = num_col(rows, "output_tokens", "truncation_rate")
    flags = rows[by].assign(
        n=1,
        # an outside row records no finish reason (NA): not counted as truncated
        n_truncated=(rows["finish_reason"] == TRUNCATED).fillna(False).astype(int).to_numpy(),
        n_at_cap=(tokens >= cap - 1).astype(int).to_numpy(),
    )
    out = group_counts(flags, by)
    out["truncation_rate"] = out["n_truncated"] / out["n"]
    out["at_cap_rate"] = out["n_at_cap"] / out["n"]
    if "task" in by:
        out["max_tokens"] = out["task"].map(MAX_TOKENS)
    return out


def patient_accuracy(
    preds: pd.DataFrame, questions: pd.DataFrame | None = None, cell: Sequence[str] = CELL
) -> pd.DataFrame:
    """D5 (Fig. 21): per-patient mean accuracy per cell (a T6 question counts for both its
    patients; :func:`clinlib.analysis.metrics.by_group` with ``"patient"``)."""
    return metrics.by_group(preds, "patient", cell=cell, questions=questions)


def patient_spread(per_patient: pd.DataFrame, cell: Sequence[str] = CELL) -> pd.DataFrame:
    """D5's summary: per cell the patients' median, IQR and standard deviation of accuracy."""
    require(per_patient, [*cell, "accuracy"], "patient_spread")
    g = per_patient.groupby(list(cell), sort=True)["accuracy"]
    out = g.agg(n_patients="size", median="median", sd="std").reset_index()
    q = g.quantile([0.25, 0.75]).unstack()
    out["iqr"] = (q[0.75] - q[0.25]).to_numpy()
    return out


def stratum_accuracy(
    preds: pd.DataFrame,
    group: str,
    questions: pd.DataFrame | None = None,
    strategy: str | None = FULL,
    by_task: bool = False,
) -> pd.DataFrame:
    """D6 (Fig. 22, ``group="disease"``) / D7 (Fig. 23, ``group="tertile"``): accuracy of
    one strategy per (backbone[, task], stratum), post setting, T1–T9 pooled unless
    ``by_task``."""
    rows = preds[preds["setting"] == "post"] if "setting" in preds.columns else preds
    if strategy is not None:
        rows = rows[rows["strategy"] == strategy]
    if rows.empty:
        raise MetricsInputError(f"stratum_accuracy: no post predictions of {strategy!r}")
    cell = ("strategy", "backbone", "task") if by_task else ("strategy", "backbone")
    return metrics.by_group(rows, group, cell=cell, questions=questions)


def ci_widths(
    preds: pd.DataFrame,
    by: Sequence[str] = ("task", "strategy", "backbone"),
    n_boot: int = BOOT_N,
    seed: int = BOOT_SEED,
) -> pd.DataFrame:
    """D8 (Fig. 24): percentile-bootstrap 95% CI width per cell beside the Wilson width.

    Returns:
        ``by`` + n, accuracy, boot_width, wilson_width.
    """
    acc = metrics.accuracy_table(preds, by=by, n_boot=n_boot, seed=seed)
    acc["boot_width"] = acc["boot_high"] - acc["boot_low"]
    acc["wilson_width"] = acc["ci_high"] - acc["ci_low"]
    return acc[[*by, "n", "accuracy", "boot_width", "wilson_width"]]


def width_vs_n(widths: pd.DataFrame) -> float:
    """D8's headline: Spearman correlation of bootstrap CI width with 1/sqrt(n) over cells
    (the paper: width "is dominated by per-cell sample size")."""
    require(widths, ["n", "boot_width"], "width_vs_n")
    x = 1.0 / np.sqrt(widths["n"].to_numpy(float))
    return float(
        pd.Series(x).corr(pd.Series(widths["boot_width"].to_numpy(float)), method="spearman")
    )
