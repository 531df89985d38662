"""Shared pieces of the failure explorer (paper §5.7 "Illustrative failure modes"): the
prediction columns it needs, the anchor-tag pattern and messages, the HTML style, the error
type, and the small helpers every part uses (docs/design.md "Explorers")."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from clinlib.strategies.evidence import TAG_RE as TAG_RE  # the one matcher, re-exported

FILTER_COLUMNS: tuple[str, ...] = ("task", "subtype", "strategy", "backbone", "setting")
# "error": the request failed (any class); "context-overflow": the prompt did not fit the
# backbone's context window (recorded without being sent, or refused by the server).
OUTCOMES: tuple[str, ...] = (
    "any",
    "correct",
    "incorrect",
    "parse-failed",
    "error",
    "context-overflow",
)
# Where a wrong answer was lost (clinlib.analysis.evidence.lost_in): needs a ``lost_in`` column.
LOSSES: tuple[str, ...] = ("any", "representation", "reading")
LOSS_LABELS: dict[str, str] = {
    "any": "any",
    "representation": "lost in representation",
    "reading": "lost in reading",
}
REQUIRED_COLUMNS: tuple[str, ...] = (
    "qid",
    "task",
    "subtype",
    "strategy",
    "backbone",
    "setting",
    "response",
    "parsed",
    "correct",
    "parse_failed",
)
FLIP_COLUMNS: tuple[str, ...] = (
    "qid",
    "task",
    "subtype",
    "backbone",
    "setting",
    "good",
    "bad",
    "parsed_good",
    "parsed_bad",
    "response_bad",
)
STATIC_ENV = "CLINTRACE_STATIC_VIEWER"
ANCHOR_COLOR = "#d62728"
NO_ANCHOR_TEXT = (
    "This question has no anchor event: the fact is absent from the record by construction, "
    "so the correct answer is an abstention."
)
ABSENT_TEXT = (
    "Anchor event(s) {ids} are ABSENT from this representation: the model could not have "
    "read the answer here."
)
PRESENT_TEXT = "Anchor event(s) {ids} present in this representation ({n} mention(s))."
NO_CONTEXT_TEXT = "Empty context (this strategy shows the model no history)."
CSS = (
    "<style>.ct-fx{font-family:DejaVu Sans,sans-serif;font-size:13px;line-height:1.45}"
    ".ct-fx pre{white-space:pre-wrap;max-height:420px;overflow:auto;background:#fafafa;"
    "border:1px solid #ddd;padding:6px;font-size:12px}.ct-fx table{border-collapse:collapse}"
    ".ct-fx td,.ct-fx th{border:1px solid #ddd;padding:2px 6px;font-size:12px}"
    ".ct-anchor{background:#d6272833;border-bottom:2px solid #d62728;font-weight:bold}"
    ".ct-ok{color:#2ca02c}.ct-bad{color:#d62728}</style>"
)


class FailureExplorerError(ValueError):
    """Predictions / questions given to the failure explorer are unusable (names the column
    or value)."""


# ``fn(questions_subset, strategy, setting) -> contexts`` (see ``context_fn_for``).
ContextFn = Callable[[pd.DataFrame, str, str], pd.DataFrame]


def require_columns(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    """Raise :class:`FailureExplorerError` naming the columns ``df`` lacks."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise FailureExplorerError(f"{what} lacks column(s) {missing}; has {list(df.columns)}")


def as_list(value: Any) -> list:
    """A filter value or a list-valued artifact cell as a list (None -> [], str -> [str])."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        return [v for v in value if v is not None]
    except TypeError:
        return [value]


def verdict_mark(ok: Any) -> str:
    """A verdict cell as a check mark, a cross, or a dash when unknown."""
    if pd.isna(ok):
        return "—"
    return '<b class="ct-ok">✔</b>' if bool(ok) else '<b class="ct-bad">✘</b>'
