"""Failure explorer: filter predictions, open one, and see why it failed — the question, gold,
raw response, parsed answer, the exact context the model saw with the anchor event ids
highlighted (or marked absent from that representation), the same question under the other
strategies, and the paired "flips" (right under one strategy, wrong under another); predictions
labelled by :func:`clinlib.analysis.evidence.lost_in` filter by where a wrong answer was lost
("lost in representation" vs "lost in reading"). Implements
the paper's failure analysis (§5.7 "Illustrative failure modes", the compression-loss
discussion behind Table 2 / Fig. 3, and the McNemar pairing of §3).

Parts: :mod:`.selection` (filters, picker labels), :mod:`.view` (one opened failure: context,
anchors, highlighting, side by side), :mod:`.compare` (flips, flip table and chart) and
:mod:`.widget` (front ends); :mod:`.common` holds the shared constants and helpers.

Three front ends share the same pure renderers (as :mod:`clinlib.dialogue.viewer` does):

- :func:`failure_explorer` — an ipywidgets explorer for JupyterLab;
- :func:`show_failure_explorer` — that explorer plus a static HTML rendering in the same
  output, so a notebook run headless (nbmake) still shows a readable failure;
- ``notebooks/apps/failure_explorer.py`` — the same explorer as a marimo app.
"""

from clinlib.analysis.failures.common import (
    ABSENT_TEXT,
    ANCHOR_COLOR,
    FILTER_COLUMNS,
    FLIP_COLUMNS,
    LOSS_LABELS,
    LOSSES,
    NO_ANCHOR_TEXT,
    NO_CONTEXT_TEXT,
    OUTCOMES,
    PRESENT_TEXT,
    REQUIRED_COLUMNS,
    STATIC_ENV,
    TAG_RE,
    ContextFn,
    FailureExplorerError,
)
from clinlib.analysis.failures.compare import (
    flip_table,
    flips,
    flips_chart,
    kind_counts,
    only_flip_rows,
)
from clinlib.analysis.failures.selection import (
    filter_predictions,
    missing_predictions,
    options_of,
    prediction_label,
)
from clinlib.analysis.failures.view import (
    anchor_ids,
    anchor_message,
    anchor_presence,
    anchors_in_context,
    context_fn_for,
    context_of,
    evidence_turns_html,
    explain,
    highlight_context,
    prediction_html,
    preds_all,
    question_row,
    side_by_side,
    side_by_side_html,
    with_source,
)
from clinlib.analysis.failures.widget import failure_explorer, show_failure_explorer, static_view

__all__ = [
    "ABSENT_TEXT",
    "ANCHOR_COLOR",
    "FILTER_COLUMNS",
    "FLIP_COLUMNS",
    "LOSSES",
    "LOSS_LABELS",
    "NO_ANCHOR_TEXT",
    "NO_CONTEXT_TEXT",
    "OUTCOMES",
    "PRESENT_TEXT",
    "REQUIRED_COLUMNS",
    "STATIC_ENV",
    "TAG_RE",
    "ContextFn",
    "FailureExplorerError",
    "anchor_ids",
    "anchor_message",
    "anchor_presence",
    "anchors_in_context",
    "context_fn_for",
    "context_of",
    "evidence_turns_html",
    "explain",
    "failure_explorer",
    "filter_predictions",
    "flip_table",
    "flips",
    "flips_chart",
    "highlight_context",
    "kind_counts",
    "missing_predictions",
    "only_flip_rows",
    "options_of",
    "prediction_html",
    "prediction_label",
    "preds_all",
    "question_row",
    "show_failure_explorer",
    "side_by_side",
    "side_by_side_html",
    "static_view",
    "with_source",
]
