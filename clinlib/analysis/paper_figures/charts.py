"""The paper's figures redrawn from its published tables (Altair): Table 1 (§3/§5.1) as a
heatmap, Table 2 (§5.1) lifts, Fig. 3 (§5.2) bottleneck bars, Fig. 4 (§5.4) T9 abstention as
far as Tables 8 and 14 support it, Fig. 6 (§5.6) cost vs accuracy with its Pareto frontier,
the §5.3 blind-to-full gaps and Table 1's Pool. row minus its recomputation.

Every chart takes a frame built by :mod:`.cells`; none computes a number itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from clinlib.analysis import metrics
from clinlib.analysis.paper import BACKBONES, STRATEGIES, TASKS
from clinlib.analysis.paper_figures.cells import (
    FAMILIES,
    HK,
    SN,
    SP2_VERSIONS,
    T9_OUTCOMES,
    PaperFiguresError,
)

# Table 1 caption: blue heat bins (<30, 30–45, 45–60, 60–70, >=70 %).
ACCURACY_BINS: tuple[float, ...] = (0.30, 0.45, 0.60, 0.70)
ACCURACY_COLOURS: tuple[str, ...] = ("#eff3ff", "#bdd7e7", "#6baed6", "#3182bd", "#08519c")
# Table 2 caption: lift bins (<=-5, -5 to 0, 0-5, 5-15, 15-30, 30-60, >=60 pp). Printed lifts
# are integers, so the first edge sits at -4.5 to put -5 itself in the "<= -5" bin.
LIFT_BINS: tuple[float, ...] = (-4.5, 0.0, 5.0, 15.0, 30.0, 60.0)
LIFT_COLOURS: tuple[str, ...] = (
    "#d6604d",
    "#f4a582",
    "#f7fbff",
    "#c6dbef",
    "#6baed6",
    "#2171b5",
    "#08306b",
)


def heatmap_chart(cube: pd.DataFrame) -> alt.FacetChart:
    """Table 1 as a heatmap: task x strategy per backbone panel, Table 1's blue bins.

    Args:
        cube: output of :func:`accuracy_cube` (288 rows for the paper).
    """
    df = cube.assign(label=(100 * cube["accuracy"]).round().astype(int).astype(str))
    base = alt.Chart().encode(
        x=alt.X("task:N", sort=list(TASKS), title=None, axis=alt.Axis(orient="top")),
        y=alt.Y("strategy:N", sort=list(STRATEGIES), title=None),
    )
    colour = alt.Color(
        "accuracy:Q",
        title="accuracy",
        scale=alt.Scale(type="threshold", domain=list(ACCURACY_BINS), range=ACCURACY_COLOURS),
        legend=alt.Legend(format=".0%"),
    )
    rect = base.mark_rect().encode(
        color=colour,
        tooltip=["strategy", "backbone", "task", alt.Tooltip("accuracy:Q", format=".3f"), "n"],
    )
    text = base.mark_text(fontSize=9).encode(
        text="label:N",
        color=alt.condition(
            alt.datum.accuracy >= ACCURACY_BINS[-2], alt.value("white"), alt.value("black")
        ),
    )
    return (
        alt.layer(rect, text, data=df)
        .properties(width=200, height=170)
        .facet(column=alt.Column("backbone:N", sort=list(BACKBONES), title=None))
        .properties(title="Table 1: accuracy (%) per strategy × backbone × task (Table 14 cells)")
    )


def lift_chart(lift: pd.DataFrame, values: str = "printed_pp") -> alt.FacetChart:
    """Table 2 as a diverging heatmap: task x backbone, one row per regime.

    Args:
        lift: output of :func:`lift_table` (120 rows for the paper).
        values: "printed_pp" (Table 2) or "recomputed_pp" (from Table 14).
    """
    if values not in ("printed_pp", "recomputed_pp"):
        raise PaperFiguresError(
            f"lift_chart: values must be printed_pp or recomputed_pp, got {values!r}"
        )
    df = lift.assign(
        lift_pp=lift[values],
        # Table 2 prints signed integers and an unsigned 0.
        label=lift[values].map(
            lambda v: "" if pd.isna(v) else ("0" if round(v) == 0 else f"{v:+.0f}")
        ),
    )
    base = alt.Chart().encode(
        x=alt.X("task:N", sort=[*TASKS, "macro"], title=None, axis=alt.Axis(orient="top")),
        y=alt.Y("backbone:N", sort=list(BACKBONES), title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "lift_pp:Q",
            title="lift (pp)",
            scale=alt.Scale(type="threshold", domain=list(LIFT_BINS), range=LIFT_COLOURS),
        ),
        tooltip=[
            "regime",
            "backbone",
            "task",
            "printed_pp",
            alt.Tooltip("recomputed_pp:Q", format=".1f"),
        ],
    )
    text = base.mark_text(fontSize=9).encode(
        text="label:N",
        color=alt.condition(alt.datum.lift_pp >= 30, alt.value("white"), alt.value("black")),
    )
    source = "Table 2" if values == "printed_pp" else "recomputed from Table 14"
    return (
        alt.layer(rect, text, data=df)
        .properties(width=300, height=90)
        .facet(row=alt.Row("regime:N", sort=list(metrics.TABLE2_REGIMES), title=None))
        .properties(title=f"Context lift over same-backbone blind (pp, {source})")
    )


def _bar_panel(cube: pd.DataFrame, task: str, reference: float | None) -> alt.LayerChart:
    sub = cube[cube["task"] == task]
    if sub.empty:
        raise PaperFiguresError(f"bottleneck_bars_chart: no {task} cells in the cube")
    bars = (
        alt.Chart(sub)
        .mark_bar()
        .encode(
            x=alt.X("strategy:N", sort=list(STRATEGIES), title=None, axis=alt.Axis(labelAngle=-40)),
            xOffset=alt.XOffset("backbone:N", sort=list(BACKBONES)),
            y=alt.Y("accuracy:Q", title=f"{task} accuracy", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("backbone:N", sort=list(BACKBONES)),
            tooltip=["strategy", "backbone", alt.Tooltip("accuracy:Q", format=".3f")],
        )
    )
    layers = [bars]
    if reference is not None:
        rule = alt.Chart(pd.DataFrame({"ref": [reference]})).mark_rule(strokeDash=[2, 2])
        layers.append(rule.encode(y="ref:Q"))
    n = int(sub["n"].iloc[0]) if "n" in sub and sub["n"].notna().all() else None
    title = f"{task} ({n} q/cell)" if n else task
    return alt.layer(*layers).properties(width=330, height=190, title=title)


def bottleneck_bars_chart(
    cube: pd.DataFrame,
    tasks: Sequence[str] = ("T2", "T6"),
    references: Mapping[str, float] | None = None,
) -> alt.HConcatChart:
    """Fig. 3: accuracy on the T2 / T6 bottlenecks by strategy (x) and backbone (colour).

    Args:
        cube: output of :func:`accuracy_cube`.
        tasks: one panel per task.
        references: task -> dotted reference line (Fig. 3: 0.5 on T6 only).
    """
    refs = {"T6": 0.5} if references is None else dict(references)
    panels = [_bar_panel(cube, t, refs.get(t)) for t in tasks]
    return alt.hconcat(*panels).properties(title="Fig. 3: aggregation bottlenecks (Table 14)")


def t9_chart(breakdown: pd.DataFrame, cube: pd.DataFrame) -> alt.HConcatChart:
    """Fig. 4 from the tables: pooled T9 outcomes per strategy (Table 8) next to the per-cell
    strict abstention (Table 14).

    Args:
        breakdown: output of :func:`t9_breakdown`.
        cube: output of :func:`accuracy_cube`.
    """
    colours = alt.Scale(domain=list(T9_OUTCOMES), range=["#009E73", "#8fd6bd", "#D55E00"])
    stacked = (
        alt.Chart(breakdown)
        .mark_bar()
        .encode(
            y=alt.Y("strategy:N", sort=list(STRATEGIES), title=None),
            x=alt.X(
                "share:Q",
                stack="zero",
                title="share of T9 (pooled over backbones)",
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("outcome:N", sort=list(T9_OUTCOMES), scale=colours, title="T9 outcome"),
            order=alt.Order("order:Q"),
            tooltip=["strategy", "outcome", alt.Tooltip("share:Q", format=".3f")],
        )
        .properties(width=300, height=200, title="Table 8: strict / lenient-rescued / rest")
    )
    cells = cube[cube["task"] == "T9"]
    dots = (
        alt.Chart(cells)
        .mark_point(filled=True, size=60)
        .encode(
            y=alt.Y("strategy:N", sort=list(STRATEGIES), title=None),
            x=alt.X(
                "accuracy:Q", title="strict abstention per cell", scale=alt.Scale(domain=[0, 1])
            ),
            color=alt.Color("backbone:N", sort=list(BACKBONES)),
            tooltip=["strategy", "backbone", alt.Tooltip("accuracy:Q", format=".3f")],
        )
        .properties(width=260, height=200, title="Table 14: T9 per cell")
    )
    return (
        alt.hconcat(stacked, dots)
        .resolve_scale(color="independent", shape="independent")
        .properties(title="Fig. 4 (tables only): T9 abstention")
    )


def pareto_chart(summary: pd.DataFrame, version: str = "reported") -> alt.LayerChart:
    """Fig. 6: cost (log) vs pooled accuracy for every cell, dashed Pareto frontier.

    Args:
        summary: output of :func:`cell_summary`.
        version: "reported" (Table 1 Pool., the paper's figure) or "recomputed" (Table 14).
    """
    if version not in ("reported", "recomputed"):
        raise PaperFiguresError(
            f"pareto_chart: version must be reported or recomputed, got {version!r}"
        )
    acc, on = f"{version}_pooled", f"pareto_{version}"
    df = summary.assign(pooled=summary[acc], frontier=summary[on])
    # A data-tight log axis; a "nice" one would run to the next power of ten.
    lo, hi = float(df["cost_usd"].min()), float(df["cost_usd"].max())
    x = alt.X(
        "cost_usd:Q",
        scale=alt.Scale(type="log", domain=[lo / 1.5, hi * 1.5], nice=False),
        title="cost per 6,271-question cell (USD, log scale)",
    )
    y = alt.Y("pooled:Q", title="pooled accuracy", scale=alt.Scale(zero=False))
    points = (
        alt.Chart(df)
        .mark_point(filled=True, size=80, opacity=0.9)
        .encode(
            x=x,
            y=y,
            color=alt.Color("family:N", sort=list(FAMILIES), title="strategy family"),
            shape=alt.Shape("backbone:N", sort=list(BACKBONES)),
            tooltip=[
                "strategy",
                "backbone",
                alt.Tooltip("cost_usd:Q", format="$.2f"),
                alt.Tooltip("pooled:Q", format=".3f"),
                "frontier",
            ],
        )
    )
    on_frontier = alt.Chart(df[df["frontier"]])
    line = on_frontier.mark_line(strokeDash=[6, 4], color="black", strokeWidth=1).encode(
        x=x, y=y, order="cost_usd:Q"
    )
    rings = on_frontier.mark_point(size=220, color="black", strokeWidth=0.8).encode(x=x, y=y)
    key = df[(df["strategy"] == "full-context") & df["backbone"].isin([HK, SN])]
    labels = (
        alt.Chart(key.assign(tag=key["backbone"].map({HK: "full × Haiku", SN: "full × Sonnet"})))
        # Up and to the left: the space right of the dearest cells belongs to the legend.
        .mark_text(dx=-8, dy=-10, align="right", fontSize=10)
        .encode(x=x, y=y, text="tag:N")
    )
    n_on = int(df["frontier"].sum())
    source = "Table 1 Pool." if version == "reported" else "recomputed from Table 14"
    return alt.layer(line, rings, points, labels).properties(
        width=380,
        height=260,
        title=f"Fig. 6: cost vs pooled accuracy ({source}); frontier {n_on}/{len(df)}",
    )


def sp2_chart(sp2: pd.DataFrame) -> alt.LayerChart:
    """§5.3 blind-to-full gap per backbone, one bar per version (text / Table 1 / Table 14).

    Args:
        sp2: output of :func:`sp2_gaps`.
    """
    base = alt.Chart(sp2).encode(
        y=alt.Y("backbone:N", sort=list(BACKBONES), title=None),
        yOffset=alt.YOffset("version:N", sort=list(SP2_VERSIONS)),
        x=alt.X("gap_pp:Q", title="full-context minus blind, pooled (pp)"),
    )
    bars = base.mark_bar().encode(
        color=alt.Color("version:N", sort=list(SP2_VERSIONS), title="source"),
        tooltip=[
            "backbone",
            "version",
            alt.Tooltip("blind:Q", format=".3f"),
            alt.Tooltip("full:Q", format=".3f"),
            alt.Tooltip("gap_pp:Q", format=".1f"),
        ],
    )
    text = base.mark_text(align="left", dx=3, fontSize=9).encode(
        text=alt.Text("gap_pp:Q", format=".1f")
    )
    return alt.layer(bars, text).properties(
        width=300, height=220, title="§5.3 SP2: blind-to-full gap per backbone"
    )


def pool_diff_chart(summary: pd.DataFrame) -> alt.LayerChart:
    """Table 1's printed Pool. row minus its recomputation from Table 14, per cell (pp).

    Args:
        summary: output of :func:`cell_summary`.
    """
    df = summary.assign(label=summary["pooled_diff_pp"].map(lambda v: f"{v:+.1f}"))
    lim = max(1.0, float(np.ceil(df["pooled_diff_pp"].abs().max())))
    base = alt.Chart(df).encode(
        x=alt.X("backbone:N", sort=list(BACKBONES), title=None, axis=alt.Axis(orient="top")),
        y=alt.Y("strategy:N", sort=list(STRATEGIES), title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "pooled_diff_pp:Q",
            title="printed - recomputed (pp)",
            scale=alt.Scale(scheme="redblue", domain=[-lim, lim], domainMid=0),
        ),
        tooltip=[
            "strategy",
            "backbone",
            alt.Tooltip("reported_pooled:Q", format=".2f"),
            alt.Tooltip("recomputed_pooled:Q", format=".4f"),
            alt.Tooltip("pooled_diff_pp:Q", format=".2f"),
        ],
    )
    text = base.mark_text(fontSize=10).encode(
        text="label:N",
        color=alt.condition(
            f"abs(datum.pooled_diff_pp) > {0.6 * lim}", alt.value("white"), alt.value("black")
        ),
    )
    return alt.layer(rect, text).properties(
        width=260, height=220, title="Table 1 Pool. minus Σ n·acc / 6,271 from Table 14 (pp)"
    )


def compose(rows: Sequence[Sequence[alt.TopLevelMixin]], title: str = "") -> alt.VConcatChart:
    """Stack rows of charts into one figure; every panel keeps its own colour/shape scales.

    Args:
        rows: each a sequence of charts placed side by side.
        title: overall title.
    """
    if not rows or any(not r for r in rows):
        raise PaperFiguresError("compose: give at least one non-empty row of charts")
    lines = []
    for r in rows:
        line = r[0] if len(r) == 1 else alt.hconcat(*r)
        if len(r) > 1:
            line = line.resolve_scale(color="independent", shape="independent")
        lines.append(line)
    out = alt.vconcat(*lines).resolve_scale(color="independent", shape="independent")
    return out.properties(title=title) if title else out
