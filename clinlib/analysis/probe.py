"""The T3 controlled injection probe (paper §5.5 "SP4", Table 3, Fig. 5, Appendix H Case 1).

Three views of one question — does a representation keep the finding–diagnosis *relation*
carried by one injected sentence?

* :func:`recall_by_setting` — positive-class recall on the injected positives, pre (equal
  input: the sentence is in the dialogue the representation is built from) beside post
  (staleness: built before the sentence existed), from :func:`clinlib.analysis.metrics.positive_recall`;
  :func:`beside_paper` lines it up with the paper's Table 3.
* :func:`answer_counts` / :func:`collapse_chart` — yes / no / other predictions and accuracy
  per cell with the constant-No floor (Fig. 5): a reader that always says "no" scores the share
  of gold "no" (0.5 on the balanced set).
* :func:`artifact_inspection` — for one injected positive, what each representation kept: the
  injected sentence, the lab fact it mentions, and the relation (Case 1).

All functions are pure over DataFrames except :func:`artifact_inspection`, which reads (and
caches) representations through :mod:`clinlib.strategies`.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from clinlib.analysis.metrics import MetricsInputError, accuracy_table, positive_recall
from clinlib.analysis.probe_artifacts import artifact_inspection as artifact_inspection
from clinlib.analysis.probe_artifacts import injected_excerpt as injected_excerpt
from clinlib.analysis.probe_artifacts import kept as kept
from clinlib.analysis.probe_artifacts import parse_injection as parse_injection
from clinlib.analysis.probe_artifacts import prep_outputs as prep_outputs
from clinlib.analysis.probe_artifacts import rank_positives as rank_positives
from clinlib.analysis.probe_terms import TASK, ProbeError, require_columns
from clinlib.analysis.probe_terms import UPSTREAM_BUILT as UPSTREAM_BUILT

ANSWER_CLASSES: tuple[str, ...] = ("yes", "no", "other")
# Fig. 5 flags a cell as collapsed at pred=no >= 575/600.
CONSTANT_NO_SHARE = 575 / 600
CELL: tuple[str, ...] = ("strategy", "backbone", "setting")
SETTING_LABELS = {"pre": "pre (equal input)", "post": "post (staleness)"}


def _t3_rows(preds: pd.DataFrame, fn: str) -> pd.DataFrame:
    require_columns(preds, ["task", *CELL, "parsed", "correct"], fn)
    rows = preds[preds["task"] == TASK]
    if rows.empty:
        tasks = sorted(preds["task"].dropna().astype(str).unique().tolist())
        raise ProbeError(f"{fn}: no {TASK} predictions; tasks present: {tasks}")
    return rows.reset_index(drop=True)


def answer_class(parsed: object) -> str:
    """``yes`` / ``no`` for a parsed yes/no answer, ``other`` for anything else (abstention,
    parse failure, empty)."""
    if parsed is None or parsed is pd.NA or (isinstance(parsed, float) and np.isnan(parsed)):
        return "other"
    text = str(parsed).strip().lower()
    return text if text in ("yes", "no") else "other"


def answer_counts(
    preds: pd.DataFrame, questions: pd.DataFrame | None = None, cell: Sequence[str] = CELL
) -> pd.DataFrame:
    """Yes / no / other predictions and accuracy per T3 cell (Fig. 5 A and B).

    Args:
        preds: predictions (``gold`` is joined from ``questions`` on qid when absent).
        questions: questions.parquet rows (needed only when ``preds`` has no gold column).
        cell: grouping columns.

    Returns:
        ``cell`` + n, yes, no, other, gold_no, accuracy, ci_low, ci_high, floor (= gold_no / n,
        the constant-No accuracy), constant_no (no >= 575/600 of n), at_floor (accuracy equals
        the floor to within one question).
    """
    cell = list(cell)
    rows = _t3_rows(preds, "answer_counts")
    if "gold" not in rows.columns:
        if questions is None:
            raise ProbeError("answer_counts: predictions lack 'gold'; pass questions=")
        require_columns(questions, ["qid", "gold"], "answer_counts (questions)")
        rows = rows.merge(questions[["qid", "gold"]], on="qid", how="left", validate="m:1")
        if rows["gold"].isna().any():
            qid = rows.loc[rows["gold"].isna(), "qid"].iloc[0]
            raise ProbeError(f"answer_counts: qid {qid!r} has no gold in questions")
    cls = rows["parsed"].map(answer_class)
    flags = rows[cell].assign(
        **{c: (cls == c).astype(int).to_numpy() for c in ANSWER_CLASSES},
        gold_no=(rows["gold"].map(answer_class) == "no").astype(int).to_numpy(),
    )
    counts = flags.groupby(cell, sort=True, dropna=False).sum().reset_index()
    acc = accuracy_table(rows, by=cell)
    out = counts.merge(acc, on=cell, how="left", validate="1:1")
    out["floor"] = out["gold_no"] / out["n"]
    out["constant_no"] = out["no"] >= CONSTANT_NO_SHARE * out["n"]
    out["at_floor"] = (out["accuracy"] - out["floor"]).abs() * out["n"] < 1
    cols = [*cell, "n", *ANSWER_CLASSES, "gold_no", "accuracy", "ci_low", "ci_high", "floor"]
    return out[[*cols, "constant_no", "at_floor"]]


def recall_by_setting(
    preds: pd.DataFrame,
    questions: pd.DataFrame | None = None,
    cell: Sequence[str] = ("strategy", "backbone"),
) -> pd.DataFrame:
    """Positive-class recall on the injected positives, pre beside post (Table 3).

    Args:
        preds: predictions with a ``setting`` column (``pre`` / ``post``).
        questions: questions.parquet rows (gold is joined from them when absent).
        cell: cell columns other than ``setting``.

    Returns:
        One row per cell: n_pos, recall_pre, recall_post, drop (= pre - post) and the Wilson
        bounds ci_low_pre / ci_high_pre / ci_low_post / ci_high_post (NaN where a setting was
        not run).
    """
    cell = list(cell)
    rows = _t3_rows(preds, "recall_by_setting")
    try:
        rec = positive_recall(rows, cell=[*cell, "setting"], questions=questions)
    except MetricsInputError as exc:
        raise ProbeError(f"recall_by_setting: {exc}") from None
    wide = rec.pivot_table(
        index=cell, columns="setting", values=["n_pos", "recall", "ci_low", "ci_high"]
    )
    out = pd.DataFrame(index=wide.index)
    out["n_pos"] = wide["n_pos"].max(axis=1).astype(int)
    for setting in ("pre", "post"):
        for col in ("recall", "ci_low", "ci_high"):
            has = (col, setting) in wide.columns
            out[f"{col}_{setting}"] = wide[(col, setting)] if has else np.nan
    out["drop"] = out["recall_pre"] - out["recall_post"]
    order = ["n_pos", "recall_pre", "recall_post", "drop"]
    order += [f"{c}_{s}" for s in ("pre", "post") for c in ("ci_low", "ci_high")]
    return out[order].reset_index()


def beside_paper(
    recall: pd.DataFrame, paper: pd.DataFrame, prep: str = "deepseek-prepared"
) -> pd.DataFrame:
    """The kit's equal-input recall per strategy beside the paper's Table 3 row.

    Args:
        recall: output of :func:`recall_by_setting` (strategy, backbone, recall_pre, ...).
        paper: ``clinlib.analysis.paper.load_table("table03_t3_preservation")``.
        prep: which Table 3 block to show (``deepseek-prepared`` or ``backbone-matched``).

    Returns:
        One row per (strategy, kit backbone): strategy, backbone, n_pos, kit_recall_pre,
        kit_recall_post, then ``paper: <backbone>`` columns (NaN where the paper has no cell,
        e.g. structured-timeline and the raw-text strategies, which Table 3 did not run).
    """
    require_columns(
        recall, ["strategy", "backbone", "n_pos", "recall_pre", "recall_post"], "beside_paper"
    )
    require_columns(paper, ["prep", "strategy", "backbone", "value"], "beside_paper (paper)")
    block = paper[paper["prep"] == prep]
    if block.empty:
        raise ProbeError(
            f"beside_paper: paper table has no prep block {prep!r}; "
            f"blocks: {sorted(paper['prep'].unique().tolist())}"
        )
    wide = block.pivot_table(index="strategy", columns="backbone", values="value", dropna=False)
    wide.columns = [f"paper: {c}" for c in wide.columns]
    kit = recall[["strategy", "backbone", "n_pos", "recall_pre", "recall_post"]].rename(
        columns={"recall_pre": "kit_recall_pre", "recall_post": "kit_recall_post"}
    )
    return kit.merge(wide.reset_index(), on="strategy", how="left")


def _panels(df: pd.DataFrame, label: str, order: list[str]) -> alt.HConcatChart:
    """Fig. 5 panels A (answer counts) and B (accuracy) for one setting."""
    long = df.melt(
        id_vars=["cell", "n"],
        value_vars=list(ANSWER_CLASSES),
        var_name="answer",
        value_name="count",
    )
    long["rank"] = long["answer"].map({c: i for i, c in enumerate(ANSWER_CLASSES)})
    y = alt.Y("cell:N", sort=order, title=None)
    colors = alt.Scale(domain=list(ANSWER_CLASSES), range=["#009E73", "#D55E00", "#999999"])
    bars = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=y,
            x=alt.X("count:Q", title="predictions"),
            color=alt.Color("answer:N", scale=colors, title="answer"),
            order=alt.Order("rank:Q"),
            tooltip=["cell", "answer", "count", "n"],
        )
    )
    # balanced gold: half of each cell's questions are "yes"
    half = (
        alt.Chart(df.assign(half=df["n"] / 2))
        .mark_tick(color="black", thickness=2, size=14)
        .encode(y=y, x="half:Q")
    )
    flagged = df[df["constant_no"]]
    flags = (
        alt.Chart(flagged)
        .mark_point(shape="triangle-left", color="red", filled=True, size=80)
        .encode(y=y, x=alt.X("n:Q"))
    )
    panel_a = alt.layer(bars, half, flags).properties(
        width=240, title=f"A · {label}: answers (tick = n/2, red = constant-No)"
    )
    # one colour: a colour encoding here would share the answer-class scale of panel A
    points = (
        alt.Chart(df)
        .mark_point(filled=True, size=70, color="#0072B2")
        .encode(
            y=y,
            x=alt.X("accuracy:Q", scale=alt.Scale(domain=[0, 1]), title="accuracy"),
            tooltip=["cell", "accuracy", "floor", "n"],
        )
    )
    floor = alt.Chart(df).mark_tick(color="black", thickness=2, size=14).encode(y=y, x="floor:Q")
    panel_b = alt.layer(points, floor).properties(
        width=200, title="B · accuracy (tick = constant-No floor)"
    )
    return alt.hconcat(panel_a, panel_b)


def collapse_chart(counts: pd.DataFrame, title: str = "") -> alt.VConcatChart:
    """Fig. 5: (A) yes / no / other per cell with the balanced-gold mark and constant-No
    flags; (B) accuracy per cell with the constant-No floor; one row per setting.

    Args:
        counts: output of :func:`answer_counts` (with strategy, backbone, setting).
        title: figure title.

    Returns:
        An altair chart.
    """
    require_columns(
        counts, [*CELL, *ANSWER_CLASSES, "n", "accuracy", "floor", "constant_no"], "collapse_chart"
    )
    if counts.empty:
        raise ProbeError("collapse_chart: no T3 cells to draw")
    df = counts.copy()
    df["cell"] = df["strategy"].astype(str) + " × " + df["backbone"].astype(str)
    order = sorted(df["cell"].unique().tolist())
    settings = [s for s in ("post", "pre") if s in set(df["setting"])]
    settings += sorted(set(df["setting"]) - set(settings))
    rows = [
        _panels(df[df["setting"] == s].reset_index(drop=True), SETTING_LABELS.get(s, s), order)
        for s in settings
    ]
    return alt.vconcat(*rows).properties(title=title)


def recall_chart(recall: pd.DataFrame, paper: pd.DataFrame | None = None) -> alt.LayerChart:
    """Positive-class recall pre vs post per (strategy, backbone), with the paper's Table 3
    equal-input range per strategy as grey bars when ``paper`` is given.

    Args:
        recall: output of :func:`recall_by_setting`.
        paper: Table 3 (``clinlib.analysis.paper.load_table``), optional.

    Returns:
        An altair chart.
    """
    require_columns(recall, ["strategy", "backbone", "recall_pre", "recall_post"], "recall_chart")
    long = recall.melt(
        id_vars=["strategy", "backbone"],
        value_vars=["recall_pre", "recall_post"],
        var_name="setting",
        value_name="recall",
    ).dropna(subset=["recall"])
    long["setting"] = long["setting"].str.removeprefix("recall_").map(SETTING_LABELS)
    order = sorted(recall["strategy"].unique().tolist())
    y = alt.Y("strategy:N", sort=order, title=None)
    enc = dict(
        y=y,
        x=alt.X("recall:Q", scale=alt.Scale(domain=[0, 1]), title="recall on injected positives"),
        color=alt.Color("setting:N", title="setting"),
        shape=alt.Shape("backbone:N", title="kit reader"),
        tooltip=["strategy", "backbone", "setting", "recall"],
    )
    # pre and post often coincide: pre is drawn as a large ring around the filled post point
    # (an offset within a layered band scale misplaces points across rows).
    pre = (
        alt.Chart(long[long["setting"] == SETTING_LABELS["pre"]])
        .mark_point(filled=False, size=220, strokeWidth=2)
        .encode(**enc)
    )
    post = (
        alt.Chart(long[long["setting"] != SETTING_LABELS["pre"]])
        .mark_point(filled=True, size=60)
        .encode(**enc)
    )
    pts = alt.layer(pre, post)
    layers = [pts]
    if paper is not None:
        require_columns(paper, ["strategy", "value"], "recall_chart (paper)")
        rng = paper.dropna(subset=["value"]).groupby("strategy")["value"].agg(["min", "max"])
        rng = rng.reset_index()
        band = (
            alt.Chart(rng)
            .mark_rule(color="#777777", size=10, opacity=0.45)
            .encode(y=y, x="min:Q", x2="max:Q", tooltip=["strategy", "min", "max"])
        )
        tick = (
            alt.Chart(rng).mark_tick(color="#444444", thickness=2, size=14).encode(y=y, x="max:Q")
        )
        layers = [band, tick, pts]
    return alt.layer(*layers).properties(
        width=320, title="T3 recall on injected positives (grey = paper Table 3, LLM backbones)"
    )


def probe_figure(
    counts: pd.DataFrame, recall: pd.DataFrame, paper: pd.DataFrame | None = None, title: str = ""
) -> alt.VConcatChart:
    """The notebook's figure: :func:`collapse_chart` above :func:`recall_chart`, with
    independent colour / shape scales (answer classes vs settings).

    Args:
        counts: output of :func:`answer_counts`.
        recall: output of :func:`recall_by_setting`.
        paper: Table 3, optional.
        title: figure title.

    Returns:
        An altair chart.
    """
    both = alt.vconcat(collapse_chart(counts), recall_chart(recall, paper))
    return both.resolve_scale(color="independent", shape="independent").properties(title=title)
