"""Cost, tokens and cache hits per cell (Table 4, §4, Appendix D) and the cost-accuracy
Pareto frontier (Fig. 6, §5.6).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from clinlib.analysis.metrics.common import CELL, MetricsInputError, example_id, num_col, require

PRED_COST_COLUMNS: tuple[str, ...] = (
    "cost_usd",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "latency_s",
)


def cost_table(
    preds: pd.DataFrame, cell: Sequence[str] = CELL, with_total: bool = False
) -> pd.DataFrame:
    """Cost, tokens and cache-hit rate per cell (Table 4, §4, Appendix D).

    ``cache_hit_rate`` is cached_tokens / input_tokens summed over the cell (input tokens
    include the cached ones, OpenAI's convention), so a total is a ratio of sums — the
    paper's 17.1% — not a mean of per-cell rates. A missing ``cost_usd`` (unknown price)
    makes the cell's cost NaN rather than silently low.

    Args:
        preds: predictions with cost_usd, input_tokens, output_tokens, cached_tokens,
            latency_s.
        cell: grouping columns.
        with_total: append a row whose ``cell`` columns read "total".

    Returns:
        ``cell`` + n, cost_usd, cost_per_question (cost / n), input_tokens, output_tokens,
        cached_tokens, cache_hit_rate, mean_latency_s.
    """
    cell = list(cell)
    require(preds, [*cell, *PRED_COST_COLUMNS], "cost_table")
    num = pd.DataFrame(
        {
            c: num_col(preds, c, "cost_table", allow_nan=(c == "cost_usd"))
            for c in PRED_COST_COLUMNS
        },
        index=preds.index,
    )
    over = num["cached_tokens"] > num["input_tokens"]
    if over.any():
        raise MetricsInputError(
            "cost_table: cached_tokens exceeds input_tokens"
            f"{example_id(preds, over)}; input_tokens must include cached tokens"
        )
    frame = pd.concat([preds[cell], num], axis=1)
    frame["n"] = 1
    agg = {
        "n": ("n", "sum"),
        "cost_usd": ("cost_usd", lambda s: s.sum(min_count=len(s))),
        "input_tokens": ("input_tokens", "sum"),
        "output_tokens": ("output_tokens", "sum"),
        "cached_tokens": ("cached_tokens", "sum"),
        "latency_sum": ("latency_s", "sum"),
    }
    out = frame.groupby(cell, sort=True, dropna=False).agg(**agg).reset_index()
    if with_total:
        total = {c: "total" for c in cell}
        total.update({k: out[k].sum(min_count=len(out)) for k in agg})
        out = pd.concat([out, pd.DataFrame([total])], ignore_index=True)
    out["cost_per_question"] = out["cost_usd"] / out["n"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["cache_hit_rate"] = np.where(
            out["input_tokens"] > 0, out["cached_tokens"] / out["input_tokens"], np.nan
        )
    out["mean_latency_s"] = out["latency_sum"] / out["n"]
    cols = ["n", "cost_usd", "cost_per_question", "input_tokens", "output_tokens"]
    return out[[*cell, *cols, "cached_tokens", "cache_hit_rate", "mean_latency_s"]]


def pareto_frontier(df: pd.DataFrame, cost: str = "cost_usd", acc: str = "pooled") -> pd.Series:
    """Non-dominated cells in (cost, accuracy) space (Fig. 6, §5.6: 11 of 32 cells).

    A cell is dominated when another costs no more and is at least as accurate, and is
    strictly better on one of the two. Ties: cells with identical cost and accuracy do not
    dominate each other (both stay on the frontier); at equal cost only the most accurate
    survive, at equal accuracy only the cheapest.

    Args:
        df: one row per cell.
        cost, acc: column names.

    Returns:
        Boolean Series named "pareto", aligned with ``df.index``.
    """
    require(df, [cost, acc], "pareto_frontier")
    c = pd.to_numeric(df[cost], errors="coerce").to_numpy(float)
    a = pd.to_numeric(df[acc], errors="coerce").to_numpy(float)
    if np.isnan(c).any() or np.isnan(a).any():
        raise MetricsInputError(f"pareto_frontier: {cost!r} and {acc!r} must be numeric, no NaN")
    on = np.zeros(c.size, dtype=bool)
    best_cheaper = -np.inf  # best accuracy among strictly cheaper cells
    for value in np.unique(c):  # ascending cost
        at = c == value
        top = a[at].max()
        on[at] = (a[at] == top) & (top > best_cheaper)
        best_cheaper = max(best_cheaper, top)
    return pd.Series(on, index=df.index, name="pareto")
