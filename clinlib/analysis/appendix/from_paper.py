"""Appendix figures regenerated from the paper's printed tables alone (notebook 12).

What the tables support: Fig. 16 (cost per question and cache-hit % per cell, from Table 4;
the per-question cost is recomputed as cost / 6,271 because Table 4's "$/q" column prints four
decimals and rounds the cheap cells to 0.0000), Fig. 10B–C (the T4 score per cell, from Table
14's T4 rows) and an analytic stand-in for Fig. 24 (the Wilson 95% interval width of every Table
14 cell from its printed accuracy and n; the paper's figure is a 100-resample bootstrap, which the
tables cannot reproduce, but both widths are set by n and p). Table 13 is Table 13.
"""

from __future__ import annotations

import pandas as pd

from clinlib.analysis.metrics.common import MetricsInputError, require
from clinlib.analysis.paper import N_QUESTIONS
from clinlib.analysis.stats.question import wilson_ci


def fig16_cells(table4: pd.DataFrame, n_questions: int = N_QUESTIONS) -> pd.DataFrame:
    """Fig. 16 from Table 4: per cell cost_per_question (cost / n_questions, USD) and
    cache_hit_rate (%), long (strategy, backbone, metric, value); the total row is dropped."""
    require(table4, ["strategy", "backbone", "metric", "value"], "fig16_cells")
    cells = table4[table4["strategy"] != "total"]
    wide = cells.pivot_table(index=["strategy", "backbone"], columns="metric", values="value")
    for m in ("cost_usd", "cache_hit_rate"):
        if m not in wide.columns:
            raise MetricsInputError(f"fig16_cells: Table 4 has no {m!r} rows")
    out = pd.DataFrame(
        {
            "cost_per_question": wide["cost_usd"] / n_questions,
            "cache_hit_rate": wide["cache_hit_rate"],
        }
    ).reset_index()
    return out.melt(id_vars=["strategy", "backbone"], var_name="metric", value_name="value")


def t4_cells(table14: pd.DataFrame) -> pd.DataFrame:
    """Fig. 10B–C from Table 14: the printed T4 score per (strategy, backbone) cell."""
    require(table14, ["task", "strategy", "backbone", "value", "n"], "t4_cells")
    rows = table14[table14["task"] == "T4"]
    if rows.empty:
        raise MetricsInputError("t4_cells: Table 14 has no T4 rows")
    return rows[["strategy", "backbone", "n", "value"]].rename(columns={"value": "t4_score"})


def wilson_widths(table14: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Fig. 24's analytic stand-in: the Wilson (1 - alpha) interval width of each Table 14 cell
    from its printed accuracy and n (k = round(accuracy x n))."""
    require(table14, ["task", "strategy", "backbone", "value", "n"], "wilson_widths")
    n = table14["n"].to_numpy(int)
    k = (table14["value"].to_numpy(float) * n).round().astype(int)
    lo, hi = wilson_ci(k, n, alpha)
    out = table14[["task", "strategy", "backbone", "n"]].copy()
    out["accuracy"] = table14["value"].to_numpy(float)
    out["wilson_width"] = hi - lo
    return out.reset_index(drop=True)
