"""What the offline readers parse from a prompt: the rendered record (encounters under
``Visit N (date)`` headers, timeline rows, memory / summary notes, lab mentions and their
``[EVENT-ID]`` tags) and the question (task, sub-kind and named fields) (paper §4 "Backbones"
— the kit's offline stand-in; docs/design.md "deterministic offline readers").

Both readers (:mod:`clinlib.eval.readers.policies`) share this parsing; only what they do with a
missing fact differs (:mod:`clinlib.eval.readers.answers`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from clinlib.data.vocab import LAB_PANEL, Lab

DATE = r"\d{4}-\d{2}-\d{2}"
DATE_RE = re.compile(DATE)
TAG_RE = re.compile(r"\[((?:[A-Z]+-[\d-]+)(?:\s*,\s*[A-Z]+-[\d-]+)*)\]")
_NUM = r"[<>]=?\s?\d+(?:\.\d+)?|\d+(?:\.\d+)?"
# Sentence / item boundaries: a full stop or semicolon before a space, newlines, table cells.
_BOUNDARY_RE = re.compile(r"(?<=[.;!?])\s+(?=\S)|\n+|\s\|\s")
# The encounter numbering each representation renders (group ``number``: the encounter's rank
# in the record, 1-based; ``date``: its start date, absent when the representation has none):
# the dialogue's ``Visit N (date)`` headers (full-context, last-visit-only, last-n-visits,
# window-visits, dense-retrieval, bm25, codebook), the structured timeline's ``| N | date ...``
# rows and A-Mem's ``[nN | date]`` / ``[nN (linked) | date]`` notes. llm-summary and Mem0
# render no per-encounter numbering.
ENCOUNTER_RES = (
    re.compile(r"^Visit (?P<number>\d+) \((?P<date>" + DATE + r")\)", re.MULTILINE),
    re.compile(r"^\|\s*(?P<number>\d+)\s*\|\s*(?P<date>" + DATE + r")?", re.MULTILINE),
    re.compile(
        r"^\[n(?P<number>\d+)(?: \(linked\))?\s*\|\s*(?P<date>" + DATE + r")?\]", re.MULTILINE
    ),
)
_SECTION_RE = re.compile(r"^Patient ([A-D]):\s*$", re.MULTILINE)


class ReaderError(ValueError):
    """A reader was given messages or a predictions table it cannot use."""


# --------------------------------------------------------------------------- record parsing


@dataclass(frozen=True)
class LabMention:
    """One lab value stated in the record.

    Attributes:
        label: the lab's display label as written.
        value_text: the number as written (with a comparator if any).
        value: the number.
        unit: the unit as written.
        day: the measurement date (None when the text gives none).
        encounter: the start date of the encounter it was stated under (None: no headers).
        patient: the ``Patient X:`` section label ("" without sections).
        pos: character offset in the record (text order).
        flag: "high" / "low" / "" as stated next to the value (H/L flags, above/below words).
        event_id: the id from its ``[...]`` tag when one can be assigned.
    """

    label: str
    value_text: str
    value: float
    unit: str
    day: date | None
    encounter: date | None
    patient: str
    pos: int
    flag: str = ""
    event_id: str | None = None


@dataclass
class Record:
    """A parsed record: its text, sections, encounter spans and lab mentions."""

    text: str
    encounters: list[tuple[str, date, int, int]] = field(default_factory=list)
    labs: list[LabMention] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether no record was provided."""
        return not self.text.strip()


def parse_day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def patient_sections(text: str) -> list[tuple[str, int, int]]:
    """``Patient X:`` sections as (label, start, end); one unlabelled section otherwise."""
    marks = list(_SECTION_RE.finditer(text))
    if not marks:
        return [("", 0, len(text))]
    out = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out.append((m.group(1), m.end(), end))
    return out


def encounter_spans(text: str) -> list[tuple[str, date, int, int]]:
    """Encounter spans (patient, start date, start offset, end offset) from the headers."""
    out: list[tuple[str, date, int, int]] = []
    for patient, s0, s1 in patient_sections(text):
        heads = []
        for rx in ENCOUNTER_RES:
            heads += [
                (m.start(), parse_day(m.group("date") or "")) for m in rx.finditer(text, s0, s1)
            ]
        heads = sorted(h for h in heads if h[1] is not None)
        for i, (pos, d) in enumerate(heads):
            end = heads[i + 1][0] if i + 1 < len(heads) else s1
            out.append((patient, d, pos, end))
    return out


def numbered_encounters(text: str) -> list[tuple[int, int, int]]:
    """Every numbered encounter the record renders (:data:`ENCOUNTER_RES`), dated or not, as
    (number, start offset, end offset) in text order; an encounter ends where the next one
    starts. Retrieved A-Mem notes come in relevance order, so numbers need not ascend."""
    heads = sorted(
        (m.start(), int(m.group("number"))) for rx in ENCOUNTER_RES for m in rx.finditer(text)
    )
    return [
        (number, pos, heads[i + 1][0] if i + 1 < len(heads) else len(text))
        for i, (pos, number) in enumerate(heads)
    ]


def lab_regex(label: str, unit: str | None) -> re.Pattern[str]:
    # Connective words between a label and its value in every frame the dialogue, timeline,
    # memories and injections use ("was", "at", "of", "measured", "result,", "on <date> was").
    filler = (
        r"(?P<mid>(?:\s*(?:,|:|result|is|was|at|of|measured|came back at|"
        r"on\s+(?P<on>" + DATE + r")))*)\s*"
    )
    unit_rx = re.escape(unit) if unit else r"[A-Za-z%/^0-9µ]+"
    return re.compile(
        r"(?<![\w%])" + re.escape(label) + r"(?![\w])" + filler + r"(?P<num>" + _NUM + r")\s*"
        r"(?P<unit>" + unit_rx + r")(?![\w/])(?P<after>\s*(?:\((?:high|low|abnormal)\)|[HLA])?"
        r"(?![\w]))",
        re.IGNORECASE,
    )


PANEL_RES: dict[str, tuple[Lab | None, re.Pattern[str]]] = {
    lab.label.lower(): (lab, lab_regex(lab.label, lab.unit)) for lab in LAB_PANEL
}


def panel_lab(label: str) -> Lab | None:
    """The panel entry whose label is ``label`` (case-insensitive), else None."""
    entry = PANEL_RES.get(label.strip().lower())
    return entry[0] if entry else None


def sentence_bounds(text: str) -> list[int]:
    return [0, *(m.end() for m in _BOUNDARY_RE.finditer(text)), len(text)]


def _context_day(text: str, start: int, m_end: int, on: str | None, sent0: int) -> date | None:
    """The date a mention refers to: an ``on <date>`` right after it, else the last date in
    its sentence before it, else the last date before it in the record."""
    if on:
        return parse_day(on)
    tail = re.match(r"[^.;\n]{0,40}?\bon\s+(" + DATE + ")", text[m_end : m_end + 60])
    if tail and not re.search(r"\d\s*(?:mg|mEq|g/|%|K/|ng)", tail.group(0)[:-10]):
        return parse_day(tail.group(1))
    before = list(DATE_RE.finditer(text, sent0, start))
    if before:
        return parse_day(before[-1].group(0))
    before = list(DATE_RE.finditer(text, max(0, start - 4000), start))
    return parse_day(before[-1].group(0)) if before else None


def _label_matches(rx: re.Pattern[str], key: str, text: str, low: str) -> list[re.Match[str]]:
    """``list(rx.finditer(text))`` for a lab regex that starts with the label ``key``.

    A case-insensitive pattern opening with a look-behind defeats the regex engine's literal
    prefix search, so a scan costs ~2 ms per label on a 45k-character record; ``str.find``
    locates the label first and the regex is tried only there. Matches do not overlap, as with
    ``finditer``. Falls back to ``finditer`` when lower-casing changes the text's length.
    """
    if len(low) != len(text) or not key:
        return list(rx.finditer(text))
    out: list[re.Match[str]] = []
    end = 0
    pos = low.find(key)
    while pos != -1:
        if pos >= end:
            m = rx.match(text, pos)
            if m is not None:
                out.append(m)
                end = m.end() if m.end() > pos else pos + 1
        pos = low.find(key, pos + 1)
    return out


@dataclass(frozen=True)
class LabScan:
    """What parsing a record needs whatever the question: layout, panel matches, and the
    panel mentions already built (their dates are the costly part)."""

    text: str
    low: str
    encounters: list[tuple[str, date, int, int]]
    sections: list[tuple[str, int, int]]
    bounds: list[int]
    tags: list[tuple[int, list[str]]]
    found: list[tuple[int, int, str, re.Match[str]]]
    mentions: dict[tuple[int, str], LabMention | None]


def find_labels(
    regexes: Mapping[str, tuple[Lab | None, re.Pattern[str]]], text: str, low: str
) -> list[tuple[int, int, str, re.Match[str]]]:
    return [
        (m.start(), m.end(), key, m)
        for key, (_lab, rx) in regexes.items()
        for m in _label_matches(rx, key, text, low)
    ]


def mention_at(scan: LabScan, start: int, key: str, m: re.Match[str]) -> LabMention | None:
    """The mention a label match states (None when its number does not parse)."""
    text = scan.text
    sent0 = scan.bounds[max(0, bisect.bisect_right(scan.bounds, start) - 1)]
    day = _context_day(text, start, m.end("unit"), m.group("on"), sent0)
    patient = next((p for p, a, b in scan.sections if a <= start < b), "")
    enc = next((d for p, d, a, b in scan.encounters if a <= start < b and p == patient), None)
    after = (m.group("after") or "").strip().lower()
    flag = {"h": "high", "(high)": "high", "l": "low", "(low)": "low"}.get(after, "")
    try:
        value = float(re.sub(r"[<>=\s]", "", m.group("num")))
    except ValueError:
        return None
    return LabMention(
        label=text[start : start + len(key)],
        value_text=m.group("num").replace(" ", ""),
        value=value,
        unit=m.group("unit"),
        day=day,
        encounter=enc,
        patient=patient,
        pos=start,
        flag=flag,
    )


# Scans kept in memory, in characters of record text (a scan costs ~10 bytes per character):


def assign_ids(tags: list[tuple[int, list[str]]], mentions: list[LabMention]) -> list[LabMention]:
    """Give each mention the LAB id of the tag that follows it: a tag lists its sentence's
    facts in order, so the k-th untagged mention before a k-id tag gets the k-th id.

    Args:
        tags: (offset, ids) of the record's ``[...]`` tags in text order.
        mentions: lab mentions in text order.
    """
    out = list(mentions)
    # Mentions come in text order, so the ones between two tags are a contiguous slice
    # (found by bisection: the scan stays linear on a 50k-character full context).
    positions = [mm.pos for mm in out]
    prev = -1
    for pos, ids in tags:
        lo = bisect.bisect_right(positions, prev)
        hi = bisect.bisect_left(positions, pos)
        inside = list(range(lo, hi))
        prev = pos
        lab_ids = [i for i in ids if i.startswith("LAB-")]
        if not inside or not lab_ids:
            continue
        if len(lab_ids) == len(inside):
            pairs = zip(inside, lab_ids, strict=True)
        elif len(lab_ids) == 1:
            pairs = ((i, lab_ids[0]) for i in inside[-1:])
        else:
            continue
        for i, eid in pairs:
            out[i] = LabMention(**{**out[i].__dict__, "event_id": eid})
    return out


# --------------------------------------------------------------------------- questions


@dataclass(frozen=True)
class Question:
    """What a reader recognised in a question.

    Attributes:
        task: ``T1`` .. ``T9`` ("T1" also stands for a T9 lab question: same wording).
        kind: a sub-kind (T6 a/b/c, T9 dose/start, T5 dx/procedure/lab).
        fields: the named parts (lab, date, dates, problem, drug, title, options ...).
    """

    task: str
    kind: str
    fields: dict[str, Any]


_Q_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (task, kind, re.compile(rx, re.IGNORECASE | re.DOTALL))
    for task, kind, rx in (
        (
            "T3",
            "",
            r"(?P<date>" + DATE + r").*?(?:attribute the (?P<lab>.+?) result of|was "
            r"the (?P<lab2>.+?) of|link the (?P<lab3>.+?) finding of) (?P<value>[<>]?\d[\d.]*) "
            r"(?P<unit>\S+) (?:to|explicitly noted by the physician as consistent with) "
            r"(?P<problem>.+?)\?",
        ),
        ("T4", "", r"(?P<date>" + DATE + r").*?abnormal (?P<labs>.+?) (?:results|findings)"),
        (
            "T5",
            "dx",
            r"the diagnosis of (?P<title>.+?) in the encounter that began on (?P<date>"
            + DATE
            + ")",
        ),
        (
            "T5",
            "procedure",
            r"the procedure (?P<title>.+?) in the encounter that began on "
            r"(?P<date>" + DATE + ")",
        ),
        (
            "T5",
            "lab",
            r"(?:contradict|self-contradictory).*?the (?P<lab>.+?) result of (?P<date>"
            + DATE
            + ")|Regarding the (?P<lab2>.+?) result of (?P<date2>"
            + DATE
            + ")",
        ),
        ("T6", "a", r"distinct (?:ICD )?diagnosis codes"),
        (
            "T6",
            "b",
            r"(?:higher maximum|whose highest|Compare the peak) (?P<lab>.+?)"
            r"(?: across| value was| of Patient)",
        ),
        (
            "T6",
            "c",
            r"(?:Whose (?P<lab>.+?) changed more|the first and the last (?P<lab2>.+?) "
            r"result of each patient|Which patient's (?P<lab3>.+?) moved more)",
        ),
        ("T7", "", r"(?P<date>" + DATE + r").*?\nOptions:\n(?P<options>(?:[A-D]\. .+\n?)+)"),
        (
            "T8",
            "",
            r"(?P<drug>.+?) was started on (?P<date>" + DATE + r")\. Relative to the "
            r"most recent prior (?P<lab>.+?), how|After (?P<drug2>.+?) was started on (?P<date2>"
            + DATE
            + r"), did the patient's (?P<lab2>.+?) go up|Compare the last (?P<lab3>.+?) "
            r"measured on or before (?P<date3>" + DATE + r"), when (?P<drug3>.+?) was started",
        ),
        (
            "T2",
            "",
            r"(?P<lab>[^.?]+?) (?:result of each|measurement of each|at the encounters"
            r"|change from)",
        ),
        ("T9", "dose", r"(?:dose of|How much) (?P<drug>.+?)(?: was ordered|\s*\?| per dose)"),
        (
            "T9",
            "start",
            r"(?:was|did the patient start|when was) (?P<drug>.+?) (?:started|first "
            r"given|in the hospital stay).*?(?P<date>" + DATE + r")|On what date was (?P<drug2>.+?)"
            r" started during the encounter that began on (?P<date2>" + DATE + ")",
        ),
        (
            "T1",
            "",
            r"(?:patient's (?P<lab>.+?) on (?P<date>"
            + DATE
            + r")|On (?P<date2>"
            + DATE
            + r"), what (?P<lab2>.+?) value|patient's (?P<lab3>.+?) result from (?P<date3>"
            + DATE
            + r")|did the (?P<lab4>.+?) measurement of (?P<date4>"
            + DATE
            + "))",
        ),
    )
)


def _merged(m: re.Match[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in m.groupdict().items():
        base = k.rstrip("0123456789")
        if v is not None and base not in out:
            out[base] = v.strip()
    return out


# Per-task wording knowledge of the recogniser, keyed by the pattern's task: a guard the
# question must match (T2's patterns need "encounters") and a completion of the matched fields.
_GUARDS = {"T2": re.compile(r"encounters")}


def _keep(q: str, f: dict) -> None:
    return None


def _t2_fields(q: str, f: dict) -> None:
    head = q.split("?")[0] + "?" + q.split("?")[1] if "?" in q else q
    f["dates"] = DATE_RE.findall(head)
    f["lab"] = _t2_lab(q)


def _t9_fields(q: str, f: dict) -> None:
    if "date" not in f:
        f["date"] = DATE_RE.findall(q)[0]


def _t7_fields(q: str, f: dict) -> None:
    f["options"] = [
        re.sub(r"^[A-D]\.\s*", "", line).strip()
        for line in f["options"].strip().splitlines()
        if re.match(r"^[A-D]\.", line)
    ]


def _t4_fields(q: str, f: dict) -> None:
    f["labs"] = [s.strip() for s in re.split(r"\s+or\s+", f["labs"])]


_FIELDS = {"T2": _t2_fields, "T9": _t9_fields, "T7": _t7_fields, "T4": _t4_fields}


def recognise(question: str) -> Question:
    """Recognise a question's task and parts from its wording (the generators' templates).

    Args:
        question: the question text (with its answer-format statement).

    Returns:
        A :class:`Question`; raises :class:`ReaderError` when no template matches.
    """
    q = question.strip()
    if "insufficient information" in q and "YYYY-MM-DD" in q:
        m = re.search(r"(?:date was |start |was )(?P<drug>.+?) (?:started|first given|in the)", q)
        d = DATE_RE.findall(q)
        if m and d:
            return Question("T9", "start", {"drug": m.group("drug"), "date": d[-1]})
    for task, kind, rx in _Q_PATTERNS:
        guard = _GUARDS.get(task)
        if guard is not None and not guard.search(q):
            continue
        m = rx.search(q)
        if not m:
            continue
        f = _merged(m)
        _FIELDS.get(task, _keep)(q, f)
        return Question(task, kind, f)
    raise ReaderError(f"reader cannot recognise the task of question {q[:120]!r}")


def _t2_lab(q: str) -> str:
    for rx in (
        r"how did the patient's (.+?) change",
        r"Take the first (.+?) result of each",
        r"Comparing the patient's (.+?) at the encounters",
    ):
        m = re.search(rx, q)
        if m:
            return m.group(1).strip()
    raise ReaderError(f"reader cannot find the lab in T2 question {q[:120]!r}")
