"""Failure explorer (marimo app): filter predictions by task, subtype, strategy, backbone,
setting and outcome, and by where a wrong answer was lost ("lost in representation": an anchor
event missing from the context; "lost in reading": every anchor in context, still wrong —
clinlib.analysis.evidence, read from the `evidence` stage on first use); pick one in a paginated table to see the question, gold, raw response,
parsed answer and the exact context the model saw with its anchor event ids highlighted (or
marked absent), next to the same question under the other strategies (paper §5 failure
analysis, §3 pairing).

Sized for the paper profile (111,658 predictions): the table sends one page of
``explore_pages.PAGE_SIZE`` rows at a time and every output stays under
``explore_pages.OUTPUT_BUDGET_BYTES`` (checked by tests/core/test_app_budget.py and measured in a
browser by ``make bench-apps``). The kit's predictions come from deterministic offline
readers, not language models.

Run: ``make app-failures`` or ``marimo run notebooks/apps/failure_explorer.py`` (profile from
$CLINTRACE_PROFILE); headless: ``python notebooks/apps/failure_explorer.py``.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="ClinTrace failure explorer")


@app.cell
def _():
    import marimo as mo

    from clinlib import resolve_profile

    return mo, resolve_profile


@app.cell
def _(mo, resolve_profile):
    profile = resolve_profile()
    # Painted before the predictions load, so the page shows something at once.
    mo.md(
        f"# Failure explorer · profile `{profile}`\n"
        "The offline readers are deterministic policies, not language models: their failures "
        "are mostly facts missing from the representation. Pick a row to open it."
    )
    return (profile,)


@app.cell
def _():
    # The heavy imports (pandas, altair) run after the title cell has painted.
    from clinlib import evidence, evidence_stage, load, runner
    from clinlib import failures as fx
    from clinlib import pages as xp

    return evidence, evidence_stage, fx, load, runner, xp


@app.cell
def _(fx, load, profile, runner):
    try:
        _preds = runner.load_predictions(profile)
        if _preds.empty:
            raise FileNotFoundError(f"run `clintrace evaluate-offline --profile {profile}`")
        data = {
            "preds": _preds,
            "questions": load("questions", profile),
            "dialogues": load("dialogues", profile),
            "context_fn": fx.context_fn_for(profile),
        }
        problem = ""
    except (FileNotFoundError, ValueError) as exc:
        data, problem = None, str(exc)
    return data, problem


@app.cell
def _(data, fx, mo, problem, profile):
    if data is None and mo.app_meta().mode == "script":
        print(f"failure explorer: no predictions for profile {profile!r}: {problem}")
    mo.stop(data is None, mo.md(f"**No predictions for profile `{profile}`.** {problem}"))
    preds = data["preds"]
    # mo.ui.dictionary, not a plain dict: marimo only reacts to UI elements bound to globals
    # (in a plain dict the dropdowns rendered but changing one re-ran nothing).
    filters = mo.ui.dictionary({
        col: mo.ui.dropdown(options=["(all)", *fx.options_of(preds, col)], value="(all)", label=col)
        for col in fx.FILTER_COLUMNS
    })  # fmt: skip
    outcome = mo.ui.dropdown(options=list(fx.OUTCOMES), value="incorrect", label="outcome")
    lost = mo.ui.dropdown(options={fx.LOSS_LABELS[v]: v for v in fx.LOSSES}, value="any",
                          label="lost in")  # fmt: skip
    only_flips = mo.ui.checkbox(value=False, label="only full-context→mem0 flips")
    return filters, lost, only_flips, outcome, preds


@app.cell
def _(data, evidence, evidence_stage, profile):
    _memo = {}

    def labelled(frame):
        """``frame`` with ``lost_in``, on the first "lost in" filter: from the evidence
        stage's recall (`clintrace evidence`, the artifact notebooks 05 and 13 read); a build
        made before that stage measures it here (every strategy's contexts: slow on paper)."""
        if "lost_in" in frame.columns:
            return frame
        if "v" not in _memo:
            try:
                _memo["v"] = evidence_stage.stage_losses(frame, data["questions"], profile)[0]
            except evidence_stage.StageError:
                _memo["v"] = evidence.label_losses(frame, data["questions"], profile)[0]
        return _memo["v"]

    return (labelled,)


@app.cell
def _(filters, fx, labelled, lost, mo, only_flips, outcome, preds, xp):
    chosen = {c: (None if v == "(all)" else v) for c, v in filters.value.items()}
    _source = preds if lost.value == "any" else labelled(preds)
    rows = fx.filter_predictions(_source, outcome=outcome.value, lost=lost.value, **chosen)
    if only_flips.value and {"full-context", "mem0"} <= set(preds["strategy"]):
        rows = fx.only_flip_rows(rows, fx.flips(preds), bad="mem0")
    rows = fx.with_source(rows, preds)
    # One page at a time: the browser never receives more than PAGE_SIZE rows of the table.
    table = mo.ui.table(
        xp.failure_table(rows),
        selection="single",
        initial_selection=[0] if len(rows) else None,
        page_size=xp.PAGE_SIZE,
        show_column_summaries=False,
        label="predictions",
    )
    mo.vstack(
        [
            mo.hstack(
                [filters["task"], filters["subtype"], filters["strategy"]], justify="start"
            ),  # fmt: skip
            mo.hstack(
                [filters["backbone"], filters["setting"], outcome, lost, only_flips],
                justify="start",
            ),  # fmt: skip
            mo.md(f"**{len(rows)}** of {len(preds)} predictions match"),
            table,
        ]
    )
    return rows, table


@app.cell
def _(data, fx, mo, rows, table):
    _sel = table.value
    if len(rows) == 0:
        page = "<p>No prediction matches these filters.</p>"
    elif _sel is None or len(_sel) == 0:
        page = "<p>Select a row of the table to open that prediction.</p>"
    else:
        page = fx.explain(rows, data["questions"], int(_sel["row"].iloc[0]), data["context_fn"],
                          data["dialogues"])  # fmt: skip
    if mo.app_meta().mode == "script":
        # `python failure_explorer.py` has no browser: report what would be shown.
        print(f"failure explorer: {len(rows)} predictions match, {len(page)} characters of HTML")
    mo.Html(page)
    return (page,)


if __name__ == "__main__":
    app.run()
