"""Dialogue viewer (marimo app): read a patient's dialogue visit by visit, fact-bearing
sentences highlighted by event kind; pick an event to see the turn that carries it, or that it
was deliberately left unstated (paper §3, Fig. 2 stage 3).

Run: ``marimo run notebooks/apps/dialogue_viewer.py`` (profile from $CLINTRACE_PROFILE);
headless: ``python notebooks/apps/dialogue_viewer.py``.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="ClinTrace dialogue viewer")


@app.cell
def _():
    import marimo as mo

    import clinlib.dialogue.viewer as xd
    from clinlib.core.config import resolve_profile

    return mo, resolve_profile, xd


@app.cell
def _(resolve_profile, xd):
    profile = resolve_profile()
    try:
        data = xd.load_dialogue_artifacts(profile)
        problem = ""
    except FileNotFoundError as exc:
        data, problem = None, str(exc)
    return data, problem, profile


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
    mo.md(
        f"# Dialogue viewer · profile `{profile}`\n"
        f"{kept} of {len(summary)} dialogues kept by the verifier. Fact-bearing sentences are "
        "highlighted by event kind; hover one to see its source event."
    )
    return (summary,)


@app.cell
def _(mo, summary, xd):
    patient_opts = {label: sid for label, sid in xd.patient_options(summary)}
    patient = mo.ui.dropdown(options=patient_opts, value=next(iter(patient_opts)), label="patient")
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
    event_opts = {"(none)": ""}
    event_opts.update(dict(xd.event_options(data["event_coverage"], sid, titles)))
    event = mo.ui.dropdown(options=event_opts, value="(none)", label="event")
    show_ids = mo.ui.checkbox(value=True, label="show event ids")
    return event, show_ids, sid, titles, turns, visit


@app.cell
def _(data, event, mo, patient, show_ids, sid, titles, turns, visit, xd):
    info = xd.locate_event(data["event_coverage"], turns, event.value) if event.value else None
    shown_visits = None if visit.value == -1 else [visit.value]
    if info is not None and info["visit_idx"] is not None and shown_visits is None:
        # An event was picked: show the visit it belongs to.
        shown_visits = [int(info["visit_idx"])]
    shown = turns if show_ids.value else turns.assign(text_tagged=turns["text"])
    page = xd.dialogue_html(shown, sid, shown_visits, event.value or None, titles=titles)
    where = xd.event_html(info, titles) if info is not None else ""
    view = mo.vstack(
        [
            mo.hstack([patient, visit, show_ids], justify="start"),
            event,
            mo.Html(where),
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
