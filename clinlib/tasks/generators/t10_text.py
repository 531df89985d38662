"""How T10 renders events and visits (LongMedBench "Temporal reasoning": the visit's event
stream with timestamps for the cloze; visit summaries "with their timestamps removed" for the
sorting tasks; docs/design.md "T10").

Cloze: every event of the visit is one line ``YYYY-MM-DD HH:MM <kind>: <fields>``, the labs
drawn at one minute joined on one line; the remaining lines are numbered ``[1]``, ``[2]``, ...
(:func:`numbered`) so an answer can name the line each removed event goes after. Sorting clips hold no date, time or visit number:

* admission half: the admission type, the abnormal labs of the admission day and the
  medications started that day;
* discharge half: the diagnoses, procedures, later abnormal labs, later medications and the
  discharge location;
* a visit clip (visit sorting) is the two halves joined;
* a note clip (visit sorting from notes, :func:`note_clip`) is the visit's synthetic discharge
  note without its dates.

Lists are capped (:data:`CLIP_CAPS`, first in time order, one entry per lab / drug name) so a
clip stays a summary, as the seed's visit summaries are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from clinlib.data.sources.notes import note_text, visit_note
from clinlib.tasks.generators.inputs import timestamp
from clinlib.tasks.source_text import as_data

CLIP_CAPS = {"labs": 6, "medications": 6, "diagnoses": 8, "procedures": 4}


def stamp(record: Mapping[str, Any]) -> str:
    """``YYYY-MM-DD HH:MM`` of a record's time."""
    return _stamp(int(record["t"]))


@lru_cache(maxsize=1 << 18)
def _stamp(t_us: int) -> str:
    return timestamp(t_us).strftime("%Y-%m-%d %H:%M")


def _clean(x: Any) -> str:
    """A source field as a prompt carries it (:func:`clinlib.tasks.source_text.as_data`)."""
    return "" if x is None else as_data(str(x).strip())


def lab_text(r: Mapping[str, Any]) -> str:
    """``Potassium 5.9 mEq/L (abnormal)``."""
    text = " ".join(
        p for p in (_clean(r["label"]), _clean(r["value_text"]), _clean(r["unit"])) if p
    )
    return text + (" (abnormal)" if r.get("flag") == "abnormal" else "")


def med_text(r: Mapping[str, Any]) -> str:
    """``Heparin 5000 UNIT SC``."""
    parts = (r["label"], r["value_text"], r["unit"], r["route"])
    return " ".join(p for p in (_clean(x) for x in parts) if p)


def event_text(r: Mapping[str, Any]) -> str:
    """``<kind>: <fields>`` of one event (no time)."""
    kind = r["kind"]
    if kind == "lab":
        return f"lab: {lab_text(r)}"
    if kind == "medication":
        return f"medication: {med_text(r)}"
    if kind == "admission":
        return f"admission: {_clean(r['code']) or 'unspecified type'}"
    if kind == "discharge":
        loc = _clean(r["code"])
        return f"discharge: {loc}" if loc else "discharge"
    return f"{kind}: {_clean(r['label'])}"


def event_line(r: Mapping[str, Any]) -> str:
    """``YYYY-MM-DD HH:MM <kind>: <fields>``."""
    return f"{stamp(r)} {event_text(r)}"


def visit_stream(records: Iterable[Mapping[str, Any]]) -> str:
    """A visit's events in time order, one line each; the labs of one minute on one line."""
    lines: list[str] = []
    lab_key: str | None = None
    for r in records:
        if r["kind"] == "lab":
            s = stamp(r)
            if lab_key == s:
                lines[-1] += f"; {lab_text(r)}"
            else:
                lines.append(f"{s} labs: {lab_text(r)}")
                lab_key = s
            continue
        lab_key = None
        lines.append(event_line(r))
    return "\n".join(lines)


def numbered(lines: Sequence[str]) -> str:
    """``[1] <line>`` ... : the cloze's remaining lines, numbered for the insertion answer."""
    return "\n".join(f"[{i}] {line}" for i, line in enumerate(lines, start=1))


ACTION_FEEDBACK = {
    "lab": ("draws {what}", "{result}"),
    "medication": ("orders {what}", "order placed: {what}"),
    "procedure": ("performs {what}", "procedure completed: {what}"),
    "admission": ("admits the patient ({what})", "the patient is admitted"),
}


def contextual_memory(records: Iterable[Mapping[str, Any]]) -> str:
    """LongMedBench's contextual memory M_C: the current visit's events before the cut rewritten
    as action–feedback turns, ``(assistant, {a, t, p})`` then ``(user, {f, t'})`` — rule-based
    (the seed rewrites them with an LLM). Each turn is one line ``YYYY-MM-DD HH:MM <kind>:
    <role> — <text>`` (so the cut gate reads every stated time and kind); the labs drawn at one
    minute are one action and one feedback. The feedback states the observation o (a lab's
    result) and nothing later than the event: an order's feedback never states its end time,
    and t' = t (the kit's events carry one time)."""
    groups: list[tuple[Mapping[str, Any], list[Mapping[str, Any]]]] = []
    for r in records:
        if r["kind"] not in ACTION_FEEDBACK:
            continue
        if r["kind"] == "lab" and groups and groups[-1][0]["kind"] == "lab":
            if stamp(groups[-1][0]) == stamp(r):
                groups[-1][1].append(r)
                continue
        groups.append((r, [r]))
    lines = []
    for first, rs in groups:
        kind, (act, feed) = first["kind"], ACTION_FEEDBACK[first["kind"]]
        if kind == "lab":
            what, result = "; ".join(_clean(r["label"]) for r in rs), "; ".join(map(lab_text, rs))
        elif kind == "medication":
            what = result = med_text(first)
        elif kind == "admission":
            what = result = _clean(first["code"]) or "unspecified type"
        else:
            what = result = _clean(first["label"])
        head = f"{stamp(first)} {kind}:"
        lines.append(f"{head} assistant — {act.format(what=what)}")
        lines.append(f"{head} user — {feed.format(what=what, result=result)}")
    return "\n".join(lines)


def _capped(items: Iterable[str], cap: int) -> list[str]:
    out: list[str] = []
    for x in items:
        if x and x not in out:
            out.append(x)
    return out[:cap]


def _first_by(records: Sequence[Mapping[str, Any]], key: str) -> list[Mapping[str, Any]]:
    seen: set[Any] = set()
    out = []
    for r in records:
        k = r[key]
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def _labs(records: Sequence[Mapping[str, Any]]) -> list[str]:
    abnormal = [r for r in records if r["kind"] == "lab" and r.get("flag") == "abnormal"]
    return _capped((lab_text(r) for r in _first_by(abnormal, "label")), CLIP_CAPS["labs"])


def _meds(records: Sequence[Mapping[str, Any]]) -> list[str]:
    meds = [r for r in records if r["kind"] == "medication"]
    return _capped((_clean(r["label"]) for r in meds), CLIP_CAPS["medications"])


def visit_halves(records: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """(admission half, discharge half) of one visit's records (module docstring)."""
    adm = next((r for r in records if r["kind"] == "admission"), None)
    day = adm["date"] if adm is not None else (records[0]["date"] if records else "")
    early = [r for r in records if r["date"] == day]
    later = [r for r in records if r["date"] != day]
    kind = _clean(adm["code"]).rstrip(".") if adm is not None else ""
    head = [f"Admission type: {kind or 'unspecified'}."]
    labs, meds = _labs(early), _meds(early)
    if labs:
        head.append(f"Abnormal results on the admission day: {'; '.join(labs)}.")
    if meds:
        head.append(f"Medications started on the admission day: {', '.join(meds)}.")
    dx = _capped(
        (_clean(r["label"]) for r in records if r["kind"] == "diagnosis"), CLIP_CAPS["diagnoses"]
    )
    px = _capped(
        (_clean(r["label"]) for r in records if r["kind"] == "procedure"), CLIP_CAPS["procedures"]
    )
    tail = [f"Diagnoses: {'; '.join(dx) if dx else 'none coded'}."]
    if px:
        tail.append(f"Procedures: {'; '.join(px)}.")
    labs, meds = _labs(later), _meds(later)
    if labs:
        tail.append(f"Abnormal results later in the stay: {'; '.join(labs)}.")
    if meds:
        tail.append(f"Medications started later in the stay: {', '.join(meds)}.")
    dis = next((r for r in records if r["kind"] == "discharge"), None)
    loc = _clean(dis["code"]) if dis is not None else ""
    tail.append(f"Discharged to: {loc.rstrip('.')}." if loc else "Discharge location not recorded.")
    return " ".join(head), " ".join(tail)


_NOTE_DATES = (
    (re.compile(r"Admitted on \d{4}-\d{2}-\d{2}; admission type"), "Admission type"),
    (re.compile(r"Discharged on \d{4}-\d{2}-\d{2} to"), "Discharged to"),
    (re.compile(r" (?:on|from) \d{4}-\d{2}-\d{2}"), ""),
)


def note_clip(records: Sequence[Mapping[str, Any]]) -> str:
    """A visit as its SYNTHETIC discharge note (:func:`clinlib.data.sources.notes.visit_note`,
    written from the visit's events) with every date removed: the visit-sorting-from-notes
    clip (the seed: "five shuffled visit summaries N ... with their timestamps removed")."""
    text = note_text(visit_note([{**r, "time": timestamp(int(r["t"]))} for r in records]))
    for pattern, repl in _NOTE_DATES:
        text = pattern.sub(repl, text)
    return text


def options_block(items: Sequence[str]) -> str:
    """``A. <item>`` lines."""
    return "\n".join(f"{chr(ord('A') + i)}. {text}" for i, text in enumerate(items))
