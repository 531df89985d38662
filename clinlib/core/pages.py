"""Size budgets and paging for the interactive explorers (the failure explorer and dialogue
viewer marimo apps, notebook 13's ipywidgets explorer), so they stay usable on the paper
profile (111,658 predictions, patients with thousands of events): tables send one page at a
time, long contexts are clipped around their anchors, and no single output exceeds
:data:`OUTPUT_BUDGET_BYTES` (paper §5 failure analysis is read one failure at a time).

Pure functions only; the front ends live in :mod:`clinlib.analysis.failures`,
:mod:`clinlib.dialogue.viewer` and ``notebooks/apps/``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

# The largest single cell output (HTML / UI element payload) an explorer may send, in bytes.
# marimo refuses outputs over ~5 MB; a few hundred kB keeps a cell quick to paint on 2 cores.
OUTPUT_BUDGET_BYTES = 300_000
# Rows per table page: every table sends only its current page to the browser.
PAGE_SIZE = 20
# A context up to this many characters is shown whole; a longer one is clipped to windows of
# CONTEXT_WINDOW characters around each anchor mention (plus its head), so a full-context
# history of a long-stay patient cannot blow the budget.
CONTEXT_CHARS = 60_000
CONTEXT_WINDOW = 2_000
# Longest parsed answer shown in a table cell (the full answer is in the opened card).
CELL_CHARS = 60
ELIDED = "\n… {n:,} characters not shown …\n"
TABLE_COLUMNS: tuple[str, ...] = (
    "row",
    "outcome",
    "qid",
    "task",
    "subtype",
    "strategy",
    "backbone",
    "setting",
    "parsed",
)


def page_count(n_rows: int, size: int = PAGE_SIZE) -> int:
    """Pages needed for ``n_rows`` rows (at least one, so an empty table still has page 1)."""
    if size < 1:
        raise ValueError(f"page size must be >= 1, got {size}")
    return max(1, -(-int(n_rows) // size))


def page_of(rows: pd.DataFrame, number: int, size: int = PAGE_SIZE) -> pd.DataFrame:
    """Rows of page ``number`` (0-based, clamped to the last page)."""
    last = page_count(len(rows), size) - 1
    number = min(max(0, int(number)), last)
    return rows.iloc[number * size : (number + 1) * size]


def failure_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The narrow frame behind the failure explorer's table: one line per prediction with its
    position in ``rows`` (``row``), an outcome word and the parsed answer cut to
    :data:`CELL_CHARS`; the wide columns (response, context) stay on the server."""
    correct = rows["correct"].fillna(False).astype(bool)
    failed = rows["parse_failed"].fillna(False).astype(bool)
    outcome = pd.Series("incorrect", index=rows.index, dtype=object)
    outcome[failed] = "parse-failed"
    outcome[correct] = "correct"
    parsed = rows["parsed"].astype(str)
    long = parsed.str.len() > CELL_CHARS
    parsed = parsed.where(~long, parsed.str.slice(0, CELL_CHARS - 1) + "…")
    out = pd.DataFrame(
        {
            "row": range(len(rows)),
            "outcome": outcome.to_numpy(),
            **{c: rows[c].astype(str).to_numpy() for c in TABLE_COLUMNS[2:-1]},
            "parsed": parsed.to_numpy(),
        }
    )
    return out[list(TABLE_COLUMNS)]


def mention_spans(context: str, anchors: Sequence[str], window: int) -> list[tuple[int, int]]:
    spans = []
    for aid in anchors:
        # an id followed by a digit/dash is a different id (LAB-1 vs LAB-12, RX-2 vs RX-2-3)
        for m in re.finditer(re.escape(str(aid)) + r"(?![\d-])", context):
            spans.append((max(0, m.start() - window), min(len(context), m.end() + window)))
    return spans


def _cut_to_line(context: str, start: int, end: int) -> tuple[int, int]:
    # widen to whole lines so a window never splits an [EVENT-ID] tag or a sentence
    s = context.rfind("\n", 0, start) + 1 if start > 0 else 0
    e = context.find("\n", end)
    return s, len(context) if e < 0 else e


def clip_context(
    context: str,
    anchors: Sequence[str] = (),
    limit: int = CONTEXT_CHARS,
    window: int = CONTEXT_WINDOW,
) -> tuple[str, int]:
    """A context short enough to show: whole if it has at most ``limit`` characters, else its
    head plus the lines within ``window`` characters of each anchor mention (merged, in order,
    at most ``limit`` characters kept), gaps marked with :data:`ELIDED`.

    Returns:
        (text to show, number of characters left out).
    """
    if len(context) <= limit:
        return context, 0
    spans = [(0, window), *mention_spans(context, anchors, window)]
    merged: list[list[int]] = []
    for s, e in sorted(_cut_to_line(context, s, e) for s, e in spans):
        if merged and s <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    parts, kept, pos = [], 0, 0
    for s, e in merged:
        e = min(e, s + (limit - kept))
        if e <= s:
            break
        if s > pos:
            parts.append(ELIDED.format(n=s - pos))
        parts.append(context[s:e])
        kept += e - s
        pos = e
    if pos < len(context):
        parts.append(ELIDED.format(n=len(context) - pos))
    return "".join(parts), len(context) - kept


def output_bytes(output: Any) -> int:
    """Size in bytes of one cell output as marimo sends it: an ``Html`` / UI element's
    ``.text`` (a UI element's text carries its serialised arguments, e.g. a table's page),
    else ``str()``; None counts 0."""
    if output is None:
        return 0
    text = getattr(output, "text", None)
    return len((text if isinstance(text, str) else str(output)).encode())


def over_budget(outputs: Sequence[Any], budget: int = OUTPUT_BUDGET_BYTES) -> list[int]:
    """Sizes of the outputs larger than ``budget`` (empty = every output fits)."""
    return [n for n in map(output_bytes, outputs) if n > budget]
