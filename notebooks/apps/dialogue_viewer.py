"""Dialogue viewer (marimo app): read a patient's dialogue visit by visit, fact-bearing
sentences highlighted by event kind; pick an event in a paginated table to see the turn that
carries it, or that it was deliberately left unstated (paper §3, Fig. 2 stage 3).

Sized for the paper profile (patients with thousands of events): the event table sends one
page at a time and a dialogue longer than ``explore_pages.OUTPUT_BUDGET_BYTES`` shows its
first visits with a note to pick one (checked by tests/core/test_app_budget.py, measured in a
browser by ``make bench-apps``).

Run: ``make app-dialogues`` or ``marimo run notebooks/apps/dialogue_viewer.py`` (profile from
$CLINTRACE_PROFILE); headless: ``python notebooks/apps/dialogue_viewer.py``.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="ClinTrace dialogue viewer")


@app.cell
def _():
    import marimo as mo

    from clinlib import resolve_profile

    return mo, resolve_profile


@app.cell
def _(mo, resolve_profile):
    profile = resolve_profile()
    # Painted before the artifacts load, so the page shows something at once.
    mo.md(
        f"# Dialogue viewer · profile `{profile}`\n"
        "Fact-bearing sentences are highlighted by event kind; hover one to see its source "
        "event. Pick an event in the table to find the turn that states it."
    )
    return (profile,)


@app.cell
def _():
    # The heavy imports (pandas, altair) run after the title cell has painted.
    from clinlib import dialogue_viewer as xd
    from clinlib import pages as xp

    return xd, xp


@app.cell
def _(profile, xd):
    try:
        data = xd.load_dialogue_artifacts(profile)
        problem = ""
    except FileNotFoundError as exc:
        data, problem = None, str(exc)
    return data, problem


@app.cell
def _(data, mo, problem, profile):
    if data is None and mo.app_meta().mode == "script":
        print(f"dialogue viewer: no dialogue artifacts for profile {profile!r}: {problem}")
    mo.stop(
        data is None,
        mo.md(f"**No dialogue artifacts for profile `{profile}`.** {problem}"),
    )
    summary = data["dialogue_summary"]
    kept = int(summary["kept"].sum())
    mo.md(f"{kept} of {len(summary)} dialogues kept by the verifier.")
    return (summary,)


@app.cell
def _(mo, summary, xd):
    patient_opts = {label: sid for label, sid in xd.patient_options(summary)}
    patient = mo.ui.dropdown(
        options=patient_opts, value=next(iter(patient_opts)), label="patient", searchable=True
    )
    return (patient,)


@app.cell
def _(data, mo, patient, xd):
    sid = patient.value
    turns = data["dialogues"]
    events = data["events"]
    titles = xd.event_titles(events[events["subject_id"] == sid])
    visits = sorted(int(v) for v in turns.loc[turns["subject_id"] == sid, "visit_idx"].unique())
    visit = mo.ui.dropdown(
        options={"all visits": -1, **{f"visit {v + 1}": v for v in visits}},
        value="all visits",
        label="visit",
    )
    show_ids = mo.ui.checkbox(value=True, label="show event ids")
    return show_ids, sid, titles, turns, visit


@app.cell
def _(data, mo, patient, show_ids, sid, titles, visit, xd, xp):
    # Paginated: a patient can have thousands of events (a dropdown of them was ~400 kB).
    event_table = mo.ui.table(
        xd.event_table(
            data["event_coverage"], sid, titles, None if visit.value == -1 else visit.value
        ),
        selection="single",
        page_size=xp.PAGE_SIZE,
        show_column_summaries=False,
        label="events (select one to find its turn)",
    )
    mo.vstack([mo.hstack([patient, visit, show_ids], justify="start"), event_table])
    return (event_table,)


@app.cell
def _(data, event_table, mo, show_ids, sid, titles, turns, visit, xd, xp):
    _sel = event_table.value
    event = str(_sel["event_id"].iloc[0]) if _sel is not None and len(_sel) else ""
    info = xd.locate_event(data["event_coverage"], turns, event) if event else None
    shown_visits = None if visit.value == -1 else [visit.value]
    if info is not None and info["visit_idx"] is not None and shown_visits is None:
        # An event was picked: show the visit it belongs to.
        shown_visits = [int(info["visit_idx"])]
    shown = turns if show_ids.value else turns.assign(text_tagged=turns["text"])
    # Keep room for the event note and the verifier checks under the cell budget.
    page, _kept = xd.dialogue_html_within(
        shown, sid, xp.OUTPUT_BUDGET_BYTES - 50_000, shown_visits, event or None, titles=titles
    )
    _all = len(shown_visits) if shown_visits is not None else turns.loc[
        turns["subject_id"] == sid, "visit_idx"].nunique()  # fmt: skip
    note = (
        f"<p><b>Showing visits {_kept[0] + 1}–{_kept[-1] + 1} of {_all}</b>: this patient's "
        "whole dialogue is too long for one page; pick a visit above.</p>"
        if len(_kept) < _all
        else ""
    )
    where = xd.event_html(info, titles) if info is not None else ""
    view = mo.vstack(
        [
            mo.Html(where + note),
            mo.Html(page),
            mo.accordion(
                {"verifier checks": mo.Html(xd.checks_html(data["dialogue_checks"], sid))}
            ),
        ]
    )
    if mo.app_meta().mode == "script":
        # `python dialogue_viewer.py` has no browser: report what would be shown.
        print(f"dialogue viewer: patient {sid}, {len(page)} characters of HTML")
    view  # noqa: B018 - a marimo cell shows its last expression
    return (page,)


if __name__ == "__main__":
    app.run()
