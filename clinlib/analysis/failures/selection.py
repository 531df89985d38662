"""Filtering predictions for the failure explorer (paper §5.7 "Illustrative failure modes"): by task, subtype, strategy, backbone, setting and outcome; the picker's options and
labels; and how many predictions a notebook still has to run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.analysis.failures.common import (
    LOSSES,
    OUTCOMES,
    REQUIRED_COLUMNS,
    FailureExplorerError,
    as_list,
    require_columns,
)
from clinlib.eval.harness.outcomes import CONTEXT_OVERFLOW_CLASS, failure_classes
from clinlib.eval.harness.runner import setting_questions


def filter_predictions(
    preds: pd.DataFrame,
    task: str | Sequence[str] | None = None,
    subtype: str | Sequence[str] | None = None,
    strategy: str | Sequence[str] | None = None,
    backbone: str | Sequence[str] | None = None,
    setting: str | Sequence[str] | None = None,
    outcome: str = "any",
    lost: str = "any",
) -> pd.DataFrame:
    """Predictions matching every given filter.

    Args:
        preds: predictions (``runner.load_predictions``).
        task, subtype, strategy, backbone, setting: one value or several (None = all).
        outcome: ``any``, ``correct``, ``incorrect``, ``parse-failed``, ``error`` (the
            request failed) or ``context-overflow`` (the prompt did not fit the window).
        lost: ``any``, ``representation`` (wrong, an anchor missing from the context) or
            ``reading`` (wrong, every anchor in the context) — needs the ``lost_in`` column
            of :func:`clinlib.analysis.evidence.lost_in`.

    Returns:
        The matching rows (index reset), ordered by task, qid, strategy, backbone, setting.

    Raises:
        FailureExplorerError: a missing column, an unknown outcome, or a filter value that
            never occurs in its column.
    """
    require_columns(preds, REQUIRED_COLUMNS, "predictions")
    if outcome not in OUTCOMES:
        raise FailureExplorerError(f"outcome {outcome!r} not one of {OUTCOMES}")
    if lost not in LOSSES:
        raise FailureExplorerError(f"lost {lost!r} not one of {LOSSES}")
    if lost != "any":
        require_columns(preds, ("lost_in",), "predictions (label them with evidence.lost_in)")
    mask = pd.Series(True, index=preds.index)
    given = dict(task=task, subtype=subtype, strategy=strategy, backbone=backbone, setting=setting)
    for col, value in given.items():
        wanted = as_list(value)
        if not wanted:
            continue
        known = set(preds[col].dropna().astype(str))
        unknown = [v for v in wanted if str(v) not in known]
        if unknown:
            raise FailureExplorerError(
                f"{col} value(s) {unknown} do not occur in the predictions; known: {sorted(known)}"
            )
        mask &= preds[col].astype(str).isin([str(v) for v in wanted]).fillna(False)
    correct = preds["correct"].fillna(False).astype(bool)
    if outcome == "correct":
        mask &= correct
    elif outcome == "incorrect":
        mask &= ~correct
    elif outcome == "parse-failed":
        mask &= preds["parse_failed"].fillna(False).astype(bool)
    elif outcome in ("error", "context-overflow"):
        errors = preds["error"].notna() if "error" in preds else pd.Series(False, preds.index)
        if outcome == "context-overflow":
            errors &= failure_classes(preds) == CONTEXT_OVERFLOW_CLASS
        mask &= errors.astype(bool)
    if lost != "any":
        mask &= (preds["lost_in"] == lost).fillna(False)
    out = preds[mask.astype(bool)]
    return out.sort_values(["task", "qid", "strategy", "backbone", "setting"]).reset_index(
        drop=True
    )


def missing_predictions(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    strategies: Sequence[str],
    backbones: Sequence[str],
    settings: Sequence[str],
) -> int:
    """How many (qid, strategy, backbone, setting) predictions are still missing — a cheap
    check so a notebook only calls ``runner.run`` (which rebuilds every context before it
    skips done keys) when there is work to do."""
    require_columns(preds, ("qid", "strategy", "backbone", "setting"), "predictions")
    done = set(
        zip(preds["qid"], preds["strategy"], preds["backbone"], preds["setting"], strict=True)
    )
    want = {
        (q, s, b, st)
        for st in settings
        for q in setting_questions(questions, st)["qid"]
        for s in strategies
        for b in backbones
    }
    return len(want - done)


def options_of(preds: pd.DataFrame, col: str) -> list[str]:
    """Sorted distinct values of a filter column."""
    return sorted(str(v) for v in preds[col].dropna().unique())


def prediction_label(row: Mapping[str, Any]) -> str:
    """A picker label for one prediction."""
    mark = "✔" if row["correct"] else ("⚠" if row["parse_failed"] else "✘")
    return (
        f"{mark} {row['qid']} · {row['strategy']} · {row['backbone']} · {row['setting']} · "
        f"{str(row['parsed'])[:40]}"
    )
