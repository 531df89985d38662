"""Input checks shared by the analysis builders: a frame must hold the columns a builder reads,
and labels are shown in the paper's canonical order.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


class AnalysisInputError(ValueError):
    """Raised when a frame handed to an analysis builder lacks what it needs."""


def need_columns(df: pd.DataFrame, cols: Sequence[str], fn: str) -> None:
    """Raise :class:`AnalysisInputError` naming ``fn`` when ``df`` lacks ``cols`` or is empty."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise AnalysisInputError(f"{fn}: frame lacks column(s) {missing}; has {list(df.columns)}")
    if df.empty:
        raise AnalysisInputError(f"{fn}: frame is empty")


def in_order(values: Sequence[str], canonical: Sequence[str]) -> list[str]:
    """Canonical order first, then anything else alphabetically."""
    present = list(dict.fromkeys(values))
    return [v for v in canonical if v in present] + sorted(v for v in present if v not in canonical)
