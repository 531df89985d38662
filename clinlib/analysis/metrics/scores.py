"""Graded-score tables: the mean ``score`` per group with a bootstrap CI (LongMedBench Table 3
reports mean Kendall's tau per subtask; docs/design.md "Extended question set").

The paper's metrics average the boolean ``correct`` (:mod:`.accuracy`); an extended task such
as T10 is scored on a graded scale (Kendall's tau in [-1, 1]), which a proportion with a
Wilson interval cannot summarise. :func:`score_table` averages the harness's ``score`` column
(``score_lenient`` for the lenient parser) per group: for an accuracy task the mean score IS
its accuracy (scores are 1.0 / 0.0), so one table can hold both kinds of task side by side;
prediction parts written before scores existed fall back to ``correct`` as 1 / 0. Parse
failures score 0 (chance level for tau) and are also counted separately, since for an
ordering task a high failure rate and a low tau mean different things.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from clinlib.analysis.metrics.common import MetricsInputError, require
from clinlib.analysis.stats.question import bootstrap_ci
from clinlib.eval.harness.store import row_scores

SCORE_COLUMNS: dict[bool, tuple[str, str]] = {
    False: ("score", "correct"),
    True: ("score_lenient", "correct_lenient"),
}


def graded_scores(preds: pd.DataFrame, lenient: bool = False) -> pd.Series:
    """Each prediction's graded score (``score`` / ``score_lenient``, else ``correct`` as
    1.0 / 0.0 where the score is missing; :func:`clinlib.eval.harness.store.row_scores`)."""
    require(preds, [SCORE_COLUMNS[lenient][1]], "graded_scores")
    return row_scores(preds, lenient)


def score_table(
    preds: pd.DataFrame,
    by: Sequence[str] = ("strategy", "backbone", "task"),
    lenient: bool = False,
    alpha: float = 0.05,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Mean graded score with a seeded percentile-bootstrap CI per group.

    Args:
        preds: predictions table (e.g. ``load_predictions(profile, extended=True)``).
        by: grouping columns (e.g. add ``subtype`` for T10's three subtasks).
        lenient: average ``score_lenient`` instead of ``score``.
        alpha: 1 - confidence level.
        n_boot: bootstrap resamples (0: no CI columns).
        seed: bootstrap seed (the same in every group).

    Returns:
        ``by`` columns + n, mean_score, parse_failure_rate (+ ci_low, ci_high).
    """
    by = list(by)
    require(preds, [*by, "parse_failed"], "score_table")
    if preds.empty:
        raise MetricsInputError("score_table: predictions table is empty")
    frame = preds[by].assign(
        _s=graded_scores(preds, lenient).to_numpy(),
        _pf=preds["parse_failed"].astype(bool).to_numpy(),
    )
    groups = frame.groupby(by, sort=True, dropna=False)
    out = groups.agg(
        n=("_s", "size"), mean_score=("_s", "mean"), parse_failure_rate=("_pf", "mean")
    )
    out = out.reset_index()
    if n_boot > 0:
        bounds = [
            bootstrap_ci(g["_s"].to_numpy(float), np.mean, n_boot, alpha, seed) for _, g in groups
        ]
        out["ci_low"] = [b[0] for b in bounds]
        out["ci_high"] = [b[1] for b in bounds]
    return out
