"""Altair charts of the appendix diagnostics (paper Appendices B–G; notebook 16).

Three shapes cover them: :func:`bars` (a value per category, optional Wilson CI, colour,
column facets), :func:`heat` (a value per x x y cell, labelled) and a few one-off charts
(:func:`scatter_r`, :func:`length_histogram`, :func:`patient_strip`, :func:`pareto_views_chart`).
Each takes the tidy frame its builder in :mod:`clinlib.analysis.appendix` returns.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from clinlib.analysis.paper import STRATEGIES as PAPER_STRATEGIES
from clinlib.analysis.pareto import pareto_chart
from clinlib.analysis.stats.question import PearsonResult
from clinlib.tasks.rules import T8_BINS

PANEL_W, PANEL_H = 200, 140
# Axis orders that are not alphabetical: the paper's strategies, T8's bins from L- to L+.
CANONICAL: tuple[str, ...] = (*PAPER_STRATEGIES, *T8_BINS)


def _sort(values: Sequence[object], canonical: Sequence[str] = CANONICAL) -> list:
    vals = [str(v) for v in pd.unique(pd.Series(list(values), dtype=object))]
    known = [c for c in canonical if c in vals]
    return known + sorted(v for v in vals if v not in known)


def bars(
    df: pd.DataFrame,
    x: str,
    y: str = "accuracy",
    color: str | None = None,
    column: str | None = None,
    ci: bool = True,
    title: str = "",
    y_title: str | None = None,
    domain: tuple[float, float] | None = (0.0, 1.0),
    step: int = 14,
) -> alt.TopLevelMixin:
    """Grouped bars of ``y`` per ``x`` (offset by ``color``), Wilson CIs when ``ci`` and the
    frame has ci_low / ci_high, one panel per ``column`` value."""
    scale = alt.Scale(domain=list(domain)) if domain else alt.Scale()
    enc = {
        "x": alt.X(f"{x}:N", sort=_sort(df[x]), title=None),
        "y": alt.Y(f"{y}:Q", scale=scale, title=y_title or y),
        "tooltip": [c for c in (x, color, column, y, "n") if c and c in df.columns],
    }
    if color:
        enc["color"] = alt.Color(f"{color}:N", sort=_sort(df[color]))
        enc["xOffset"] = alt.XOffset(f"{color}:N")
    layers = [alt.Chart().mark_bar().encode(**enc)]
    if ci and {"ci_low", "ci_high"} <= set(df.columns):
        err = {
            "x": enc["x"],
            "y": alt.Y("ci_low:Q", scale=scale, title=y_title or y),
            "y2": "ci_high:Q",
        }
        if color:
            err["xOffset"] = enc["xOffset"]
        layers.append(alt.Chart().mark_rule(color="black").encode(**err))
    chart = alt.layer(*layers, data=df).properties(width=alt.Step(step), height=PANEL_H)
    if column:
        chart = chart.facet(column=alt.Column(f"{column}:N", sort=_sort(df[column]), title=None))
        chart = chart.resolve_scale(x="independent")
    return chart.properties(title=title)


def heat(
    df: pd.DataFrame,
    x: str,
    y: str,
    value: str,
    column: str | None = None,
    fmt: str = ".2f",
    title: str = "",
    scheme: str = "blues",
) -> alt.TopLevelMixin:
    """A labelled heatmap of ``value`` per (x, y), one panel per ``column`` value."""
    data = df.assign(_label=df[value].map(lambda v: "" if pd.isna(v) else format(v, fmt)))
    base = alt.Chart().encode(
        x=alt.X(f"{x}:N", sort=_sort(df[x]), title=None),
        y=alt.Y(f"{y}:N", sort=_sort(df[y]), title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(f"{value}:Q", scale=alt.Scale(scheme=scheme)),
        tooltip=[x, y, alt.Tooltip(f"{value}:Q", format=fmt)],
    )
    text = base.mark_text(fontSize=9).encode(text="_label:N")
    chart = alt.layer(rect, text, data=data).properties(width=alt.Step(34), height=PANEL_H)
    if column:
        chart = chart.facet(column=alt.Column(f"{column}:N", sort=_sort(df[column]), title=None))
        chart = chart.resolve_scale(x="independent")
    return chart.properties(title=title)


def scatter_r(
    per_patient: pd.DataFrame, r: PearsonResult, x_title: str, y_title: str, title: str = ""
) -> alt.LayerChart:
    """Fig. 15D: one point per patient, a least-squares line, r and its CI in the title."""
    pts = (
        alt.Chart(per_patient)
        .mark_circle(size=40, opacity=0.7)
        .encode(
            x=alt.X("size:Q", title=x_title),
            y=alt.Y("accuracy:Q", title=y_title, scale=alt.Scale(domain=[0, 1])),
            tooltip=["subject_id", "size", "n", alt.Tooltip("accuracy:Q", format=".2f")],
        )
    )
    line = pts.transform_regression("size", "accuracy").mark_line(color="black")
    head = f"Pearson r = {r.r:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}], n = {r.n} patients"
    return (pts + line).properties(width=320, height=220, title=[title, head] if title else head)


def length_histogram(hist: pd.DataFrame, title: str = "") -> alt.TopLevelMixin:
    """D3 (Fig. 19): output-token histograms per task, coloured by backbone, the task's
    max_tokens as a red rule."""
    bars_ = (
        alt.Chart()
        .mark_bar(opacity=0.6)
        .encode(
            x=alt.X("bin_start:Q", title="output tokens", bin="binned"),
            x2="bin_end:Q",
            y=alt.Y("n:Q", stack=None, title="responses"),
            color="backbone:N",
            tooltip=["task", "backbone", "bin_start", "n", "max_tokens"],
        )
    )
    cap = alt.Chart().mark_rule(color="red", strokeDash=[4, 2]).encode(x="max_tokens:Q")
    chart = alt.layer(bars_, cap, data=hist).properties(width=160, height=110)
    return chart.facet(facet=alt.Facet("task:N", title=None), columns=5).properties(title=title)


def patient_strip(per_patient: pd.DataFrame, title: str = "") -> alt.TopLevelMixin:
    """D5 (Fig. 21): per-patient accuracy per cell as a box plot over a jittered strip."""
    x = alt.X("strategy:N", sort=_sort(per_patient["strategy"]), title=None)
    box = (
        alt.Chart()
        .mark_boxplot(extent="min-max", opacity=0.5)
        .encode(x=x, y=alt.Y("accuracy:Q", title="per-patient accuracy"))
    )
    strip = (
        alt.Chart()
        .mark_circle(size=12, color="grey", opacity=0.5)
        .encode(x=x, y="accuracy:Q", xOffset="jitter:Q", tooltip=["subject_id", "n", "accuracy"])
        .transform_calculate(jitter="random()")
    )
    chart = alt.layer(box, strip, data=per_patient).properties(width=360, height=PANEL_H)
    return chart.facet(row=alt.Row("backbone:N", title=None)).properties(title=title)


def pareto_views_chart(
    views: pd.DataFrame, acc: str = "pooled", unit: str = "USD"
) -> alt.HConcatChart:
    """The frontier per view (answer-only | answer + construction) side by side; ``unit``
    names what ``total_cost`` counts (USD, seconds)."""
    panels = [
        pareto_chart(views[views["view"] == v], cost="total_cost", acc=acc, title=f"{v} ({unit})")
        for v in pd.unique(views["view"])
    ]
    return alt.hconcat(*panels)
