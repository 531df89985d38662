"""The cost–accuracy Pareto frontier of notebook 10 (paper §5.6, Table 4, Fig. 6): estimated
cost per cell beside pooled accuracy, and the frontier chart.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from clinlib.analysis import metrics
from clinlib.analysis.frame_checks import AnalysisInputError, in_order, need_columns
from clinlib.analysis.paper import STRATEGIES as PAPER_STRATEGIES


def estimated_cells(estimate: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Priced cells: estimated cost per (strategy, backbone) x an accuracy per strategy.

    The accuracy comes from one offline reader (it stands in for every priced backbone, so a
    strategy's four cells share one accuracy and differ only in price); the cost is
    :func:`clinlib.eval.harness.runner.estimate`'s ``cost_usd_typical`` summed over settings.

    Args:
        estimate: runner.estimate output (strategy, backbone, questions, input_tokens,
            output_tokens_typical, cost_usd_typical).
        summary: one row per strategy with ``pooled`` (and ``macro``) accuracy.

    Returns:
        strategy, backbone, questions, input_tokens, output_tokens, cost_usd,
        cost_per_question, pooled, macro (if given), pareto.
    """
    need = [
        "strategy",
        "backbone",
        "questions",
        "input_tokens",
        "output_tokens_typical",
        "cost_usd_typical",
    ]
    need_columns(estimate, need, "estimated_cells")
    need_columns(summary, ["strategy", "pooled"], "estimated_cells")
    if summary["strategy"].duplicated().any():
        raise AnalysisInputError("estimated_cells: summary must have one row per strategy")
    cost = (
        estimate.groupby(["strategy", "backbone"], sort=False)
        .agg(
            questions=("questions", "sum"),
            input_tokens=("input_tokens", "sum"),
            output_tokens=("output_tokens_typical", "sum"),
            cost_usd=("cost_usd_typical", "sum"),
        )
        .reset_index()
    )
    acc_cols = [c for c in ("pooled", "macro") if c in summary.columns]
    out = cost.merge(summary[["strategy", *acc_cols]], on="strategy", how="left")
    if out["pooled"].isna().any():
        miss = out.loc[out["pooled"].isna(), "strategy"].iloc[0]
        raise AnalysisInputError(f"estimated_cells: no accuracy for strategy {miss!r}")
    out["cost_per_question"] = out["cost_usd"] / out["questions"]
    out["pareto"] = metrics.pareto_frontier(out, cost="cost_usd", acc="pooled").to_numpy()
    cols = [
        "strategy",
        "backbone",
        "questions",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "cost_per_question",
        *acc_cols,
        "pareto",
    ]
    return out[cols]


def pareto_chart(
    cells: pd.DataFrame, cost: str = "cost_usd", acc: str = "pooled", title: str = ""
) -> alt.LayerChart:
    """Cost (log x) vs accuracy, one point per cell, the frontier as a step line.

    Args:
        cells: one row per (strategy, backbone) with ``cost``, ``acc`` and boolean ``pareto``.
        cost, acc: column names.
        title: chart title.
    """
    need_columns(cells, ["strategy", "backbone", cost, acc, "pareto"], "pareto_chart")
    df = cells.assign(_cost=pd.to_numeric(cells[cost]).clip(lower=1e-6))
    x = alt.X("_cost:Q", scale=alt.Scale(type="log"), title=f"{cost} (log)")
    y = alt.Y(f"{acc}:Q", scale=alt.Scale(domain=[0, 1]), title=f"{acc} accuracy")
    points = (
        alt.Chart(df)
        .mark_point(filled=True, size=70)
        .encode(
            x=x,
            y=y,
            color=alt.Color("strategy:N", sort=in_order(df["strategy"], PAPER_STRATEGIES)),
            shape="backbone:N",
            opacity=alt.condition(alt.datum.pareto, alt.value(1), alt.value(0.35)),
            tooltip=[
                "strategy",
                "backbone",
                alt.Tooltip(f"{cost}:Q", format=".4f"),
                alt.Tooltip(f"{acc}:Q", format=".3f"),
                "pareto",
            ],
        )
    )
    front = df[df["pareto"]].sort_values("_cost")
    line = alt.Chart(front).mark_line(interpolate="step-after", color="black").encode(x=x, y=y)
    return (line + points).properties(width=420, height=260, title=title)
