"""The T3 probe's shared terms (paper §5.5 "SP4"): its task, the strategies built upstream of
the question, and the error its builders raise.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

TASK = "T3"
# The strategies whose representation is built upstream of the question (§5.5): the ones the
# post-construction probe makes stale.
UPSTREAM_BUILT: tuple[str, ...] = ("structured-timeline", "llm-summary", "mem0", "a-mem")


class ProbeError(ValueError):
    """Raised when predictions, questions or an injection cannot be used by the T3 probe."""


def require_columns(df: pd.DataFrame, cols: Sequence[str], fn: str) -> None:
    """Raise :class:`ProbeError` naming ``fn`` when ``df`` lacks ``cols``."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ProbeError(f"{fn}: table lacks column(s) {missing}; it has {list(df.columns)}")
