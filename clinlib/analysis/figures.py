"""Tables and charts for the analysis notebooks 07–10 over the kit's own predictions.

Paper §5.1 (SP1, the aggregation tax; Tables 1–2, Fig. 3), §5.2–5.3 (SP2, blind-to-full gap per
backbone), §5.4 (SP3, T9 abstention; Fig. 4, Tables 8–9), §5.6 (cost–accuracy Pareto frontier;
Table 4, Fig. 6), Appendix G.1 (Tables 5–6, macro-F1 on T5 / T8).

The numbers come from :mod:`clinlib.analysis.metrics` and :mod:`clinlib.analysis.stats`; this module only
reshapes them into the notebooks' tables and draws them with altair. Every builder is a pure
function of its input frames. The kit's "backbones" here are the deterministic offline readers
(``reference``: answers from the context, abstains when the fact is absent; ``eager``: never
abstains), not language models; the notebooks put the paper's LLM numbers beside them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from clinlib.analysis import metrics, stats
from clinlib.analysis.frame_checks import AnalysisInputError, in_order, need_columns
from clinlib.analysis.paper import STRATEGIES as PAPER_STRATEGIES  # light import; same names/order
from clinlib.analysis.paper import TASKS
from clinlib.analysis.pareto import estimated_cells as estimated_cells
from clinlib.analysis.pareto import pareto_chart as pareto_chart
from clinlib.analysis.stats import cluster as cluster_stats
from clinlib.analysis.stats import cluster_tables as cluster_report
from clinlib.llm.presets import OFFLINE_READER_NAMES as OFFLINE_READERS

AGGREGATION_TASKS: tuple[str, ...] = ("T2", "T6", "T8")
SKEWED_TASKS: tuple[str, ...] = ("T5", "T8")
log = logging.getLogger("clinlib.analysis")

FULL = "full-context"
BLIND = metrics.BLIND_STRATEGY
T9_LABELS: dict[str, str] = {
    "correct_abstain": "correct abstain",
    "rescued_lenient": "rescued by lenient parser",
    "parser_missed": "parser-missed (verbose abstain)",
    "over_answer": "over-answer",
    "empty": "empty response",
}
# What the patient-clustered test adds beside McNemar (cluster_report.pairwise_clustered).
CLUSTER_TEST_COLUMNS: tuple[str, ...] = (
    "n_clusters",
    "clusters_discordant",
    "diff_low",
    "diff_high",
    "p_cluster",
    "p_cluster_adj",
    "reject_cluster",
    "survives",
)
# Monotone tolerance (notebook 09): a step against the trend smaller than this is noise.
MONOTONE_TOL = 0.01
# Table 1's colour bins (<30, 30–45, 45–60, 60–70, >=70 %).
ACC_BINS: tuple[float, ...] = (0.30, 0.45, 0.60, 0.70)


def post_setting(preds: pd.DataFrame) -> pd.DataFrame:
    """The ``post`` rows: every task once (T3's ``pre`` rows are a separate probe, §5.5).

    Args:
        preds: predictions with a ``setting`` column.

    Returns:
        The rows whose setting is "post".
    """
    need_columns(preds, ["setting"], "post_setting")
    out = preds[preds["setting"] == "post"]
    if out.empty:
        raise AnalysisInputError(
            f"post_setting: no 'post' rows; settings present: {sorted(set(preds['setting']))}"
        )
    return out


# --------------------------------------------------------------------------- 07 · SP1


def accuracy_heatmap_chart(acc: pd.DataFrame, title: str = "") -> alt.FacetChart:
    """Strategy x task accuracy heatmap, one panel per reader, Wilson CI in the tooltip.

    Args:
        acc: :func:`clinlib.analysis.metrics.accuracy_table` output by (strategy, backbone, task).
        title: chart title.

    Returns:
        Faceted altair heatmap (text = accuracy in %).
    """
    need_columns(
        acc, ["strategy", "backbone", "task", "n", "accuracy", "ci_low", "ci_high"], "heatmap"
    )
    df = acc.assign(
        pct=(100 * acc["accuracy"]).round().astype(int),
        ci=[f"[{lo:.2f}, {hi:.2f}]" for lo, hi in zip(acc["ci_low"], acc["ci_high"], strict=True)],
    )
    y_order = in_order(df["strategy"], PAPER_STRATEGIES)
    base = alt.Chart(df).encode(
        x=alt.X("task:N", sort=in_order(df["task"], TASKS), title=None),
        y=alt.Y("strategy:N", sort=y_order, title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "accuracy:Q",
            scale=alt.Scale(type="threshold", domain=list(ACC_BINS), scheme="blues"),
            title="accuracy",
        ),
        tooltip=[
            "strategy",
            "backbone",
            "task",
            "n",
            alt.Tooltip("accuracy:Q", format=".3f"),
            "ci",
        ],
    )
    text = base.mark_text(fontSize=10).encode(
        text="pct:Q",
        color=alt.condition(alt.datum.accuracy >= 0.6, alt.value("white"), alt.value("black")),
    )
    return (
        alt.layer(rect, text, data=df)
        .properties(width=260, height=190)
        .facet(column=alt.Column("backbone:N", title="reader"), title=title)
    )


def lift_wide(lift: pd.DataFrame) -> pd.DataFrame:
    """Table 2 layout of :func:`clinlib.analysis.metrics.context_lift`: lift in pp, tasks as columns.

    Args:
        lift: context_lift output (regime, backbone, task, ..., lift).

    Returns:
        One row per (regime, backbone); columns T1..T9 and macro, values in pp (rounded to 1).
    """
    need_columns(lift, ["regime", "backbone", "task", "lift"], "lift_wide")
    wide = lift.pivot_table(index=["regime", "backbone"], columns="task", values="lift", sort=False)
    cols = [t for t in [*TASKS, "macro"] if t in wide.columns]
    return (100 * wide[cols]).round(1).reset_index().rename_axis(columns=None)


def paper_lift_wide(table2: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 2 (``clinlib.analysis.paper.load_table(2)``) in the same layout as :func:`lift_wide`.

    Returns:
        One row per (regime, backbone); T1..T9, macro in pp as printed.
    """
    need_columns(table2, ["strategy", "backbone", "task", "value"], "paper_lift_wide")
    wide = table2.astype({"strategy": str, "backbone": str, "task": str}).pivot_table(
        index=["strategy", "backbone"], columns="task", values="value", sort=False
    )
    cols = [t for t in [*TASKS, "macro"] if t in wide.columns]
    out = wide[cols].reset_index().rename(columns={"strategy": "regime"})
    return out.rename_axis(columns=None)


def aggregation_tax_chart(acc: pd.DataFrame, tasks: Sequence[str] = AGGREGATION_TASKS):
    """Fig. 3 analogue: accuracy with Wilson CI on the aggregation tasks, per strategy and reader.

    Args:
        acc: accuracy_table output by (strategy, backbone, task).
        tasks: the aggregation tasks (T2 trends, T6 cross-patient, T8 med-lab linkage).

    Returns:
        Altair bar + error-bar chart faceted by task.
    """
    need_columns(acc, ["strategy", "backbone", "task", "accuracy", "ci_low", "ci_high"], "agg_tax")
    df = acc[acc["task"].isin(tasks)]
    if df.empty:
        raise AnalysisInputError(f"aggregation_tax_chart: no rows for tasks {list(tasks)}")
    order = in_order(df["strategy"], PAPER_STRATEGIES)
    x = alt.X("strategy:N", sort=order, title=None, axis=alt.Axis(labelAngle=-40))
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=x,
            xOffset="backbone:N",
            y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("backbone:N", title="reader"),
            tooltip=["strategy", "backbone", "task", alt.Tooltip("accuracy:Q", format=".3f")],
        )
    )
    err = alt.Chart().mark_rule().encode(x=x, xOffset="backbone:N", y="ci_low:Q", y2="ci_high:Q")
    return (
        alt.layer(bars, err, data=df)
        .properties(width=240, height=200)
        .facet(column=alt.Column("task:N", sort=list(tasks)))
    )


def skewed_f1(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    tasks: Sequence[str] = SKEWED_TASKS,
    cell: Sequence[str] = ("strategy", "backbone"),
) -> pd.DataFrame:
    """Macro-F1 on the skewed-label tasks with the majority-class baseline (Tables 5–6).

    Args:
        preds: predictions (post setting).
        questions: questions table (for gold labels).
        tasks: skewed tasks.
        cell: grouping columns.

    Returns:
        task, ``cell``, n, accuracy, macro_f1, majority_accuracy, majority_macro_f1.
    """
    need_columns(questions, ["qid", "task", "gold"], "skewed_f1")
    frames = []
    for task in tasks:
        f1 = metrics.macro_f1(preds, task, cell=cell, questions=questions)
        gold = questions.loc[questions["task"] == task, "gold"]
        base = metrics.majority_baseline(gold.tolist())
        frames.append(
            f1.assign(
                task=task,
                majority_accuracy=base["accuracy"],
                majority_macro_f1=base["macro_f1"],
            )
        )
    out = pd.concat(frames, ignore_index=True)
    cols = ["task", *cell, "n", "accuracy", "macro_f1", "majority_accuracy", "majority_macro_f1"]
    return out[cols]


def mcnemar_vs_full(
    preds: pd.DataFrame,
    reference: str = FULL,
    backbones: Sequence[str] | None = None,
    alpha: float = 0.05,
    questions: pd.DataFrame | None = None,
    setting: str = "post",
) -> pd.DataFrame:
    """Paired McNemar tests: ``reference`` strategy vs each other strategy, per reader.

    One Holm family per reader (m = number of other strategies), as §3 corrects per
    comparison family. Only the ``setting`` rows are used (default ``post``: every task once;
    T3's ``pre`` rows are the §5.5 probe), paired on qid, so a T3 question is counted once.
    With ``questions``, the patient-clustered test sits beside McNemar
    (:func:`clinlib.analysis.stats.cluster_tables.pairwise_clustered`, questions clustered by
    :func:`clinlib.analysis.stats.cluster.question_clusters`).

    Args:
        preds: predictions.
        reference: the strategy every other is compared with.
        backbones: readers to test (default every backbone present).
        alpha: family-wise level.
        questions: questions.parquet rows (qid, subject_ids) to cluster on; None: McNemar only.
        setting: the setting compared.

    Returns:
        backbone, strategy, n, acc_reference, acc_strategy, diff (reference - strategy), b, c,
        p_value, method, p_adj, reject (+ with ``questions``: n_clusters, clusters_discordant,
        diff_low, diff_high, p_cluster, p_cluster_adj, reject_cluster, survives).
    """
    need_columns(preds, ["qid", "setting", "strategy", "backbone", "correct"], "mcnemar_vs_full")
    preds = preds[preds["setting"] == setting]
    if preds.empty:
        raise AnalysisInputError(f"mcnemar_vs_full: no {setting!r} rows")
    if questions is not None:
        preds = cluster_stats.with_clusters(preds, questions)
    frames = []
    for bb in backbones or in_order(preds["backbone"], OFFLINE_READERS):
        sub = preds[preds["backbone"] == bb]
        present = in_order(sub["strategy"], PAPER_STRATEGIES)
        if reference not in present:
            if backbones or preds["backbone"].nunique() == 1:  # named, or the only one
                raise AnalysisInputError(
                    f"mcnemar_vs_full: no {reference!r} rows for backbone {bb!r}"
                )
            log.warning("mcnemar_vs_full: backbone %s has no %r rows: not tested", bb, reference)
            continue
        asked = {n: set(g["qid"]) for n, g in sub.groupby("strategy")}
        apart = [s for s in present if s != reference and not asked[s] & asked[reference]]
        if apart:  # run on other tasks than the reference (an outside system's rows)
            log.warning(
                "mcnemar_vs_full: backbone %s: %s share(s) no question with %r: not tested",
                bb,
                ", ".join(apart),
                reference,
            )
        pairs = [(reference, s) for s in present if s != reference and s not in apart]
        if not pairs:
            continue
        test = stats.pairwise_mcnemar if questions is None else cluster_report.pairwise_clustered
        res = test(sub, cell=["strategy"], pairs=pairs, key=["qid"], alpha=alpha)
        frames.append(
            res.assign(backbone=bb).rename(
                columns={
                    "strategy_b": "strategy",
                    "acc_a": "acc_reference",
                    "acc_b": "acc_strategy",
                }
            )
        )
    if not frames:
        raise AnalysisInputError("mcnemar_vs_full: nothing to compare")
    out = pd.concat(frames, ignore_index=True)
    cols = ["backbone", "strategy", "n", "acc_reference", "acc_strategy", "diff", "b", "c"]
    cols += ["p_value", "method", "p_adj", "reject"]
    if questions is not None:
        cols += list(CLUSTER_TEST_COLUMNS)
    return out[cols]


# --------------------------------------------------------------------------- 08 · SP2


def blind_full_gap(summary: pd.DataFrame, source: str = "kit") -> pd.DataFrame:
    """Blind-to-full pooled-accuracy gap per backbone (§5.3 SP2).

    Args:
        summary: :func:`clinlib.analysis.metrics.summary_rows` output (strategy, backbone, pooled).
        source: label for the ``source`` column.

    Returns:
        source, backbone, blind, full, gap_pp (100 x (full - blind)).
    """
    need_columns(summary, ["strategy", "backbone", "pooled"], "blind_full_gap")
    wide = summary.pivot_table(index="backbone", columns="strategy", values="pooled", sort=False)
    for s in (BLIND, FULL):
        if s not in wide.columns or wide[s].isna().any():
            raise AnalysisInputError(f"blind_full_gap: summary lacks {s!r} for some backbone")
    out = pd.DataFrame(
        {
            "source": source,
            "backbone": wide.index,
            "blind": wide[BLIND].to_numpy(),
            "full": wide[FULL].to_numpy(),
        }
    )
    out["gap_pp"] = 100 * (out["full"] - out["blind"])
    return out.reset_index(drop=True)


def gap_chart(gaps: pd.DataFrame) -> alt.LayerChart:
    """Dumbbell chart: blind and full pooled accuracy per backbone, coloured by source.

    Args:
        gaps: rows like :func:`blind_full_gap` (source, backbone, blind, full, gap_pp).
    """
    need_columns(gaps, ["source", "backbone", "blind", "full", "gap_pp"], "gap_chart")
    df = gaps.assign(label=gaps["source"] + " · " + gaps["backbone"])
    long = df.melt(
        id_vars=["label", "source", "gap_pp"],
        value_vars=["blind", "full"],
        var_name="strategy",
        value_name="pooled",
    )
    y = alt.Y("label:N", sort=list(df["label"]), title=None)
    rule = (
        alt.Chart(df)
        .mark_rule(strokeWidth=3, opacity=0.5)
        .encode(
            y=y,
            x=alt.X("blind:Q", scale=alt.Scale(domain=[0, 1]), title="pooled accuracy"),
            x2="full:Q",
            color=alt.Color("source:N"),
        )
    )
    dots = (
        alt.Chart(long)
        .mark_point(filled=True, size=80)
        .encode(
            y=y,
            x="pooled:Q",
            shape=alt.Shape("strategy:N", title="cell"),
            color="source:N",
            tooltip=[
                "label",
                "strategy",
                alt.Tooltip("pooled:Q", format=".3f"),
                alt.Tooltip("gap_pp:Q", format=".1f"),
            ],
        )
    )
    return (rule + dots).properties(width=420, height=24 * len(df), title="Blind → full gap")


def strategy_profile_chart(summary: pd.DataFrame, value: str = "macro") -> alt.Chart:
    """Per-backbone profile: one line per backbone across the strategies (macro accuracy).

    Args:
        summary: summary_rows-like frame with strategy, backbone and ``value``; an optional
            ``source`` column facets kit vs paper.
        value: the accuracy column to plot.
    """
    need_columns(summary, ["strategy", "backbone", value], "strategy_profile_chart")
    order = in_order(summary["strategy"], PAPER_STRATEGIES)
    chart = (
        alt.Chart(summary)
        .mark_line(point=True)
        .encode(
            x=alt.X("strategy:N", sort=order, title=None, axis=alt.Axis(labelAngle=-40)),
            y=alt.Y(f"{value}:Q", scale=alt.Scale(domain=[0, 1]), title=f"{value} accuracy"),
            color="backbone:N",
            tooltip=["strategy", "backbone", alt.Tooltip(f"{value}:Q", format=".3f")],
        )
        .properties(width=300, height=200)
    )
    if "source" in summary.columns:
        return chart.facet(column=alt.Column("source:N", title=None)).resolve_scale(
            color="independent"
        )
    return chart


# --------------------------------------------------------------------------- 09 · SP3


def t9_long(decomp: pd.DataFrame, cell: Sequence[str] = ("strategy", "backbone")) -> pd.DataFrame:
    """:func:`clinlib.analysis.metrics.t9_decomposition` reshaped to one row per (cell, outcome).

    Returns:
        ``cell``, outcome, label, order, count, share.
    """
    cell = list(cell)
    rate_cols = [f"{c}_rate" for c in metrics.T9_CATEGORIES]
    need_columns(decomp, [*cell, "n", *metrics.T9_CATEGORIES, *rate_cols], "t9_long")
    rows = []
    for i, cat in enumerate(metrics.T9_CATEGORIES):
        part = decomp[cell].copy()
        part["outcome"] = cat
        part["label"] = T9_LABELS[cat]
        part["order"] = i
        part["count"] = decomp[cat].to_numpy()
        part["share"] = decomp[f"{cat}_rate"].to_numpy()
        rows.append(part)
    return pd.concat(rows, ignore_index=True)


def t9_chart(long: pd.DataFrame, facet: str = "backbone") -> alt.FacetChart:
    """Fig. 4 analogue: stacked T9 outcome shares per strategy, one panel per ``facet`` value.

    Args:
        long: :func:`t9_long` output.
        facet: column to facet on.
    """
    need_columns(long, ["strategy", facet, "label", "order", "share"], "t9_chart")
    labels = [T9_LABELS[c] for c in metrics.T9_CATEGORIES]
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("strategy:N", sort=in_order(long["strategy"], PAPER_STRATEGIES), title=None),
            x=alt.X("share:Q", stack="zero", scale=alt.Scale(domain=[0, 1]), title="share of T9"),
            color=alt.Color("label:N", sort=labels, title="outcome"),
            order=alt.Order("order:Q"),
            tooltip=["strategy", facet, "label", alt.Tooltip("share:Q", format=".3f")],
        )
        .properties(width=260, height=200)
        .facet(column=alt.Column(f"{facet}:N"))
    )


def max_reversal(values: Sequence[float]) -> float:
    """How far a sequence goes against its best monotone direction: the smaller of its largest
    drop below an earlier value and its largest rise above an earlier value (0 when monotone).
    """
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return 0.0
    drop = float(np.max(np.maximum.accumulate(v) - v))
    rise = float(np.max(v - np.minimum.accumulate(v)))
    return min(drop, rise)


def abstention_vs_context(
    preds: pd.DataFrame,
    decomp: pd.DataFrame,
    cell: Sequence[str] = ("strategy", "backbone"),
    tol: float = MONOTONE_TOL,
) -> pd.DataFrame:
    """T9 abstention per strategy against the mean context length it gave the reader.

    Monotone means: ordering the strategies of one backbone by mean context tokens, abstention
    never rises (or never falls) along the order by more than ``tol`` below (above) any earlier
    value (:func:`max_reversal` <= tol). The paper (§5.4) finds it non-monotone.

    Args:
        preds: predictions with ``context_tokens``.
        decomp: :func:`clinlib.analysis.metrics.t9_decomposition` output for the same cells.
        cell: the cell columns.

    Returns:
        ``cell``, mean_context_tokens, abstention_total, rank_context (1 = shortest),
        plus per backbone (same value on each of its rows) ``max_reversal`` and
        ``monotone`` (max_reversal <= tol).
    """
    cell = list(cell)
    need_columns(preds, [*cell, "task", "context_tokens"], "abstention_vs_context")
    need_columns(decomp, [*cell, "abstention_total"], "abstention_vs_context")
    t9 = preds[preds["task"] == "T9"]
    ctx = t9.groupby(cell, sort=True)["context_tokens"].mean().rename("mean_context_tokens")
    out = decomp[[*cell, "abstention_total"]].merge(ctx.reset_index(), on=cell, how="left")
    if out["mean_context_tokens"].isna().any():
        raise AnalysisInputError("abstention_vs_context: a T9 cell has no context_tokens")
    out = out.sort_values(["backbone", "mean_context_tokens", "strategy"], kind="mergesort")
    out["rank_context"] = out.groupby("backbone").cumcount() + 1

    if not 0.0 <= float(tol) < 1.0:
        raise AnalysisInputError(f"abstention_vs_context: tol must be in [0, 1), got {tol!r}")
    rev = out.groupby("backbone")["abstention_total"].apply(max_reversal).rename("max_reversal")
    out = out.merge(rev.reset_index(), on="backbone", how="left")
    out["monotone"] = out["max_reversal"] <= float(tol) + 1e-12
    return out.reset_index(drop=True)


def abstention_context_chart(df: pd.DataFrame) -> alt.Chart:
    """Abstention vs mean context tokens (log x), one line per backbone in context order."""
    need_columns(
        df, ["strategy", "backbone", "mean_context_tokens", "abstention_total"], "abst_chart"
    )
    plot = df.assign(ctx=df["mean_context_tokens"].clip(lower=1))
    base = alt.Chart(plot).encode(
        x=alt.X("ctx:Q", scale=alt.Scale(type="log"), title="mean context tokens (T9, log)"),
        y=alt.Y("abstention_total:Q", scale=alt.Scale(domain=[0, 1]), title="T9 abstention"),
        color=alt.Color("backbone:N", title="reader"),
    )
    line = base.mark_line(point=True).encode(order="rank_context:Q")
    text = base.mark_text(dx=6, align="left", fontSize=9).encode(text="strategy:N")
    return (line + text).properties(width=420, height=240)


def parser_table(kit: pd.DataFrame, paper_t8: pd.DataFrame, paper_t9: pd.DataFrame) -> pd.DataFrame:
    """Strict vs lenient accuracy per strategy: the kit's readers beside Tables 8–9.

    Args:
        kit: :func:`clinlib.analysis.metrics.strict_vs_lenient` by (task, strategy, backbone).
        paper_t8: ``load_table(8)`` (T9, pooled over backbones).
        paper_t9: ``load_table(9)`` (T7).

    Returns:
        task, strategy, source ("paper (pooled LLMs)" or the reader), strict, lenient, delta.
    """
    need_columns(
        kit, ["task", "strategy", "backbone", "strict", "lenient", "delta"], "parser_table"
    )
    frames = [
        kit[["task", "strategy", "strict", "lenient", "delta"]].assign(
            source=kit["backbone"].to_numpy()
        )
    ]
    for tab in (paper_t8, paper_t9):
        need_columns(tab, ["strategy", "task", "parser", "value"], "parser_table")
        w = tab.astype({"strategy": str, "task": str, "parser": str}).pivot_table(
            index=["task", "strategy"], columns="parser", values="value"
        )
        frames.append(
            w[["strict", "lenient", "delta"]].reset_index().assign(source="paper (pooled LLMs)")
        )
    out = pd.concat(frames, ignore_index=True)
    out = out.assign(_s=out["strategy"].map({s: i for i, s in enumerate(PAPER_STRATEGIES)}))
    out = out.sort_values(["task", "_s", "source"], kind="mergesort")
    return out[["task", "strategy", "source", "strict", "lenient", "delta"]].reset_index(drop=True)
