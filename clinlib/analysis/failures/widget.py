"""Front ends of the failure explorer (paper §5.7 "Illustrative failure modes"): the
headless static view, the ipywidgets explorer for JupyterLab, and the notebook entry point
that shows both (as :mod:`clinlib.dialogue.viewer` does). The marimo app
``notebooks/apps/failure_explorer.py`` reuses the same pure renderers."""

from __future__ import annotations

import html
import os
from typing import Any

import ipywidgets as W
import pandas as pd

from clinlib.analysis.failures.common import (
    FILTER_COLUMNS,
    LOSS_LABELS,
    LOSSES,
    OUTCOMES,
    REQUIRED_COLUMNS,
    STATIC_ENV,
    ContextFn,
    require_columns,
)
from clinlib.analysis.failures.compare import flips, only_flip_rows
from clinlib.analysis.failures.selection import filter_predictions, options_of, prediction_label
from clinlib.analysis.failures.view import explain, with_source
from clinlib.core.pages import PAGE_SIZE, page_count, page_of
from clinlib.dialogue.viewer import ViewerDisplay


def static_view(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    context_fn: ContextFn | None = None,
    dialogues: pd.DataFrame | None = None,
    good: str = "full-context",
    bad: str = "mem0",
) -> str:
    """The headless rendering: counts per outcome, then the first ``good``→``bad`` flip (or
    the first incorrect prediction) explained."""
    if preds.empty:
        return "<p>No predictions to explore.</p>"
    names = set(preds["strategy"])
    fl = flips(preds, good, bad) if {good, bad} <= names else pd.DataFrame()
    counts = (
        preds.assign(correct=preds["correct"].fillna(False).astype(bool))
        .groupby("strategy")
        .agg(n=("qid", "size"), correct=("correct", "sum"), parse_failed=("parse_failed", "sum"))
        .reset_index()
    )
    parts = [
        f"<h4>Failure explorer (static view): {len(preds)} predictions, "
        f"{len(fl)} {good}→{bad} flips</h4>",
        counts.to_html(index=False),
    ]
    if len(fl):
        f0 = fl.iloc[0]
        pick = preds[
            (preds["qid"] == f0["qid"])
            & (preds["strategy"] == bad)
            & (preds["backbone"] == f0["backbone"])
            & (preds["setting"] == f0["setting"])
        ]
    else:
        pick = preds[~preds["correct"].fillna(False).astype(bool)]
    if len(pick):
        one = with_source(pick.iloc[:1].reset_index(drop=True), preds)
        parts.append(explain(one, questions, 0, context_fn, dialogues))
    return "\n".join(parts)


def _filter_widgets(preds: pd.DataFrame) -> tuple[dict[str, Any], Any, Any]:
    """The column dropdowns, the outcome picker and the "lost in" picker (enabled only when
    ``preds`` carries :func:`clinlib.analysis.evidence.lost_in`'s ``lost_in`` column)."""
    dd = {
        col: W.Dropdown(
            options=[("(all)", "")] + [(v, v) for v in options_of(preds, col)],
            value="",
            description=col,
        )
        for col in FILTER_COLUMNS
    }
    outcome = W.Dropdown(options=list(OUTCOMES), value="incorrect", description="outcome")
    lost = W.Dropdown(
        options=[(LOSS_LABELS[v], v) for v in LOSSES],
        value="any",
        description="lost in",
        disabled="lost_in" not in preds.columns,
    )
    return dd, outcome, lost


def _layout(dd: dict, toggles: dict, page, pick, count, body):
    """The explorer's box: filters in two rows, the count, the picker, the explanation."""
    row1 = W.HBox([dd["task"], dd["subtype"], dd["strategy"]])
    row2 = W.HBox([dd["backbone"], dd["setting"], *toggles.values()])
    box = W.VBox([row1, row2, count, W.HBox([page, pick]), body])
    box.controls = {
        **dd,
        **toggles,  # type: ignore
        "pick": pick,
        "page": page,
        "count": count,
        "body": body,
    }
    return box


def failure_explorer(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    context_fn: ContextFn | None = None,
    dialogues: pd.DataFrame | None = None,
    good: str = "full-context",
    bad: str = "mem0",
):
    """An ipywidgets explorer: filters, a prediction picker, the explained prediction and the
    other strategies side by side; a "flips only" toggle restricts to ``good``→``bad`` flips.

    Returns:
        ``ipywidgets.VBox`` with a ``controls`` dict (task, subtype, strategy, backbone,
        setting, outcome, lost — enabled when ``preds`` has a ``lost_in`` column
        (:func:`clinlib.analysis.evidence.lost_in`) — flips, page, pick, count, body); the
        picker lists one page of :data:`clinlib.core.pages.PAGE_SIZE` matches.
    """
    require_columns(preds, REQUIRED_COLUMNS, "predictions")
    dd, outcome, lost = _filter_widgets(preds)
    only_flips = W.Checkbox(value=False, description=f"only {good}→{bad} flips")
    pick = W.Dropdown(description="prediction", layout=W.Layout(width="80%"))
    # The picker holds one page of rows: 111,658 options would be megabytes of widget state.
    page = W.BoundedIntText(value=1, min=1, max=1, description="page", layout=W.Layout(width="15%"))
    count = W.HTML()
    body = W.HTML()
    state: dict[str, Any] = {"rows": preds.iloc[:0]}

    def _filter(_=None) -> None:
        rows = filter_predictions(
            preds,
            outcome=outcome.value,
            lost=lost.value,
            **{c: (w.value or None) for c, w in dd.items()},
        )
        if only_flips.value and {good, bad} <= set(preds["strategy"]):
            rows = only_flip_rows(rows, flips(preds, good, bad), bad)
        state["rows"] = with_source(rows, preds)
        n_pages = page_count(len(rows))
        count.value = (
            f"<b>{len(rows)}</b> of {len(preds)} predictions match "
            f"({n_pages} page(s) of {PAGE_SIZE})"
        )
        if page.value != 1:
            page.value = 1  # observed: refills the picker
        else:
            _fill()
        page.max = n_pages

    def _fill(_=None) -> None:
        rows = page_of(state["rows"], page.value - 1)
        first = (page.value - 1) * PAGE_SIZE
        pick.options = [
            (prediction_label(r), first + i) for i, r in enumerate(rows.to_dict("records"))
        ]
        pick.value = first if len(rows) else None
        _show()

    def _show(_=None) -> None:
        if pick.value is None or not len(state["rows"]):
            body.value = "<p>No prediction matches these filters.</p>"
            return
        try:
            body.value = explain(state["rows"], questions, int(pick.value), context_fn, dialogues)
        except ValueError as exc:  # show a bad artifact in the pane, not a traceback
            body.value = f"<p class='ct-bad'>{html.escape(str(exc))}</p>"

    for w in [*dd.values(), outcome, lost, only_flips]:
        w.observe(_filter, names="value")
    pick.observe(_show, names="value")
    page.observe(_fill, names="value")
    box = _layout(
        dd, {"outcome": outcome, "lost": lost, "flips": only_flips}, page, pick, count, body
    )
    _filter()
    return box


def show_failure_explorer(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    context_fn: ContextFn | None = None,
    dialogues: pd.DataFrame | None = None,
    static: bool | None = None,
) -> ViewerDisplay:
    """The notebook entry point: the widget explorer plus its static fallback.

    Args:
        preds, questions, dialogues: the artifacts.
        context_fn: rebuilds contexts (see :func:`context_fn_for`).
        static: only the static HTML (default: $CLINTRACE_STATIC_VIEWER is set).
    """
    static = bool(os.environ.get(STATIC_ENV)) if static is None else static
    html_ = static_view(preds, questions, context_fn, dialogues)
    widget = None if static else failure_explorer(preds, questions, context_fn, dialogues)
    return ViewerDisplay(widget, html_)
