"""Decisions, rejection and ordering by option count: the rest of LongMedBench's tables
(seed facts ``lmb_decision_decay``, ``lmb_decision_memory``, ``lmb_decision_length``,
``lmb_labf``, ``lmb_explicit_decay``, ``lmb_fig3a_options``). Pure functions over prediction
and question tables.

* :func:`decision_table` — T11 (next action, argument, discharge within 6 h) per reader,
  memory window m (``history-visits(m=...)``; ``none`` = ``no-context-blind``, the working
  context alone) and subtype: the mean time-decay score with a patient-clustered bootstrap
  interval (:func:`clinlib.analysis.stats.cluster.cluster_bootstrap_ci`) beside exact
  accuracy with its question-level Wilson interval.
* :func:`rejection_table` — Lab-T recall (T1R explicit and relative) and medication recall
  (T7R explicit and relative) beside Lab-F rejection (T1F) per reader and window m (``window-visits(m=...)``), with the hallucination rate:
  the share of T1F answers that state a value.
* :func:`tau_by_options` — mean Kendall's tau of T10 per reader, strategy, subtype and
  number of items (Fig. 3(a)), with :func:`tau_option_slope`: the least-squares slope of tau
  on the item count per cell.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from clinlib.analysis.metrics import MetricsInputError, accuracy_table
from clinlib.analysis.stats.cluster import cluster_bootstrap_ci, with_clusters
from clinlib.analysis.temporal import WINDOW_ORDER, window_of
from clinlib.tasks.answers.decision import split_gold
from clinlib.tasks.base import ABSTAIN

MEMORY_ORDER = ("none", *WINDOW_ORDER)
SUBTASKS = {
    "next_action": "T11-N next action",
    "argument": "T11-A argument",
    "discharge": "T11-D discharge within 6 h",
}


def memory_of(label: str) -> str | None:
    """``m`` of a ``history-visits(m=...)`` label ("1", "inf"), ``none`` for
    ``no-context-blind``, None otherwise."""
    text = str(label)
    if text == "no-context-blind":
        return "none"
    if not text.startswith("history-visits(m="):
        return None
    return text[len("history-visits(m=") :].split(",")[0].rstrip(")")


def _need(df: pd.DataFrame, cols, name: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise MetricsInputError(f"{name}: table lacks column(s) {missing}")


def _ordered(df: pd.DataFrame, col: str, order) -> pd.DataFrame:
    rank = {m: i for i, m in enumerate(order)}
    return (
        df.assign(_o=df[col].map(rank).fillna(len(rank)))
        .sort_values(["backbone", "_o", *[c for c in ("subtype", "question") if c in df.columns]])
        .drop(columns="_o")
        .reset_index(drop=True)
    )


def decision_table(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """T11 scores per reader, memory window and subtype (module docstring).

    Returns:
        backbone, m, subtype, n, n_patients, mean_score, score_low, score_high (clustered
        on patients), accuracy, ci_low, ci_high (Wilson); m in :data:`MEMORY_ORDER`.
    """
    _need(
        preds,
        ["qid", "task", "strategy", "backbone", "subtype", "score", "correct"],
        "decision_table",
    )
    rows = preds[preds["task"] == "T11"].assign(m=lambda d: d["strategy"].map(memory_of))
    rows = rows[rows["m"].notna()]
    if rows.empty:
        raise MetricsInputError(
            "decision_table: no T11 prediction under history-visits / no-context-blind"
        )
    table = _decision_cells(with_clusters(rows, questions), "m", n_boot, seed, alpha)
    return _ordered(table, "m", MEMORY_ORDER)


def _decision_cells(rows: pd.DataFrame, key: str, n_boot: int, seed: int, alpha: float):
    """Mean decay score (patient-clustered interval) and exact accuracy (Wilson) per
    (backbone, ``key``, subtype) of clustered prediction rows."""
    out = []
    for (b, k, s), g in rows.groupby(["backbone", key, "subtype"], sort=True):
        ci = cluster_bootstrap_ci(
            g["score"].astype(float), g["cluster"], n_boot=n_boot, alpha=alpha, seed=seed
        )
        out.append((b, k, s, ci.n, ci.n_clusters, ci.estimate, ci.low, ci.high))
    cols = ["backbone", key, "subtype", "n", "n_patients", "mean_score", "score_low"]
    table = pd.DataFrame(out, columns=[*cols, "score_high"])
    acc = accuracy_table(rows, by=["backbone", key, "subtype"], alpha=alpha)
    return table.merge(
        acc[["backbone", key, "subtype", "accuracy", "ci_low", "ci_high"]],
        on=["backbone", key, "subtype"],
    )


def memory_table(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    strategies: list[str],
    tasks: tuple[str, ...] = ("T11", "T11O"),
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Decision scores per reader, memory (the strategy label, in ``strategies``' order), task
    and subtype — LongMedBench's Table 4 (event vs note memory) and Table 5 (history length,
    RAG, Mem0) laid out as rows of strategies.

    Returns:
        backbone, strategy, task, subtype, n, n_patients, mean_score, score_low, score_high,
        accuracy, ci_low, ci_high.
    """
    _need(
        preds,
        ["qid", "task", "strategy", "backbone", "subtype", "score", "correct"],
        "memory_table",
    )
    rows = preds[preds["task"].isin(tasks) & preds["strategy"].isin(strategies)]
    if rows.empty:
        raise MetricsInputError(f"memory_table: no {'/'.join(tasks)} prediction under {strategies}")
    rows = with_clusters(rows.assign(subtype=rows["task"] + " " + rows["subtype"]), questions)
    table = _decision_cells(rows, "strategy", n_boot, seed, alpha)
    table[["task", "subtype"]] = table["subtype"].str.split(" ", n=1, expand=True)
    rank = {m: i for i, m in enumerate(strategies)}
    table = table.assign(_o=table["strategy"].map(rank)).sort_values(
        ["backbone", "task", "_o", "subtype"]
    )
    cols = ["backbone", "strategy", "task", "subtype"]
    return table[cols + [c for c in table.columns if c not in cols and c != "_o"]].reset_index(
        drop=True
    )


def rejection_table(preds: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Lab-T recall beside Lab-F rejection per reader and window (module docstring).

    Returns:
        backbone, m, question (``Lab-T explicit`` / ``Lab-T relative`` / ``Lab-F`` /
        ``Medication explicit`` / ``Medication relative``, from T7R, ``Imaging explicit`` /
        ``Imaging relative``, from T7I), n, k,
        accuracy, ci_low, ci_high, hallucination_rate (Lab-F rows: answers stating a value;
        NaN elsewhere).
    """
    _need(
        preds, ["task", "strategy", "backbone", "subtype", "correct", "parsed"], "rejection_table"
    )
    rows = preds[preds["task"].isin(["T1R", "T1F", "T7R", "T7I"])]
    rows = rows.assign(m=rows["strategy"].map(window_of))
    rows = rows[rows["m"].notna()]
    if rows.empty or not (rows["task"] == "T1F").any():
        raise MetricsInputError("rejection_table: no T1F prediction under window-visits(m=...)")
    kind = rows["task"].map({"T1R": "Lab-T ", "T7R": "Medication ", "T7I": "Imaging "}).fillna("")
    label = np.where(rows["task"] == "T1F", "Lab-F", kind + rows["subtype"].astype(str))
    rows = rows.assign(question=label)
    out = accuracy_table(rows, by=["backbone", "m", "question"], alpha=alpha)
    f = rows[rows["task"] == "T1F"]
    stated = f["parsed"].notna() & (f["parsed"].astype(str) != ABSTAIN)
    hall = f.assign(_h=stated).groupby(["backbone", "m", "question"])["_h"].mean()
    out["hallucination_rate"] = [
        hall.get((b, m, q), np.nan)
        for b, m, q in zip(out["backbone"], out["m"], out["question"], strict=True)
    ]
    return _ordered(out, "m", WINDOW_ORDER)


def tau_by_options(preds: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Mean Kendall's tau per reader, strategy, T10 subtype and number of items (Fig. 3(a)).

    Returns:
        backbone, strategy, subtype, n_items, n, mean_tau, sd_tau.
    """
    _need(preds, ["qid", "task", "strategy", "backbone", "subtype", "score"], "tau_by_options")
    _need(questions, ["qid", "options"], "tau_by_options")
    rows = preds[preds["task"] == "T10"]
    if rows.empty:
        raise MetricsInputError("tau_by_options: no T10 prediction")
    n_items = dict(zip(questions["qid"], questions["options"].map(len), strict=True))
    rows = rows.assign(n_items=rows["qid"].map(n_items))
    if rows["n_items"].isna().any():
        raise MetricsInputError(
            f"tau_by_options: qid {rows.loc[rows['n_items'].isna(), 'qid'].iloc[0]!r} "
            "is not in questions"
        )
    g = rows.groupby(["backbone", "strategy", "subtype", "n_items"])["score"]
    out = g.agg(n="size", mean_tau="mean", sd_tau="std").reset_index()
    out["n_items"] = out["n_items"].astype(int)
    return out


def tau_option_slope(table: pd.DataFrame) -> pd.DataFrame:
    """Least-squares slope of mean tau on the item count per (reader, strategy, subtype),
    weighting each item count by its questions; NaN with fewer than two item counts.

    Returns:
        backbone, strategy, subtype, n_counts, slope (tau per extra item).
    """
    out = []
    for key, g in table.groupby(["backbone", "strategy", "subtype"], sort=True):
        x, y, w = (g[c].to_numpy(float) for c in ("n_items", "mean_tau", "n"))
        slope = np.nan
        if len(g) >= 2:
            xm = np.average(x, weights=w)
            slope = float(
                np.sum(w * (x - xm) * (y - np.average(y, weights=w))) / np.sum(w * (x - xm) ** 2)
            )
        out.append((*key, len(g), slope))
    return pd.DataFrame(out, columns=["backbone", "strategy", "subtype", "n_counts", "slope"])


# --------------------------------------------------------------------------- charts


def decision_chart(table: pd.DataFrame) -> alt.FacetChart:
    """Mean time-decay score (clustered interval) by memory window per subtype, one panel per
    reader (:func:`decision_table`)."""
    data = table.assign(subtask=table["subtype"].map(SUBTASKS))
    tip = [
        "backbone",
        "m",
        "subtask",
        "n",
        alt.Tooltip("mean_score:Q", format=".3f"),
        alt.Tooltip("accuracy:Q", format=".3f"),
    ]
    base = alt.Chart().encode(
        x=alt.X("m:O", sort=list(MEMORY_ORDER), title="memory m"),
        color=alt.Color("subtask:N"),
        tooltip=tip,
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y("mean_score:Q", scale=alt.Scale(domain=[0, 1]), title="time-decay score")
    )
    bars = base.mark_errorbar().encode(y="score_low:Q", y2="score_high:Q")
    return alt.layer(line, bars).facet(
        column=alt.Column("backbone:N", title="reader"),
        data=data,
        title="T11 decisions by memory window",
    )


def rejection_chart(table: pd.DataFrame) -> alt.FacetChart:
    """Lab-T recall beside Lab-F rejection by window, one panel per reader."""
    tip = ["backbone", "m", "question", "n", alt.Tooltip("accuracy:Q", format=".3f")]
    base = alt.Chart().encode(
        x=alt.X("m:O", sort=list(WINDOW_ORDER), title="window m"),
        color=alt.Color("question:N"),
        tooltip=tip,
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1]), title="accuracy")
    )
    bars = base.mark_errorbar().encode(y="ci_low:Q", y2="ci_high:Q")
    return alt.layer(line, bars).facet(
        column=alt.Column("backbone:N", title="reader"),
        data=table,
        title="Lab-T recall vs Lab-F rejection",
    )


def tau_options_chart(table: pd.DataFrame) -> alt.FacetChart:
    """Mean tau by number of items per T10 subtype (Fig. 3(a)'s layout), one panel per
    reader (:func:`tau_by_options`)."""
    tip = [
        "backbone",
        "strategy",
        "subtype",
        "n_items",
        "n",
        alt.Tooltip("mean_tau:Q", format=".3f"),
    ]
    chart = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=alt.X("n_items:O", title="items to order"),
            y=alt.Y("mean_tau:Q", scale=alt.Scale(domain=[-1, 1]), title="mean Kendall's tau"),
            color=alt.Color("subtype:N"),
            strokeDash=alt.StrokeDash("strategy:N"),
            tooltip=tip,
        )
    )
    return chart.facet(
        column=alt.Column("backbone:N", title="reader"),
        data=table,
        title="T10: tau by number of items (LongMedBench Fig. 3(a))",
    )


def option_credits(question: pd.Series | dict) -> pd.DataFrame:
    """A T11 question's options with the credit each earns (read from its gold): letter,
    option, credit, gold (the ground-truth letter)."""
    letter, credits = split_gold(str(question["gold"]))
    opts = [str(o) for o in question["options"]]
    return pd.DataFrame(
        {
            "letter": [chr(65 + i) for i in range(len(opts))],
            "option": opts,
            "credit": [credits.get(chr(65 + i), 0.0) for i in range(len(opts))],
            "gold": [chr(65 + i) == letter for i in range(len(opts))],
        }
    )
