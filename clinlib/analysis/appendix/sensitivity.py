"""Supplementary analyses of Appendix G and the Limitations over the kit's predictions.

- :func:`overanswer_makeup` — G.4: T9 over-answers split into invented value / bare yes-no /
  other (the paper lumps parser-missed verbose abstentions into "other"; the kit's
  :func:`clinlib.analysis.metrics.t9_outcomes` already separates them, so "other" here is what
  is left);
- :func:`macro_ablation` — Table 13: macro accuracy leaving task subsets out, mean over
  backbones, and :func:`macro_ablation_beside_paper`;
- :func:`empty_sensitivity` — Limitations "Residual artifacts": accuracy with empty responses
  counted wrong (the headline policy) vs excluded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pandas as pd

from clinlib.analysis import metrics
from clinlib.analysis.appendix.diagnostics import empty_flags
from clinlib.analysis.metrics.common import (
    CELL,
    MetricsInputError,
    bool_col,
    group_counts,
    require,
)

OVERANSWER_KINDS: tuple[str, ...] = ("invented_value", "bare_yes_no", "other")
# A number that is not part of a date or an id (2150-01-02, LAB-11): a stated value.
_NUMBER_RE = re.compile(r"(?<![\w./:-])\d+(?:\.\d+)?(?![\w./:-]|-\d)")
_VALUE_RE = re.compile(metrics.VALUE_PATTERN, re.IGNORECASE)
_YES_NO_RE = re.compile(r"\s*(?:yes|no)\s*[.!]?\s*", re.IGNORECASE)

# Table 13's task subsets (Appendix G.7), named as data/paper/table13 names them.
TABLE13_SUBSETS: dict[str, tuple[str, ...]] = {
    "all": (),
    "without_T5_T8_T9": ("T5", "T8", "T9"),
    "without_T3": ("T3",),
}


def overanswer_kind(text: object) -> str:
    """G.4's class of one over-answer: ``invented_value`` (states a number or a value with a
    unit), ``bare_yes_no`` (only "yes" / "no"), else ``other``."""
    s = "" if text is None or (isinstance(text, float) and pd.isna(text)) else str(text)
    if _YES_NO_RE.fullmatch(s):
        return "bare_yes_no"
    if _VALUE_RE.search(s) or _NUMBER_RE.search(s):
        return "invented_value"
    return "other"


def overanswer_makeup(preds: pd.DataFrame, cell: Sequence[str] = CELL) -> pd.DataFrame:
    """G.4: T9 over-answers per cell by kind (post setting).

    Returns:
        ``cell`` + n_t9, n_over_answer, n_parser_missed, one count and one share (of the
        over-answers) per :data:`OVERANSWER_KINDS`.
    """
    cell = list(cell)
    rows = metrics.common.task_rows(preds, "T9", "overanswer_makeup")
    if "setting" in rows.columns:
        rows = rows[rows["setting"] == "post"]
    outcome = metrics.t9_outcomes(rows)
    kinds = rows["response"].astype(object).map(overanswer_kind)
    kinds = kinds.where(outcome == "over_answer").astype(object)
    flags = rows[cell].assign(
        n_t9=1,
        n_over_answer=(outcome == "over_answer").astype(int).to_numpy(),
        n_parser_missed=(outcome == "parser_missed").astype(int).to_numpy(),
        **{k: (kinds == k).to_numpy(bool).astype(int) for k in OVERANSWER_KINDS},
    )
    out = group_counts(flags, cell)
    for k in OVERANSWER_KINDS:
        out[f"{k}_share"] = (out[k] / out["n_over_answer"]).where(out["n_over_answer"] > 0)
    return out


def macro_ablation(
    preds: pd.DataFrame,
    subsets: Mapping[str, Sequence[str]] = TABLE13_SUBSETS,
    cell: Sequence[str] = CELL,
) -> pd.DataFrame:
    """Table 13: macro accuracy per strategy over the tasks left after dropping each subset,
    per cell and then averaged over the backbones (post setting).

    Returns:
        strategy, task_subset, n_backbones, macro_accuracy (mean over backbones).
    """
    cell = list(cell)
    rows = preds[preds["setting"] == "post"] if "setting" in preds.columns else preds
    per_task = metrics.accuracy_table(rows, by=[*cell, "task"])
    frames = []
    for name, dropped in subsets.items():
        keep = per_task[~per_task["task"].isin(list(dropped))]
        if keep.empty:
            raise MetricsInputError(f"macro_ablation: subset {name!r} leaves no task")
        macro = metrics.summary_rows(keep, cell=cell)[[*cell, "macro"]]
        agg = macro.groupby("strategy", sort=False)["macro"].agg(["size", "mean"]).reset_index()
        frames.append(agg.assign(task_subset=name))
    out = pd.concat(frames, ignore_index=True)
    out = out.rename(columns={"size": "n_backbones", "mean": "macro_accuracy"})
    return out[["strategy", "task_subset", "n_backbones", "macro_accuracy"]]


def macro_ablation_beside_paper(kit: pd.DataFrame, table13: pd.DataFrame) -> pd.DataFrame:
    """The kit's Table 13 beside the paper's (data/paper/table13), wide by subset.

    Returns:
        strategy, task_subset, kit, paper, kit_drop, paper_drop (macro on the subset minus
        macro on all tasks: the change the ablation makes).
    """
    require(table13, ["strategy", "task_subset", "value"], "macro_ablation_beside_paper")
    paper = table13[["strategy", "task_subset", "value"]].rename(columns={"value": "paper"})
    kit = kit[["strategy", "task_subset", "macro_accuracy"]].rename(
        columns={"macro_accuracy": "kit"}
    )
    out = kit.merge(paper, on=["strategy", "task_subset"], how="outer")
    for src in ("kit", "paper"):
        base = out[out["task_subset"] == "all"].set_index("strategy")[src]
        out[f"{src}_drop"] = out[src] - out["strategy"].map(base)
    return out.sort_values(["strategy", "task_subset"]).reset_index(drop=True)


def empty_sensitivity(preds: pd.DataFrame, by: Sequence[str] = CELL) -> pd.DataFrame:
    """Accuracy with empty responses counted wrong (headline) vs excluded, per group.

    Returns:
        ``by`` + n, n_empty, acc_counted (k / n), acc_excluded (k / (n - n_empty); NaN when
        every row is empty), delta (excluded - counted).
    """
    by = list(by)
    require(preds, [*by, "correct"], "empty_sensitivity")
    ok = bool_col(preds, "correct", "empty_sensitivity")
    empty = empty_flags(preds)
    both = ok & empty
    if both.any():
        raise MetricsInputError(
            f"empty_sensitivity: an empty response is scored correct "
            f"(qid={preds.loc[both, 'qid'].iloc[0]!r})"
        )
    flags = preds[by].assign(n=1, k=ok.astype(int).to_numpy(), n_empty=empty.astype(int).to_numpy())
    out = group_counts(flags, by)
    out["acc_counted"] = out["k"] / out["n"]
    answered = out["n"] - out["n_empty"]
    out["acc_excluded"] = (out["k"] / answered).where(answered > 0)
    out["delta"] = out["acc_excluded"] - out["acc_counted"]
    return out[[*by, "n", "n_empty", "acc_counted", "acc_excluded", "delta"]]
