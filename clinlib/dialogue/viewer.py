"""Dialogue inspection: read a patient's dialogue visit by visit with every fact-bearing
sentence highlighted by event kind, and find the turn that carries an event — or see that it
was deliberately left unstated (paper §3 dialogue construction, Fig. 2 stage 3, Appendix C.1).

Three front ends share the same pure HTML renderers:

- :func:`dialogue_viewer` — an ipywidgets viewer for JupyterLab (patient, visit and event
  pickers);
- :func:`show_dialogue_viewer` — displays that viewer with a static HTML rendering in the same
  output, so a notebook run headless (nbmake, nbconvert) still shows a readable dialogue;
- ``notebooks/apps/dialogue_viewer.py`` — the same viewer as a marimo app.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable, Mapping
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from clinlib.core.config import artifact_path, resolve_profile
from clinlib.core.io import read_artifact
from clinlib.core.plots import PALETTE
from clinlib.dialogue.fields import present, records
from clinlib.dialogue.matching import tagged_sentences
from clinlib.dialogue.render import SPEAKER_PREFIX, VISIT_HEADER
from clinlib.dialogue.stats import PAPER_DIALOGUE_STATS

KIND_COLORS: dict[str, str] = {
    "admission": PALETTE[0],
    "discharge": PALETTE[5],
    "lab": PALETTE[1],
    "medication": PALETTE[2],
    "diagnosis": PALETTE[3],
    "procedure": PALETTE[4],
}
PREFIX_KIND: dict[str, str] = {
    "ADM": "admission",
    "DIS": "discharge",
    "LAB": "lab",
    "RX": "medication",
    "DX": "diagnosis",
    "PX": "procedure",
}
STATUS_TEXT = {
    "covered": "stated in turn {turn_idx} (visit {visit}, {speaker})",
    "missed": "deliberately left unstated — an abstention anchor ({reason})",
    "unusable": "not stated: the source record is unusable ({reason})",
}
STATIC_ENV = "CLINTRACE_STATIC_VIEWER"
ARTIFACTS = ("dialogues", "event_coverage", "dialogue_checks", "dialogue_summary", "events")
_CSS = (
    "<style>.ct-dlg{font-family:DejaVu Sans,sans-serif;font-size:13px;line-height:1.5}"
    ".ct-visit{margin:10px 0 4px;font-weight:bold}.ct-turn{margin:2px 0;padding:2px 6px}"
    ".ct-sel{outline:2px solid #000;border-radius:3px}.ct-tag{font-size:10px;margin-left:2px}"
    ".ct-legend span{margin-right:10px;padding:1px 4px;border-radius:3px}</style>"
)


def kind_of(event_id: str) -> str:
    """Event kind from an event id prefix (``LAB-1`` -> ``lab``)."""
    return PREFIX_KIND.get(str(event_id).split("-", 1)[0], "lab")


def load_dialogue_artifacts(profile: str | None = None) -> dict[str, pd.DataFrame]:
    """Read the dialogue-stage artifacts (and events) of a profile.

    Raises:
        FileNotFoundError: naming the command that produces the missing artifact.
    """
    name = resolve_profile(profile)
    hints = {"events": f"clintrace cohort --profile {name}"}
    return {
        a: read_artifact(
            artifact_path(f"{a}.parquet", name),
            hints.get(a, f"clintrace dialogues --profile {name}"),
        )
        for a in ARTIFACTS
    }


def event_titles(events: pd.DataFrame | None) -> dict[str, str]:
    """``{event_id: "Creatinine 1.3 mg/dL"}``-style descriptions for hover titles and pickers."""
    if events is None or events.empty:
        return {}
    out = {}
    for e in records(events[["event_id", "kind", "label", "value_text", "unit", "code"]]):
        parts = [str(e["label"] or "")]
        if e["kind"] in ("lab", "medication"):
            parts += [str(e["value_text"] or ""), str(e["unit"] or "")]
        elif e["kind"] in ("diagnosis", "procedure", "admission", "discharge"):
            parts.append(f"({e['code']})" if e["code"] else "")
        out[str(e["event_id"])] = " ".join(p for p in parts if p)
    return out


def sentence_html(
    sentence: str, ids: list[str], titles: Mapping[str, str], selected: str | None = None
) -> str:
    """One sentence; a fact-bearing one is highlighted in its event kind's colour and followed
    by its id tag (hover shows the source event)."""
    text = html.escape(sentence)
    if not ids:
        return text
    color = KIND_COLORS[kind_of(ids[0])]
    tip = html.escape("; ".join(f"{i}: {titles.get(i, kind_of(i))}" for i in ids))
    weight = "font-weight:bold;" if selected in ids else ""
    tags = " ".join(
        f'<span class="ct-tag" style="color:{KIND_COLORS[kind_of(i)]}">{html.escape(i)}</span>'
        for i in ids
    )
    return (
        f'<span style="background:{color}26;border-bottom:2px solid {color};{weight}" '
        f'title="{tip}">{text}</span><sup>{tags}</sup>'
    )


def turn_html(
    turn: Mapping[str, Any], titles: Mapping[str, str], selected: str | None = None
) -> str:
    """One turn as HTML: speaker prefix and highlighted sentences."""
    body = " ".join(
        sentence_html(s, ids, titles, selected)
        for s, ids in tagged_sentences(str(turn["text_tagged"]))
    )
    cls = "ct-turn ct-sel" if selected and selected in list(turn["event_ids"]) else "ct-turn"
    who = SPEAKER_PREFIX.get(str(turn["speaker"]), str(turn["speaker"]))
    return (
        f'<div class="{cls}" id="turn-{int(turn["turn_idx"])}"><b>{who}:</b> {body} '
        f'<span style="color:#888;font-size:10px">#{int(turn["turn_idx"])}</span></div>'
    )


def legend_html() -> str:
    """Colour legend of event kinds."""
    spans = "".join(
        f'<span style="background:{c}26;border-bottom:2px solid {c}">{k}</span>'
        for k, c in KIND_COLORS.items()
    )
    return f'<div class="ct-legend">{spans}</div>'


def dialogue_html(
    turns: pd.DataFrame,
    subject_id: int | None = None,
    visits: Iterable[int] | None = None,
    selected_event: str | None = None,
    events: pd.DataFrame | None = None,
    titles: Mapping[str, str] | None = None,
) -> str:
    """A patient's dialogue as HTML, visit by visit.

    Args:
        turns: dialogues.parquet rows (one or more patients).
        subject_id: the patient (default: the first in ``turns``).
        visits: visit_idx values to show (default all).
        selected_event: an event id whose turn is outlined and sentence bolded.
        events: events table, for hover titles (optional).
        titles: precomputed ``{event_id: description}`` (overrides ``events``).

    Returns:
        Self-contained HTML.
    """
    if turns.empty:
        return "<p>No dialogue turns.</p>"
    sid = int(turns["subject_id"].iloc[0]) if subject_id is None else int(subject_id)
    mine = turns[turns["subject_id"] == sid]
    if visits is not None:
        mine = mine[mine["visit_idx"].isin(list(visits))]
    if mine.empty:
        return f"<p>No turns for patient {sid} in the chosen visits.</p>"
    if titles is None:
        titles = event_titles(None if events is None else events[events["subject_id"] == sid])
    parts = [_CSS, '<div class="ct-dlg">', legend_html()]
    for v, g in mine.sort_values("turn_idx").groupby("visit_idx", sort=True):
        date = g["visit_date"].iloc[0] if "visit_date" in g.columns else None
        head = VISIT_HEADER.format(number=int(v) + 1, date=date) + writer_label(g)
        parts.append(f'<div class="ct-visit">{html.escape(head)}</div>')
        parts += [turn_html(t, titles, selected_event) for t in records(g)]
    parts.append("</div>")
    return "\n".join(parts)


def writer_label(visit_turns: pd.DataFrame) -> str:
    """Who wrote a visit's text, for its header (``" — written by: template"``; a rewritten
    corpus names the backbone, a rescue backbone, or the template kept after every rewrite
    was refused). Empty for dialogues stored before the writer columns existed."""
    if "writer_role" not in visit_turns.columns or visit_turns.empty:
        return ""
    role = str(visit_turns["writer_role"].iloc[0])
    who = str(visit_turns["writer"].iloc[0])
    text = {
        "template": "template",
        "backbone": f"{who} (verified rewrite)",
        "rescue": f"{who} (rescue backbone, verified rewrite)",
        "fallback": "template (every rewrite refused)",
    }.get(role, role)
    return f" — written by: {text}"


def locate_event(coverage: pd.DataFrame, turns: pd.DataFrame, event_id: str) -> dict[str, Any]:
    """Where an event is in the dialogue.

    Returns:
        ``{"event_id", "status", "reason", "turn_idx", "visit_idx", "speaker", "text",
        "message"}``; turn fields are None unless the event is covered.

    Raises:
        KeyError: the event id is not in ``coverage``.
    """
    row = coverage[coverage["event_id"] == event_id]
    if row.empty:
        raise KeyError(f"event {event_id!r} is not in event_coverage")
    r = records(row)[0]
    out = {
        "event_id": event_id,
        "status": r["status"],
        "reason": r["reason"],
        "turn_idx": None,
        "visit_idx": r["visit_idx"],
        "speaker": None,
        "text": None,
    }
    if r["status"] == "covered" and present(r["turn_idx"]):
        t = turns[(turns["subject_id"] == r["subject_id"]) & (turns["turn_idx"] == r["turn_idx"])]
        if not t.empty:
            tr = records(t)[0]
            out |= {
                "turn_idx": int(tr["turn_idx"]),
                "visit_idx": int(tr["visit_idx"]),
                "speaker": tr["speaker"],
                "text": tr["text_tagged"],
            }
    visit = "?" if out["visit_idx"] is None else int(out["visit_idx"]) + 1
    out["message"] = STATUS_TEXT.get(out["status"], "{reason}").format(
        turn_idx=out["turn_idx"], visit=visit, speaker=out["speaker"], reason=out["reason"]
    )
    if out["status"] == "covered" and out["turn_idx"] is None:
        out["message"] = "covered, but its turn is not in this dialogue (patient dropped?)"
    return out


def event_html(info: Mapping[str, Any], titles: Mapping[str, str] | None = None) -> str:
    """The result of :func:`locate_event` as a short HTML paragraph."""
    eid = str(info["event_id"])
    color = KIND_COLORS[kind_of(eid)]
    desc = html.escape((titles or {}).get(eid, ""))
    text = f"<br><i>{html.escape(str(info['text']))}</i>" if info.get("text") else ""
    return (
        f'<p style="font-family:DejaVu Sans,sans-serif;font-size:13px">'
        f'<b style="color:{color}">{html.escape(eid)}</b> {desc}: '
        f"{html.escape(str(info['message']))}{text}</p>"
    )


def event_options(
    coverage: pd.DataFrame, subject_id: int, titles: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """(label, event_id) pairs of a patient's events for a picker, in dialogue order."""
    cov = coverage[coverage["subject_id"] == int(subject_id)]
    cov = cov.assign(_o=cov["visit_idx"].fillna(-1)).sort_values(["_o", "event_id"])
    titles = titles or {}
    return [
        (
            f"v{'?' if r['visit_idx'] is None else int(r['visit_idx']) + 1} · {r['event_id']} · "
            f"{titles.get(r['event_id'], r['kind'] or '')} · {r['status']}",
            str(r["event_id"]),
        )
        for r in records(cov)
    ]


def event_table(
    coverage: pd.DataFrame,
    subject_id: int,
    titles: Mapping[str, str] | None = None,
    visit: int | None = None,
) -> pd.DataFrame:
    """A patient's events for a paginated picker table, in dialogue order (as
    :func:`event_options`): visit (1-based, None if unplaced), event_id, kind, what, status.

    Args:
        coverage: event_coverage.parquet rows.
        subject_id: the patient.
        titles: ``{event_id: description}`` for the ``what`` column.
        visit: a 0-based visit_idx to keep only that visit's events (None = all).
    """
    cov = coverage[coverage["subject_id"] == int(subject_id)]
    if visit is not None:
        cov = cov[cov["visit_idx"].eq(visit).fillna(False).astype(bool)]
    cov = cov.assign(_o=cov["visit_idx"].fillna(-1)).sort_values(["_o", "event_id"])
    titles = titles or {}
    return pd.DataFrame(
        {
            "visit": [None if pd.isna(v) else int(v) + 1 for v in cov["visit_idx"]],
            "event_id": cov["event_id"].astype(str).to_numpy(),
            "kind": cov["kind"].astype(str).to_numpy(),
            "what": [titles.get(str(e), "") for e in cov["event_id"]],
            "status": cov["status"].astype(str).to_numpy(),
        }
    )


def dialogue_html_within(
    turns: pd.DataFrame,
    subject_id: int,
    budget: int,
    visits: Iterable[int] | None = None,
    selected_event: str | None = None,
    titles: Mapping[str, str] | None = None,
) -> tuple[str, list[int]]:
    """:func:`dialogue_html` of the first of ``visits`` (default all) whose HTML fits in
    ``budget`` bytes — always at least one visit — so a patient with a very long record
    cannot produce an output the browser refuses.

    Returns:
        (HTML, the visit_idx values shown).
    """
    mine = turns[turns["subject_id"] == int(subject_id)]
    wanted = sorted(int(v) for v in mine["visit_idx"].unique())
    if visits is not None:
        wanted = [v for v in wanted if v in set(visits)]
    page = dialogue_html(mine, subject_id, wanted, selected_event, titles=titles)
    if len(page.encode()) <= budget or len(wanted) <= 1:
        return page, wanted
    kept, used = [], len(_CSS) + len(legend_html()) + 100
    for v in wanted:
        size = len(dialogue_html(mine, subject_id, [v], selected_event, titles=titles).encode())
        if kept and used + size > budget:
            break
        kept.append(v)
        used += size
    return dialogue_html(mine, subject_id, kept, selected_event, titles=titles), kept


def checks_html(checks: pd.DataFrame, subject_id: int) -> str:
    """A patient's verifier results as a small HTML table (failures first)."""
    c = checks[checks["subject_id"] == int(subject_id)]
    c = c.sort_values(["passed", "severity"])
    rows = "".join(
        f"<tr><td>{html.escape(r['check'])}</td><td>{r['severity']}</td>"
        f"<td>{'✔' if r['passed'] else '✘'}</td><td>{html.escape(str(r['detail']))}</td></tr>"
        for r in records(c)
    )
    return (
        '<table style="font-size:12px"><tr><th>check</th><th>severity</th><th>ok</th>'
        f"<th>detail</th></tr>{rows}</table>"
    )


def patient_options(summary: pd.DataFrame) -> list[tuple[str, int]]:
    """(label, subject_id) pairs for a patient picker, kept patients first."""
    s = summary.sort_values(["kept", "subject_id"], ascending=[False, True])
    return [
        (
            f"{r['subject_id']} · {r['n_visits']} visits · {'kept' if r['kept'] else 'dropped'}",
            int(r["subject_id"]),
        )
        for r in records(s)
    ]


def static_view(
    turns: pd.DataFrame,
    coverage: pd.DataFrame,
    subject_id: int | None = None,
    events: pd.DataFrame | None = None,
    max_visits: int = 2,
) -> str:
    """The headless rendering: a patient's first visits plus where one covered and one missed
    event of theirs sit."""
    if turns.empty:
        return "<p>No dialogues to show.</p>"
    sid = int(turns["subject_id"].iloc[0]) if subject_id is None else int(subject_id)
    mine = turns[turns["subject_id"] == sid]
    visits = sorted(mine["visit_idx"].unique())[:max_visits]
    titles = event_titles(None if events is None else events[events["subject_id"] == sid])
    cov = coverage[coverage["subject_id"] == sid]
    parts = []
    for status in ("covered", "missed"):
        pick = cov[(cov["status"] == status) & cov["visit_idx"].isin(visits)]
        if len(pick):
            info = locate_event(coverage, turns, str(pick["event_id"].iloc[0]))
            parts.append(event_html(info, titles))
    head = f"<h4>Patient {sid}: visits {', '.join(str(v + 1) for v in visits)} (static view)</h4>"
    return head + "".join(parts) + dialogue_html(mine, sid, visits, titles=titles)


def _summary_of(turns: pd.DataFrame) -> pd.DataFrame:
    """A summary for the patient picker when none is given: every patient, kept."""
    by_patient = turns.groupby("subject_id").agg(n_visits=("visit_idx", "nunique"))
    return by_patient.reset_index().assign(kept=True)


def dialogue_viewer(
    turns: pd.DataFrame,
    coverage: pd.DataFrame,
    checks: pd.DataFrame | None = None,
    summary: pd.DataFrame | None = None,
    events: pd.DataFrame | None = None,
):
    """An ipywidgets viewer: pick a patient, a visit and an event.

    Returns:
        ``ipywidgets.VBox``; its ``.children`` are the pickers and the HTML panes (see
        the ``controls`` attribute for ``patient``, ``visit``, ``event``, ``ids``).
    """
    import ipywidgets as W

    if summary is None:
        summary = _summary_of(turns)
    patient = W.Dropdown(options=patient_options(summary), description="patient")
    visit = W.Dropdown(description="visit")
    event = W.Dropdown(description="event", layout=W.Layout(width="70%"))
    ids = W.Checkbox(value=True, description="show event ids")
    where = W.HTML()
    body = W.HTML()
    verdict = W.HTML()
    state: dict[str, Any] = {}

    def _patient(_=None) -> None:
        sid = patient.value
        ev = None if events is None else events[events["subject_id"] == sid]
        state["titles"] = event_titles(ev)
        mine = turns[turns["subject_id"] == sid]
        vs = sorted(int(v) for v in mine["visit_idx"].unique())
        visit.options = [("all visits", -1)] + [(f"visit {v + 1}", v) for v in vs]
        visit.value = -1 if not vs else vs[0]
        event.options = [("(none)", "")] + event_options(coverage, sid, state["titles"])
        event.value = ""
        verdict.value = checks_html(checks, sid) if checks is not None else ""
        _render()

    def _event(_=None) -> None:
        eid = event.value
        if eid:
            info = locate_event(coverage, turns, eid)
            where.value = event_html(info, state.get("titles"))
            shown = [v for _, v in visit.options]
            if info["visit_idx"] is not None and int(info["visit_idx"]) in shown:
                visit.value = int(info["visit_idx"])
        else:
            where.value = ""
        _render()

    def _render(_=None) -> None:
        sid = patient.value
        if sid is None:
            body.value = "<p>No patients.</p>"
            return
        vs = None if visit.value in (-1, None) else [visit.value]
        shown = turns if ids.value else turns.assign(text_tagged=turns["text"])
        body.value = dialogue_html(shown, sid, vs, event.value or None, titles=state.get("titles"))

    patient.observe(_patient, names="value")
    event.observe(_event, names="value")
    visit.observe(_render, names="value")
    ids.observe(_render, names="value")
    box = W.VBox([W.HBox([patient, visit, ids]), event, where, body, verdict])
    box.controls = {
        "patient": patient,
        "visit": visit,
        "event": event,
        "ids": ids,  # type: ignore
        "where": where,
        "body": body,
        "checks": verdict,
    }
    if patient.options:
        _patient()
    return box


class ViewerDisplay:
    """Displays a widget together with a static HTML rendering in one output: a widget
    frontend (JupyterLab) shows the widget, anything else (nbconvert, GitHub) the HTML."""

    def __init__(self, widget: Any, static_html: str):
        self.widget = widget
        self.static_html = static_html

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle: dict[str, Any] = {}
        if self.widget is not None:
            got = self.widget._repr_mimebundle_(include=include, exclude=exclude)
            bundle.update(got[0] if isinstance(got, tuple) else (got or {}))
        bundle["text/html"] = self.static_html
        bundle.setdefault("text/plain", "Dialogue viewer (static rendering in text/html)")
        return bundle

    def _repr_html_(self) -> str:
        return self.static_html


def show_dialogue_viewer(
    turns: pd.DataFrame,
    coverage: pd.DataFrame,
    checks: pd.DataFrame | None = None,
    summary: pd.DataFrame | None = None,
    events: pd.DataFrame | None = None,
    static: bool | None = None,
) -> ViewerDisplay:
    """The notebook entry point: the widget viewer plus its static fallback.

    Args:
        turns, coverage, checks, summary, events: the dialogue artifacts.
        static: only the static HTML (default: $CLINTRACE_STATIC_VIEWER is set).
    """
    static = bool(os.environ.get(STATIC_ENV)) if static is None else static
    sid = None
    if summary is not None and len(summary) and summary["kept"].any():
        sid = int(summary.loc[summary["kept"], "subject_id"].min())
    html_ = static_view(turns, coverage, sid, events)
    widget = None if static else dialogue_viewer(turns, coverage, checks, summary, events)
    return ViewerDisplay(widget, html_)


# --- corpus figure -------------------------------------------------------------------------


def corpus_chart(summary: pd.DataFrame, turns: pd.DataFrame) -> alt.HConcatChart:
    """Histograms of visits per patient, characters per dialogue (k) and turns per visit for
    kept patients, with our median (solid) and the paper's (dashed, Appendix C.1)."""
    kept = summary[summary["kept"]]
    panels = [
        ("visits per patient", kept["n_visits"].astype(float)),
        ("characters per dialogue (k)", kept["n_chars"].astype(float) / 1000),
        ("turns per visit", turns.groupby(["subject_id", "visit_idx"]).size().astype(float)),
    ]
    charts = []
    for title, values in panels:
        # Binned here, not in Vega: the chart carries 30 rows at any cohort size (a paper
        # cohort has 5,830 visits, over altair's 5,000-row embedding limit).
        counts, edges = np.histogram(values.to_numpy(dtype=float), bins=30)
        df = pd.DataFrame({"start": edges[:-1], "end": edges[1:], "count": counts})
        base = (
            alt.Chart(df)
            .mark_bar(opacity=0.8)
            .encode(
                x=alt.X("start:Q", title=title),
                x2="end:Q",
                y=alt.Y("count:Q", title="count"),
                # Without a y2 baseline, x + x2 makes Vega-Lite draw a horizontal ranged bar
                # one band thick at y = count: the histogram showed as points.
                y2=alt.datum(0),
            )
        )
        rules = [alt.Chart(pd.DataFrame({"m": [float(values.median())], "who": ["ours"]}))]
        paper = PAPER_DIALOGUE_STATS.get(title, {}).get("median")
        if paper is not None:
            rules.append(alt.Chart(pd.DataFrame({"m": [paper], "who": ["paper"]})))
        layers = [base] + [
            r.mark_rule(strokeWidth=2).encode(
                x="m:Q",
                strokeDash=alt.StrokeDash(
                    "who:N",
                    scale=alt.Scale(domain=["ours", "paper"], range=[[1, 0], [5, 3]]),
                    title="median",
                ),
                color=alt.value("#000000"),
            )
            for r in rules
        ]
        charts.append(alt.layer(*layers).properties(width=220, height=180))
    return alt.hconcat(*charts)
