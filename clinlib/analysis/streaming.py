"""Memory under accumulation: results of the ``stream`` and ``mixed`` settings (MedMemoryBench §5
"Evaluation Protocol", the evaluate-while-constructing protocol; §3 "memory saturation"; settings in
:mod:`clinlib.tasks.settings`).

* :func:`stream_subset` — a small stratified question subset (patients drawn across
  visit-count tertiles with a seed, a few single-patient questions per task), so the new
  settings fit a notebook's time budget;
* :func:`setting_rows` — predictions with the setting value split into ``mode`` (``efficient``
  or the mixed label), ``noise_seed`` and ``checkpoint``;
* :func:`accuracy_by_checkpoint` — accuracy vs checkpoint (sessions seen) or vs memory size at
  the checkpoint, per strategy / task / mode, with Wilson intervals
  (:func:`clinlib.analysis.stats.wilson_ci`);
* :func:`final_equals_static` — the protocol's own check: the final checkpoint's accuracy
  equals the static setting's for the same questions;
* :func:`noise_degradation` — static accuracy without and with noise per cell, and the drop;
* :func:`seed_scores` — accuracy per (strategy, noise seed), the input of the cross-seed
  statistics of :mod:`clinlib.analysis.memory_stats`;
* :func:`checkpoint_chart` — accuracy vs checkpoint, efficient solid and mixed dashed.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from clinlib.analysis.metrics.common import MetricsInputError, require
from clinlib.analysis.stats.question import wilson_ci
from clinlib.tasks.settings import SettingError, parse_value

EFFICIENT = "efficient"
RATE_COLUMNS: tuple[str, ...] = ("n", "n_correct", "accuracy", "ci_low", "ci_high")


def stream_subset(
    questions: pd.DataFrame,
    dialogues: pd.DataFrame,
    n_patients: int = 6,
    per_task: int = 2,
    seed: int = 42,
    max_visits: int | None = None,
) -> pd.DataFrame:
    """A stratified single-patient question subset for the accumulation settings.

    Patients (at most ``max_visits`` visits each, if given) are drawn with ``seed`` evenly
    from the tertiles of their visit count; then up to ``per_task`` questions per task are
    kept among them (T6, a two-patient comparison, is not asked under ``stream``).

    Returns:
        The questions.parquet rows kept, in their original order.
    """
    n_visits = dialogues.groupby("subject_id")["visit_idx"].nunique()
    if max_visits is not None:
        n_visits = n_visits[n_visits <= max_visits]
    single = questions[[len(list(ids)) == 1 for ids in questions["subject_ids"]]]
    sid = single["subject_ids"].map(lambda ids: int(list(ids)[0]))
    n_visits = n_visits[n_visits.index.isin(set(sid))]
    if n_visits.empty:
        raise MetricsInputError("stream_subset: no patient with single-patient questions")
    rng = np.random.default_rng(seed)
    tertile = pd.qcut(n_visits.rank(method="first"), 3, labels=False)
    chosen: list[int] = []
    for k in range(3):
        pool = sorted(n_visits.index[tertile == k])
        take = min(len(pool), -(-int(n_patients) // 3))
        chosen += [int(s) for s in rng.choice(pool, size=take, replace=False)]
    kept = single[sid.isin(chosen[: int(n_patients)])]
    return kept.groupby("task", sort=False, group_keys=False).head(int(per_task))


def setting_rows(preds: pd.DataFrame) -> pd.DataFrame:
    """Predictions with ``mode`` (``efficient``, or the mixed label such as ``mixed(seed=7)``),
    ``noise_seed`` (NA without noise), ``checkpoint`` (NA when static) and ``stream``."""
    require(preds, ["setting"], "setting_rows")
    parsed = {}
    for value in pd.unique(preds["setting"]):
        try:
            parsed[value] = parse_value(str(value))
        except SettingError as exc:
            raise MetricsInputError(f"setting_rows: {exc}") from None
    out = preds.copy()
    out["mode"] = [parsed[v][0].mode for v in out["setting"]]
    out["noise_seed"] = pd.array(
        [parsed[v][0].seed if parsed[v][0].mixed else None for v in out["setting"]], dtype="Int64"
    )
    out["stream"] = [parsed[v][0].stream for v in out["setting"]]
    out["checkpoint"] = pd.array([parsed[v][1] for v in out["setting"]], dtype="Int64")
    return out


def _rates(df: pd.DataFrame, by: list[str], alpha: float) -> pd.DataFrame:
    df = df[df["correct"].notna()]  # an unjudged free-text trap row (NA) is not wrong
    g = df.assign(c=df["correct"].astype(bool)).groupby(by, sort=True, dropna=False)
    out = g.agg(n=("c", "size"), n_correct=("c", "sum")).reset_index()
    out["accuracy"] = out["n_correct"] / out["n"]
    low, high = wilson_ci(out["n_correct"].to_numpy(float), out["n"].to_numpy(float), alpha)
    out["ci_low"], out["ci_high"] = low, high
    return out


def accuracy_by_checkpoint(
    preds: pd.DataFrame,
    by: Sequence[str] = ("strategy",),
    x: str = "checkpoint",
    bins: int | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Accuracy at each checkpoint (or memory size) of the ``stream`` rows, per ``by`` + mode.

    Args:
        preds: predictions (``load_predictions(profile, all_settings=True)``).
        by: grouping columns besides ``mode`` (e.g. strategy, task, backbone).
        x: ``checkpoint`` (sessions seen) or ``memory_items`` (the representation's items at
            the checkpoint).
        bins: group ``x`` into this many quantile bins (labelled by their upper edge);
            None keeps every value.
        alpha: 1 - confidence of the Wilson interval.

    Returns:
        ``by`` + mode + ``x`` + :data:`RATE_COLUMNS`.
    """
    rows = setting_rows(preds)
    rows = rows[rows["stream"]]
    if rows.empty:
        raise MetricsInputError("accuracy_by_checkpoint: no stream predictions")
    col = "checkpoint" if x == "checkpoint" else x
    require(rows, [*by, col, "correct"], "accuracy_by_checkpoint")
    values = rows[col].astype(float)
    if bins is not None:
        edges = pd.qcut(values, int(bins), duplicates="drop")
        values = edges.map(lambda iv: iv.right).astype(float)
    rows = rows.assign(**{x: values})
    return _rates(rows, [*by, "mode", x], alpha)


def final_equals_static(preds: pd.DataFrame, by: Sequence[str] = ("strategy",)) -> pd.DataFrame:
    """Final-checkpoint accuracy beside the static setting's for the same (question, cell):
    equal by construction (the final prefix is the whole dialogue)."""
    rows = setting_rows(preds)
    final = rows[rows["stream"] & rows["checkpoint_final"].fillna(False).astype(bool)]
    static = rows[~rows["stream"] & (rows["setting"] != "pre")]  # pre: T3 built injected
    keys = ["qid", *by, "backbone", "prep_model", "mode"]
    both = final.merge(static, on=keys, suffixes=("_final", "_static"))
    out = both.groupby([*by, "mode"], sort=True).agg(
        n=("qid", "size"),
        accuracy_final=("correct_final", "mean"),
        accuracy_static=("correct_static", "mean"),
    )
    out["equal"] = out["accuracy_final"] == out["accuracy_static"]
    return out.reset_index()


def noise_degradation(
    preds: pd.DataFrame, by: Sequence[str] = ("strategy", "task"), alpha: float = 0.05
) -> pd.DataFrame:
    """Static accuracy without noise (``post``) and with it (each mixed label) per cell, and
    the drop (efficient - mixed), over the questions asked in both."""
    rows = setting_rows(preds)
    static = rows[~rows["stream"] & (rows["setting"] != "pre")]
    rates = _rates(static, [*by, "mode"], alpha)
    base = rates[rates["mode"] == EFFICIENT].drop(columns="mode")
    noisy = rates[rates["mode"] != EFFICIENT]
    if base.empty or noisy.empty:
        raise MetricsInputError("noise_degradation: needs post and mixed predictions")
    out = noisy.merge(base, on=list(by), suffixes=("", "_efficient"))
    out["drop"] = out["accuracy_efficient"] - out["accuracy"]
    return out


def seed_scores(preds: pd.DataFrame, by: Sequence[str] = ("strategy",)) -> pd.DataFrame:
    """Accuracy per ``by`` and noise seed over the static ``mixed`` rows (one row per
    (strategy, seed): the input of memory_stats.seed_stability / friedman)."""
    rows = setting_rows(preds)
    mixed = rows[~rows["stream"] & rows["noise_seed"].notna()]
    if mixed.empty:
        raise MetricsInputError("seed_scores: no static mixed predictions")
    out = _rates(mixed.rename(columns={"noise_seed": "seed"}), [*by, "seed"], 0.05)
    return out[[*by, "seed", "n", "accuracy"]]


def checkpoint_chart(table: pd.DataFrame, x: str = "checkpoint", title: str = "") -> alt.Chart:
    """Accuracy vs ``x`` per strategy (colour), efficient solid and mixed dashed, with Wilson
    bands (a table from :func:`accuracy_by_checkpoint`)."""
    require(table, ["strategy", "mode", x, "accuracy", "ci_low", "ci_high"], "checkpoint_chart")
    base = alt.Chart(table).encode(
        x=alt.X(f"{x}:Q", title="sessions seen" if x == "checkpoint" else x.replace("_", " ")),
        color=alt.Color("strategy:N"),
        strokeDash=alt.StrokeDash("mode:N", title="setting"),
    )
    band = base.mark_area(opacity=0.12).encode(y="ci_low:Q", y2="ci_high:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("accuracy:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
        tooltip=["strategy", "mode", x, "n", alt.Tooltip("accuracy:Q", format=".2f")],
    )
    return (band + line).properties(width=420, height=240, title=title)
