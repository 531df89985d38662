"""Metrics for the skewed-label tasks (Appendix G.1, Tables 5–6; §5.5 / Table 3): macro-F1
per cell, the majority-class baseline, and positive-class recall (T3 preservation).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from clinlib.analysis.metrics.accuracy import accuracy_table
from clinlib.analysis.metrics.common import (
    CELL,
    MetricsInputError,
    norm_label,
    require,
    task_rows,
    with_question_cols,
)


def _f1_per_label(gold: np.ndarray, pred: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    scores = []
    for lab in labels:
        tp = np.sum((gold == lab) & (pred == lab))
        fp = np.sum((gold != lab) & (pred == lab))
        fn = np.sum((gold == lab) & (pred != lab))
        denom = 2 * tp + fp + fn
        scores.append(2 * tp / denom if denom else 0.0)
    return np.asarray(scores, dtype=float)


def macro_f1(
    preds: pd.DataFrame,
    task: str,
    cell: Sequence[str] = CELL,
    labels: Sequence[str] | None = None,
    pred_col: str = "parsed",
    gold_col: str = "gold",
    questions: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Macro-F1 of parsed label vs gold per cell for a skewed task (Tables 5–6, T5 / T8).

    The average runs over the gold label set only: an unparsed or off-label prediction is
    a miss for its gold class but adds no class of its own (sklearn ``f1_score(...,
    labels=labels, average="macro")``). A label with no gold and no prediction scores 0.
    Labels compare case-/whitespace-insensitively.

    Args:
        preds: predictions; ``gold`` is joined from ``questions`` when absent.
        task: e.g. "T5" or "T8".
        cell: grouping columns.
        labels: label set; default every gold label of the task (same for every cell).
        pred_col, gold_col: parsed prediction and gold columns.
        questions: questions table for the join.

    Returns:
        ``cell`` + n, accuracy (parsed == gold), macro_f1.
    """
    cell = list(cell)
    rows = task_rows(with_question_cols(preds, questions, [gold_col], "macro_f1"), task, "macro_f1")
    require(rows, [*cell, pred_col, gold_col], "macro_f1")
    gold = rows[gold_col].map(norm_label)
    if gold.isna().any():
        raise MetricsInputError(f"macro_f1: {int(gold.isna().sum())} {task} row(s) have no gold")
    pred = rows[pred_col].map(norm_label)
    lab = sorted(set(gold)) if labels is None else [norm_label(x) for x in labels]
    records = []
    for key, idx in rows.groupby(cell, sort=True, dropna=False).groups.items():
        g = gold.loc[idx].to_numpy(object)
        p = pred.loc[idx].to_numpy(object)
        key = key if isinstance(key, tuple) else (key,)
        records.append(
            {
                **dict(zip(cell, key, strict=True)),
                "n": len(g),
                "accuracy": float(np.mean(g == p)),
                "macro_f1": float(_f1_per_label(g, p, lab).mean()),
            }
        )
    return pd.DataFrame(records)


def majority_baseline(gold: Sequence[object], labels: Sequence[str] | None = None) -> dict:
    """Accuracy and macro-F1 of always predicting the most frequent gold label.

    The paper's trivial baselines: T5 0.919 accuracy / 0.478 macro-F1 (455 vs 40; exact
    value 0.4789), T8 0.247 macro-F1 (§3, Tables 5–6).

    Returns:
        dict with label, accuracy, macro_f1.
    """
    g = np.asarray([norm_label(x) for x in gold], dtype=object)
    if g.size == 0 or any(x is None for x in g):
        raise MetricsInputError("majority_baseline: gold must be non-empty with no missing labels")
    values, counts = np.unique(g.astype(str), return_counts=True)
    top = str(values[np.argmax(counts)])
    lab = sorted(set(g)) if labels is None else [norm_label(x) for x in labels]
    pred = np.full(g.size, top, dtype=object)
    return {
        "label": top,
        "accuracy": float(np.mean(g == pred)),
        "macro_f1": float(_f1_per_label(g, pred, lab).mean()),
    }


def positive_recall(
    preds: pd.DataFrame,
    task: str = "T3",
    positive: str = "yes",
    cell: Sequence[str] = ("strategy", "backbone", "setting"),
    correct_col: str = "correct",
    gold_col: str = "gold",
    questions: pd.DataFrame | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Positive-class recall on the injected positives (Table 3, §5.5 equal-input probe).

    Args:
        preds: predictions; ``gold`` is joined from ``questions`` when absent.
        task: the probe task.
        positive: gold label of the injected positives.
        cell: grouping columns (default includes ``setting``: pre vs post injection).
        correct_col: correctness column; on a gold-positive row correct == recalled.
        gold_col, questions: as in :func:`macro_f1`.
        alpha: 1 - confidence level of the Wilson CI.

    Returns:
        ``cell`` + n_pos, k, recall, ci_low, ci_high.
    """
    cell = list(cell)
    rows = task_rows(
        with_question_cols(preds, questions, [gold_col], "positive_recall"),
        task,
        "positive_recall",
    )
    pos = rows[rows[gold_col].map(norm_label) == norm_label(positive)]
    if pos.empty:
        raise MetricsInputError(f"positive_recall: no {task} rows with gold {positive!r}")
    out = accuracy_table(pos, by=cell, correct_col=correct_col, alpha=alpha)
    return out.rename(columns={"n": "n_pos", "accuracy": "recall"})
