"""What every metric family shares: the input checks on the predictions table (docs/design.md
"The artifact contract": qid, task, strategy, backbone, ..., correct, correct_lenient,
parse_failed) and the error they raise, so bad input is named by column and qid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

CELL: tuple[str, ...] = ("strategy", "backbone")


class MetricsInputError(ValueError):
    """Raised when a predictions/questions table cannot be scored as given."""


def require(df: pd.DataFrame, cols: Sequence[str], fn: str, hint: str = "") -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        extra = f"; {hint}" if hint else ""
        raise MetricsInputError(
            f"{fn}: table lacks column(s) {missing}; it has {list(df.columns)}{extra}"
        )


def example_id(df: pd.DataFrame, mask: pd.Series | np.ndarray) -> str:
    if "qid" in df.columns:
        return f" (e.g. qid={df.loc[np.asarray(mask), 'qid'].iloc[0]!r})"
    return ""


def bool_col(df: pd.DataFrame, col: str, fn: str) -> pd.Series:
    """``df[col]`` as a plain bool Series; NA or non-boolean values are errors."""
    s = df[col]
    na = s.isna()
    if na.any():
        raise MetricsInputError(
            f"{fn}: column {col!r} has {int(na.sum())} missing value(s){example_id(df, na)}; "
            "the harness must record True/False for every prediction"
        )
    if pd.api.types.is_bool_dtype(s):
        return s.astype(bool)
    ok = s.isin([True, False, 0, 1])
    if not ok.all():
        bad = s[~ok].iloc[0]
        raise MetricsInputError(
            f"{fn}: column {col!r} must be boolean; found {bad!r}{example_id(df, ~ok)}"
        )
    return s.astype(bool)


def num_col(df: pd.DataFrame, col: str, fn: str, allow_nan: bool = False) -> pd.Series:
    s = pd.to_numeric(df[col], errors="coerce")
    bad = s.isna() & df[col].notna()
    if bad.any():
        raise MetricsInputError(
            f"{fn}: column {col!r} is not numeric: {df.loc[bad, col].iloc[0]!r}"
            f"{example_id(df, bad)}"
        )
    if not allow_nan and s.isna().any():
        raise MetricsInputError(
            f"{fn}: column {col!r} has {int(s.isna().sum())} missing value(s)"
            f"{example_id(df, s.isna())}"
        )
    if (s < 0).any():
        raise MetricsInputError(
            f"{fn}: column {col!r} has a negative value {s[s < 0].iloc[0]!r}{example_id(df, s < 0)}"
        )
    return s.astype(float)


def with_question_cols(
    preds: pd.DataFrame, questions: pd.DataFrame | None, cols: Sequence[str], fn: str
) -> pd.DataFrame:
    """Join ``cols`` missing from ``preds`` from ``questions`` on qid."""
    need = [c for c in cols if c not in preds.columns]
    if not need:
        return preds
    if questions is None:
        raise MetricsInputError(
            f"{fn}: predictions lack {need}; pass questions= (questions.parquet) to join them"
        )
    require(questions, ["qid", *need], f"{fn} (questions)")
    dup = questions["qid"].duplicated()
    if dup.any():
        raise MetricsInputError(
            f"{fn}: questions has duplicate qid {questions.loc[dup, 'qid'].iloc[0]!r}"
        )
    require(preds, ["qid"], fn)
    out = preds.merge(questions[["qid", *need]], on="qid", how="left", validate="many_to_one")
    unknown = ~preds["qid"].isin(questions["qid"]).to_numpy()
    if unknown.any():
        raise MetricsInputError(
            f"{fn}: {int(unknown.sum())} prediction(s) have a qid absent from questions, e.g. "
            f"{preds.loc[unknown, 'qid'].iloc[0]!r}"
        )
    return out


def task_rows(preds: pd.DataFrame, task: str, fn: str) -> pd.DataFrame:
    require(preds, ["task"], fn)
    # A fresh index: later steps select rows by label and must not hit duplicates.
    rows = preds[preds["task"] == task].reset_index(drop=True)
    if rows.empty:
        raise MetricsInputError(
            f"{fn}: no predictions for task {task!r}; tasks present: "
            f"{sorted(preds['task'].dropna().unique().tolist())}"
        )
    return rows


def norm_label(value: object) -> object:
    """Labels compare case- and whitespace-insensitively; missing stays None."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return None
    text = str(value).strip().lower()
    return text or None


def group_counts(flags: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    return flags.groupby(list(keys), sort=True, dropna=False).sum().reset_index()
