"""Failure explorer (marimo app): filter predictions by task, subtype, strategy, backbone,
setting and outcome; open one to see the question, gold, raw response, parsed answer and the
exact context the model saw with its anchor event ids highlighted (or marked absent), next to
the same question under the other strategies (paper §5 failure analysis, §3 pairing).

The kit's predictions come from deterministic offline readers, not language models.

Run: ``marimo run notebooks/apps/failure_explorer.py`` (profile from $CLINTRACE_PROFILE);
headless: ``python notebooks/apps/failure_explorer.py``.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="ClinTrace failure explorer")


@app.cell
def _():
    import marimo as mo

    import clinlib.analysis.failures as fx
    from clinlib.data import build as pipeline
    from clinlib.eval import runner
    from clinlib.core.config import resolve_profile

    return fx, mo, pipeline, resolve_profile, runner


@app.cell
def _(fx, pipeline, resolve_profile, runner):
    profile = resolve_profile()
    try:
        _preds = runner.load_predictions(profile)
        if _preds.empty:
            raise FileNotFoundError(f"run `clintrace evaluate-offline --profile {profile}`")
        data = {
            "preds": _preds,
            "questions": pipeline.load("questions", profile),
            "dialogues": pipeline.load("dialogues", profile),
            "context_fn": fx.context_fn_for(profile),
        }
        problem = ""
    except (FileNotFoundError, ValueError) as exc:
        data, problem = None, str(exc)
    return data, problem, profile


@app.cell
def _(data, mo, problem, profile):
    if data is None and mo.app_meta().mode == "script":
        print(f"failure explorer: no predictions for profile {profile!r}: {problem}")
    mo.stop(data is None, mo.md(f"**No predictions for profile `{profile}`.** {problem}"))
    preds = data["preds"]
    mo.md(
        f"# Failure explorer · profile `{profile}`\n"
        f"{len(preds)} predictions. The offline readers are deterministic policies, not "
        "language models: their failures are mostly facts missing from the representation."
    )
    return (preds,)


@app.cell
def _(fx, mo, preds):
    filters = {
        col: mo.ui.dropdown(
            options=["(all)", *fx.options_of(preds, col)], value="(all)", label=col
        )  # fmt: skip
        for col in fx.FILTER_COLUMNS
    }
    outcome = mo.ui.dropdown(options=list(fx.OUTCOMES), value="incorrect", label="outcome")
    only_flips = mo.ui.checkbox(value=False, label="only full-context→mem0 flips")
    return filters, only_flips, outcome


@app.cell
def _(filters, fx, mo, only_flips, outcome, preds):
    chosen = {c: (None if w.value == "(all)" else w.value) for c, w in filters.items()}
    rows = fx.filter_predictions(preds, outcome=outcome.value, **chosen)
    if only_flips.value and {"full-context", "mem0"} <= set(preds["strategy"]):
        fl = fx.flips(preds)
        keys = set(zip(fl["qid"], fl["backbone"], fl["setting"], strict=True))
        hit = [
            (q, b, s) in keys and st == "mem0"
            for q, b, s, st in zip(rows["qid"], rows["backbone"], rows["setting"],
                                   rows["strategy"], strict=True)
        ]  # fmt: skip
        rows = rows[hit].reset_index(drop=True)
    rows = fx.with_source(rows, preds)
    pick_opts = {fx.prediction_label(r): i for i, r in enumerate(rows.to_dict("records"))}
    pick = mo.ui.dropdown(
        options=pick_opts or {"(no match)": -1},
        value=next(iter(pick_opts)) if pick_opts else "(no match)",
        label="prediction",
    )
    return pick, rows


@app.cell
def _(data, filters, fx, mo, only_flips, outcome, pick, preds, rows):
    if pick.value is None or pick.value < 0:
        page = "<p>No prediction matches these filters.</p>"
    else:
        page = fx.explain(rows, data["questions"], int(pick.value), data["context_fn"],
                          data["dialogues"])  # fmt: skip
    view = mo.vstack(
        [
            mo.hstack(
                [filters["task"], filters["subtype"], filters["strategy"]], justify="start"
            ),  # fmt: skip
            mo.hstack(
                [filters["backbone"], filters["setting"], outcome, only_flips], justify="start"
            ),  # fmt: skip
            mo.md(f"**{len(rows)}** of {len(preds)} predictions match"),
            pick,
            mo.Html(page),
        ]
    )
    if mo.app_meta().mode == "script":
        # `python failure_explorer.py` has no browser: report what would be shown.
        print(f"failure explorer: {len(rows)} predictions match, {len(page)} characters of HTML")
    view  # noqa: B018 - a marimo cell shows its last expression
    return (page,)


if __name__ == "__main__":
    app.run()
