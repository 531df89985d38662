"""Temporal stratification of accuracy and the seed values it is read against (ClinTraceBench
§Limitations: "Long-context degradation is uniform across backbones (-13 to -14 pp from
shortest to longest quartile)"; LongMedBench's retrieval task, Table 2, and "temporal
reasoning" Table 3). Pure functions over prediction / question / event tables.

* :func:`anchor_positions` — where a question's evidence lies in its patient's record: the
  visit of its EARLIEST anchor event (the furthest back the question reaches; the first
  patient's anchors for T6) over the patient's number of visits, as
  ``position = visit_idx / (n_visits - 1)`` (0 = first visit, 1 = last; a one-visit record
  is 1). Questions without an anchor in the events table (T9 never-measured labs, T5
  controls) get NaN and no bin.
* :func:`accuracy_by_anchor_position` — accuracy with Wilson intervals per cell and position
  bin (equal-width bins of ``position``).
* :func:`accuracy_by_length_quartile` — accuracy per cell and quartile of the prediction's
  ``context_tokens`` (quartiles within each cell, by rank so ties cannot empty a quartile);
  :func:`quartile_drop` — longest minus shortest quartile, in percentage points, per cell:
  the Limitations claim.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from clinlib.analysis.metrics import CELL, MetricsInputError, accuracy_table
from clinlib.core.seed_facts import seed_fact

# Seed values, from the seed-facts table (clinlib.core.seed_facts, each with its passage).
# ClinTraceBench Limitations: accuracy falls 13–14 pp from the shortest to the longest
# context-length quartile, "uniform across backbones"; the passage names no strategy.
_DROP = seed_fact("ctb_length_degradation")
CLINTRACE_LENGTH_DROP_PP: tuple[float, float] = (_DROP.number(1), _DROP.number(0))

# LongMedBench's retrieval task (Table 2; only the values its text states): qwen-turbo as a
# naive long-context reader over windows m = 1, 2, 3 and the full history; Lab-T recall,
# Lab-F rejection; Mem0 as the agent-memory system (explicit LAB questions 0.993, medication
# 0.983; the text names imaging as Mem0's weakness, seed fact lmb_mem0_imaging).
_DECAY, _MEM0 = seed_fact("lmb_explicit_decay"), seed_fact("lmb_mem0_explicit")
LONGMEDBENCH_TABLE2: pd.DataFrame = pd.DataFrame(
    [
        (
            "qwen-turbo",
            "explicit",
            "1",
            "retrieval",
            _DECAY.number(0),
            "smallest window (3 visits)",
        ),
        ("qwen-turbo", "explicit", "inf", "retrieval", _DECAY.number(1), "full history"),
        (
            "qwen-turbo",
            "any",
            "any",
            "Lab-F rejection (max)",
            _DECAY.number(2),
            "Lab-F rejection at most this in every window",
        ),
        ("mem0", "explicit", "-", "Lab-T", _MEM0.number(0), "explicit lab questions"),
        ("mem0", "explicit", "-", "Medication", _MEM0.number(1), "explicit medication questions"),
        ("mem0", "relative", "-", "Overall", _MEM0.number(2), "relative questions remain inferior"),
    ],
    columns=["system", "question", "m", "metric", "value", "note"],
)

# LongMedBench "temporal reasoning" (Table 3; Kendall's tau, only the values its text states):
# visit cloze (its best, a weak model, thinking on/off), and for visit sorting and joint
# sorting only the best score. ``stated`` says which: "best" or "other".
_CLOZE = seed_fact("lmb_tau_cloze")
LONGMEDBENCH_TABLE3: pd.DataFrame = pd.DataFrame(
    [
        ("visit cloze", "gpt-5-mini", _CLOZE.number(0), "other", "top model"),
        ("visit cloze", "deepseek-v3.2-thinking", _CLOZE.number(2), "best", "thinking mode"),
        ("visit cloze", "deepseek-v3.2", _CLOZE.number(3), "other", ""),
        ("visit cloze", "qwen-turbo", _CLOZE.number(1), "other", "weak model"),
        (
            "visit sorting",
            "deepseek-v3.2-thinking",
            seed_fact("lmb_tau_visit_sorting").number(0),
            "best",
            "best",
        ),
        (
            "joint sorting",
            "best model",
            seed_fact("lmb_tau_joint_sorting").number(0),
            "best",
            "best",
        ),
    ],
    columns=["subtask", "model", "tau", "stated", "note"],
)

POSITION_BINS = 4
LENGTH_QUARTILES = ("Q1 shortest", "Q2", "Q3", "Q4 longest")


def _first_anchor_visits(questions: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    for df, cols, name in (
        (questions, ("qid", "subject_ids", "anchor_event_ids"), "questions"),
        (events, ("event_id", "subject_id", "visit_idx"), "events"),
    ):
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise MetricsInputError(f"anchor_positions: {name} lacks column(s) {missing}")
    visit = dict(zip(events["event_id"].astype(str), events["visit_idx"].astype(int), strict=True))
    owner = dict(zip(events["event_id"].astype(str), events["subject_id"].astype(int), strict=True))
    rows = []
    for qid, sids, anchors in zip(
        questions["qid"], questions["subject_ids"], questions["anchor_event_ids"], strict=True
    ):
        sid = int(list(sids)[0])
        found = [visit[str(a)] for a in list(anchors) if owner.get(str(a)) == sid]
        rows.append((str(qid), sid, min(found) if found else np.nan))
    return pd.DataFrame(rows, columns=["qid", "subject_id", "visit_idx"])


def anchor_positions(questions: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """qid, subject_id, visit_idx (earliest anchor's), n_visits, position (module docstring).

    Args:
        questions: questions.parquet rows (qid, subject_ids, anchor_event_ids).
        events: events.parquet (event_id, subject_id, visit_idx).
    """
    out = _first_anchor_visits(questions, events)
    n = events.groupby(events["subject_id"].astype(int))["visit_idx"].nunique()
    out["n_visits"] = out["subject_id"].map(n).astype("Int64")
    denom = (out["n_visits"].astype(float) - 1).where(lambda d: d > 0)
    out["position"] = (out["visit_idx"] / denom).where(denom.notna(), 1.0)
    out.loc[out["visit_idx"].isna(), "position"] = np.nan
    return out


def position_bin(position: pd.Series, bins: int = POSITION_BINS) -> pd.Series:
    """Equal-width bins of a position in [0, 1], labelled by their range in percent of the
    record ("0-25%" is the earliest quarter); NaN stays NaN."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    labels = [f"{round(a * 100)}-{round(b * 100)}%" for a, b in zip(edges, edges[1:], strict=False)]
    return pd.cut(position, edges, labels=labels, include_lowest=True)


def accuracy_by_anchor_position(
    preds: pd.DataFrame,
    positions: pd.DataFrame,
    cell: Sequence[str] = CELL,
    bins: int = POSITION_BINS,
    correct_col: str = "correct",
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Accuracy with a Wilson CI per cell and anchor-position bin (predictions whose question
    has no position are left out).

    Returns:
        ``cell`` + position_bin, n, k, accuracy, ci_low, ci_high.
    """
    if "qid" not in preds.columns:
        raise MetricsInputError("accuracy_by_anchor_position: predictions lack column 'qid'")
    rows = preds.merge(positions[["qid", "position"]], on="qid", how="inner")
    rows = rows[rows["position"].notna()]
    if rows.empty:
        raise MetricsInputError("accuracy_by_anchor_position: no prediction has a position")
    rows = rows.assign(position_bin=position_bin(rows["position"], bins).astype(str))
    return accuracy_table(rows, by=[*cell, "position_bin"], correct_col=correct_col, alpha=alpha)


def length_quartile(tokens: pd.Series) -> pd.Series:
    """Quartile labels (:data:`LENGTH_QUARTILES`) of context lengths, by rank (ties broken by
    row order) so that every quartile holds a quarter of the rows."""
    if len(tokens) < len(LENGTH_QUARTILES):
        raise MetricsInputError(f"length_quartile: {len(tokens)} rows cannot fill 4 quartiles")
    ranks = tokens.rank(method="first")
    return pd.qcut(ranks, len(LENGTH_QUARTILES), labels=list(LENGTH_QUARTILES))


def accuracy_by_length_quartile(
    preds: pd.DataFrame,
    cell: Sequence[str] = CELL,
    correct_col: str = "correct",
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Accuracy with a Wilson CI per cell and ``context_tokens`` quartile (within the cell).

    Returns:
        ``cell`` + quartile, n, k, accuracy, ci_low, ci_high, min_tokens, max_tokens.
    """
    need = [*cell, "context_tokens", correct_col]
    missing = [c for c in need if c not in preds.columns]
    if missing:
        raise MetricsInputError(f"accuracy_by_length_quartile: predictions lack {missing}")
    rows = preds[preds["context_tokens"].notna()].copy()
    rows["quartile"] = rows.groupby(list(cell), group_keys=False)["context_tokens"].apply(
        length_quartile
    )
    rows["quartile"] = rows["quartile"].astype(str)
    out = accuracy_table(rows, by=[*cell, "quartile"], correct_col=correct_col, alpha=alpha)
    span = rows.groupby([*cell, "quartile"])["context_tokens"].agg(["min", "max"]).reset_index()
    span = span.rename(columns={"min": "min_tokens", "max": "max_tokens"})
    return out.merge(span, on=[*cell, "quartile"], how="left")


def quartile_drop(table: pd.DataFrame, cell: Sequence[str] = CELL) -> pd.DataFrame:
    """Longest minus shortest quartile accuracy, in percentage points, per cell (the
    Limitations claim is -13 to -14 pp); from :func:`accuracy_by_length_quartile`.

    Returns:
        ``cell`` + q1_accuracy, q4_accuracy, drop_pp.
    """
    wide = table.pivot_table(index=list(cell), columns="quartile", values="accuracy")
    first, last = LENGTH_QUARTILES[0], LENGTH_QUARTILES[-1]
    if first not in wide.columns or last not in wide.columns:
        raise MetricsInputError("quartile_drop: the table lacks the first or last quartile")
    out = pd.DataFrame({"q1_accuracy": wide[first], "q4_accuracy": wide[last]})
    out["drop_pp"] = (out["q4_accuracy"] - out["q1_accuracy"]) * 100.0
    return out.reset_index()


# --------------------------------------------------------------------------- explicit vs relative

WINDOW_ORDER = ("1", "2", "3", "inf")


def window_of(label: str) -> str | None:
    """The ``m`` of a ``window-visits(m=...)`` label as text ("1", "inf"), None otherwise."""
    text = str(label)
    if not text.startswith("window-visits(m="):
        return None
    return text[len("window-visits(m=") :].split(",")[0].rstrip(")")


def window_table(preds: pd.DataFrame, correct_col: str = "correct", alpha: float = 0.05):
    """Explicit vs relative accuracy (Wilson CI) per reader and window size, from T1R
    predictions under ``window-visits(m=...)`` (LongMedBench Table 2's layout).

    Returns:
        backbone, m, subtype, n, k, accuracy, ci_low, ci_high, mean_context_tokens; m in
        :data:`WINDOW_ORDER` order.
    """
    need = ["task", "strategy", "backbone", "subtype", "context_tokens", correct_col]
    missing = [c for c in need if c not in preds.columns]
    if missing:
        raise MetricsInputError(f"window_table: predictions lack {missing}")
    rows = preds[(preds["task"] == "T1R")].assign(m=preds["strategy"].map(window_of))
    rows = rows[rows["m"].notna()]
    if rows.empty:
        raise MetricsInputError("window_table: no T1R prediction under window-visits(m=...)")
    out = accuracy_table(
        rows, by=["backbone", "m", "subtype"], correct_col=correct_col, alpha=alpha
    )
    tokens = rows.groupby(["backbone", "m", "subtype"], as_index=False)["context_tokens"].mean()
    out = out.merge(
        tokens.rename(columns={"context_tokens": "mean_context_tokens"}),
        on=["backbone", "m", "subtype"],
        how="left",
    )
    order = {m: i for i, m in enumerate(WINDOW_ORDER)}
    out = out.assign(_o=out["m"].map(order).fillna(len(order)))
    return out.sort_values(["backbone", "_o", "subtype"]).drop(columns="_o").reset_index(drop=True)


def beside_table2(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`window_table` (wide: explicit / relative accuracy per reader and m) beside the
    seed's explicit-retrieval values where it states one (m = 1 and m = inf)."""
    wide = table.pivot_table(index=["backbone", "m"], columns="subtype", values="accuracy")
    wide = wide.reset_index().rename_axis(columns=None)
    seed = LONGMEDBENCH_TABLE2[
        (LONGMEDBENCH_TABLE2["system"] == "qwen-turbo")
        & (LONGMEDBENCH_TABLE2["question"] == "explicit")
    ]
    wide["seed_explicit_qwen_turbo"] = wide["m"].map(
        dict(zip(seed["m"], seed["value"], strict=True))
    )
    if {"explicit", "relative"} <= set(wide.columns):
        wide["explicit_minus_relative"] = wide["explicit"] - wide["relative"]
    return wide


T10_SUBTASKS: dict[str, str] = {
    "visit_cloze": "visit cloze",
    "visit_sorting": "visit sorting",
    "joint_sorting": "joint sorting",
    # the seed sorts note summaries: its visit-sorting value stands beside both variants
    "visit_sorting_notes": "visit sorting",
}


def beside_table3(scores: pd.DataFrame) -> pd.DataFrame:
    """Mean Kendall's tau per T10 subtype, strategy and reader (from
    :func:`clinlib.analysis.metrics.score_table` by strategy, backbone, subtype) beside the
    seed's Table 3 values for that subtask: ``seed_best`` (the best its text states) and
    ``seed_lowest_stated`` (the lowest it states beside the best — visit cloze's weak model;
    missing for visit and joint sorting, where the text states only the best)."""
    need = ["strategy", "backbone", "subtype", "mean_score"]
    missing = [c for c in need if c not in scores.columns]
    if missing:
        raise MetricsInputError(f"beside_table3: score table lacks {missing}")
    wide = scores.pivot_table(
        index="subtype", columns=["strategy", "backbone"], values="mean_score"
    )
    wide.columns = [f"{s} / {b}" for s, b in wide.columns]
    seed = LONGMEDBENCH_TABLE3.groupby("subtask")["tau"]
    best = seed.max()
    # the lowest value the seed states BESIDE its best (visit cloze: a weak model); sorting
    # subtasks state only their best, so they have none
    low = LONGMEDBENCH_TABLE3[LONGMEDBENCH_TABLE3["stated"] != "best"].groupby("subtask")["tau"]
    wide["seed_best"] = wide.index.map(lambda t: best.get(T10_SUBTASKS.get(t)))
    wide["seed_lowest_stated"] = wide.index.map(lambda t: low.min().get(T10_SUBTASKS.get(t)))
    order = [t for t in T10_SUBTASKS if t in wide.index]
    return wide.loc[order].reset_index()


# --------------------------------------------------------------------------- charts


def _band(base: alt.Chart, y_title: str) -> alt.LayerChart:
    point = base.mark_line(point=True).encode(
        y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1]), title=y_title)
    )
    bars = base.mark_errorbar().encode(y=alt.Y("ci_low:Q", title=y_title), y2="ci_high:Q")
    return alt.layer(point, bars)


SEED_SERIES = "LongMedBench explicit (qwen-turbo)"


def window_chart(table: pd.DataFrame) -> alt.FacetChart:
    """Explicit vs relative accuracy by window size per reader (:func:`window_table`), with
    the seed's explicit values (qwen-turbo, m = 1 and inf) as one more series."""
    seed = LONGMEDBENCH_TABLE2[
        (LONGMEDBENCH_TABLE2["system"] == "qwen-turbo")
        & (LONGMEDBENCH_TABLE2["question"] == "explicit")
    ]
    seeds = pd.DataFrame(
        [
            (b, m, SEED_SERIES, v)
            for b in table["backbone"].unique()
            for m, v in zip(seed["m"], seed["value"], strict=True)
        ],
        columns=["backbone", "m", "subtype", "accuracy"],
    )
    data = pd.concat([table, seeds], ignore_index=True)
    x = alt.X("m:O", sort=list(WINDOW_ORDER), title="m")
    tip = ["backbone", "m", "subtype", "n", alt.Tooltip("accuracy:Q", format=".3f")]
    # data only on the facet: a layer with its own data would ignore the facet's split
    base = alt.Chart().encode(
        x=x, xOffset="subtype:N", tooltip=tip, color=alt.Color("subtype:N", title="question")
    )
    return _band(base, "accuracy").facet(
        column=alt.Column("backbone:N", title="reader"),
        data=data,
        title="T1R: explicit vs relative accuracy by window (m visits either side)",
    )


def strata_chart(table: pd.DataFrame, x_col: str, title: str, color: str = "strategy"):
    """Accuracy (Wilson CI) per stratum ``x_col`` coloured by ``color``, one panel per
    reader: :func:`accuracy_by_anchor_position` (x = position_bin) or
    :func:`accuracy_by_length_quartile` (x = quartile)."""
    order = sorted(table[x_col].astype(str).unique())
    tip = [color, "backbone", x_col, "n", alt.Tooltip("accuracy:Q", format=".3f")]
    base = alt.Chart().encode(
        x=alt.X(f"{x_col}:O", sort=order, title=x_col), color=alt.Color(f"{color}:N"), tooltip=tip
    )
    return _band(base, "accuracy").facet(
        column=alt.Column("backbone:N", title="reader"), data=table, title=title
    )


def tau_chart(scores: pd.DataFrame) -> alt.FacetChart:
    """Mean tau per T10 subtype and strategy, one panel per reader, with the seed's best
    model per subtask (Table 3) as one more series."""
    best = LONGMEDBENCH_TABLE3.groupby("subtask")["tau"].max()
    seeds = pd.DataFrame(
        [
            (b, t, "LongMedBench best", best[name])
            for b in scores["backbone"].unique()
            for t, name in T10_SUBTASKS.items()
        ],
        columns=["backbone", "subtype", "strategy", "mean_score"],
    )
    data = pd.concat([scores[["backbone", "subtype", "strategy", "mean_score"]], seeds])
    tip = ["strategy", "backbone", "subtype", alt.Tooltip("mean_score:Q", format=".3f")]
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("subtype:N", sort=list(T10_SUBTASKS), title=None),
            xOffset="strategy:N",
            y=alt.Y("mean_score:Q", scale=alt.Scale(domain=[-1, 1]), title="mean Kendall's tau"),
            color=alt.Color("strategy:N"),
            tooltip=tip,
        )
    )
    return bars.facet(
        column=alt.Column("backbone:N", title="reader"),
        data=data,
        title="T10: Kendall's tau by subtask (LongMedBench Table 3 best beside)",
    )


# --- joint sorting's pairing, scored on its own (LongMedBench: "The agent must correctly pair
# the clips from one visit and order them in time sequence") ---------------------------------
def joint_pairing(parsed: object, clips: Sequence[Sequence[object]]) -> float:
    """The share of a joint-sorting question's visits whose two clips the answer PAIRS: its
    admission half and discharge half at consecutive positions (1–2, 3–4, ...), admission
    first, as the question asks; ``clips`` = ``meta.clips`` ((hadm_id, half) per letter in
    letter order). An answer that is no permutation of the letters scores 0."""
    letters = [x.strip() for x in str(parsed or "").split(",") if x.strip()]
    if sorted(letters) != [chr(ord("A") + i) for i in range(len(clips))] or not clips:
        return 0.0
    at = [tuple(clips[ord(x) - ord("A")]) for x in letters]
    visits = {c[0] for c in at}
    paired = {
        at[i][0]
        for i in range(0, len(at) - 1, 2)
        if at[i][0] == at[i + 1][0] and (at[i][1], at[i + 1][1]) == ("admission", "discharge")
    }
    return len(paired) / len(visits)


def pairing_table(preds: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Per reader and strategy: joint sorting's mean pairing score (:func:`joint_pairing`)
    beside its mean Kendall's tau (the order score), on the same predictions.

    Returns:
        backbone, strategy, n, mean_pairing, mean_tau.
    """
    need = {"qid", "task", "subtype", "backbone", "strategy", "parsed", "score"}
    if not need <= set(preds.columns):
        raise MetricsInputError(f"pairing_table: predictions lack {sorted(need - set(preds))}")
    rows = preds[(preds["task"] == "T10") & (preds["subtype"] == "joint_sorting")]
    if rows.empty:
        raise MetricsInputError("pairing_table: no T10 joint-sorting prediction")
    metas = {q: json.loads(m) for q, m in zip(questions["qid"], questions["meta"], strict=True)}
    clips = {q: m["clips"] for q, m in metas.items() if "clips" in m}
    missing = sorted(set(rows["qid"]) - set(clips))
    if missing:
        raise MetricsInputError(f"pairing_table: qid {missing[0]!r} is not in questions")
    rows = rows.assign(
        pairing=[
            joint_pairing(p, clips[q]) for p, q in zip(rows["parsed"], rows["qid"], strict=True)
        ]
    )
    g = rows.groupby(["backbone", "strategy"])
    return g.agg(
        n=("qid", "size"), mean_pairing=("pairing", "mean"), mean_tau=("score", "mean")
    ).reset_index()
