"""The offline readers' rule for relative-time questions (the extended T1R task, LongMedBench
retrieval task of its Table 2): "the {ordinal} {lab} measurement of the {visit} hospital stay" (templates
in :mod:`clinlib.tasks.templates`). An explicit T1R twin is worded exactly like T1 and
answered by T1's rule.

The reader finds the encounter whose number is the visit ordinal, in whichever numbering the
representation renders (:data:`clinlib.eval.readers.prompt.ENCOUNTER_RES`): the dialogue's
``Visit N (date)`` headers (every verbatim strategy and the codebook), the structured
timeline's numbered rows ``| N | date ...`` and A-Mem's notes ``[nN | date]``. It takes the
lab's mentions inside that encounter in text order (one per measurement day: a value restated
on the same day is the same measurement) and returns the k-th. Without that encounter — a
representation that renders no per-encounter numbering (llm-summary, Mem0's memories), or a
window / retrieval / last-visit view that does not hold it — the reference reader abstains; the
eager reader guesses the encounter's last measurement when it holds fewer than k, else the
panel's reference midpoint. A 0 on relative questions is therefore what this deterministic
policy reads, not evidence about how an LLM would read the same text. Like the rest of the
offline readers it never sees the gold, the events or any artifact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clinlib.dialogue.turns import ordinal_word
from clinlib.eval.readers.answers import (
    format_value,
    lab_mentions,
    option_hits,
    reference_midpoint,
    value_answer,
)
from clinlib.eval.readers.prompt import Record, numbered_encounters, panel_lab
from clinlib.tasks.rules import OPTION_LETTERS

ORDINALS: dict[str, int] = {ordinal_word(n): n for n in range(1, 100)}
_ORD = "|".join(sorted((re.escape(w) for w in ORDINALS), key=len, reverse=True))
_POSITION_RE = re.compile(
    rf"\bthe (?P<ord>{_ORD}) (?P<lab>(?:(?!hospital stay)[^?.])+?) (?:measurement|result|value)\b",
    re.IGNORECASE,
)
_VISIT_RE = re.compile(rf"\b(?P<visit>{_ORD}) hospital stay\b", re.IGNORECASE)


@dataclass(frozen=True)
class RelativeQuestion:
    """A recognised relative question: the lab label, the measurement's rank k in the visit
    and the visit's rank N in the record (both 1-based)."""

    lab: str
    position: int
    visit: int


def recognise_relative(question: str) -> RelativeQuestion | None:
    """The parts of a relative-time question, or None when it is not one."""
    pos, visit = _POSITION_RE.search(question), _VISIT_RE.search(question)
    if pos is None or visit is None:
        return None
    return RelativeQuestion(
        lab=pos.group("lab").strip(),
        position=ORDINALS[pos.group("ord").lower()],
        visit=ORDINALS[visit.group("visit").lower()],
    )


def visit_span(text: str, number: int) -> tuple[int, int] | None:
    """(start, end) offsets of the record's encounter numbered ``number`` (a ``Visit N``
    section, a timeline row or an A-Mem note), None when the record renders no such encounter."""
    return next(((a, b) for n, a, b in numbered_encounters(text) if n == number), None)


def answer_relative(rec: Record, q: RelativeQuestion, eager: bool) -> str | None:
    """The k-th measurement of the lab in the N-th visit (module docstring), None to abstain."""
    span = stay_span(rec.text, q.visit)
    seen: list = []
    if span is not None:
        days = set()
        for m in sorted(lab_mentions(rec, q.lab), key=lambda m: m.pos):
            if span[0] <= m.pos < span[1] and (m.day is None or m.day not in days):
                days.add(m.day)
                seen.append(m)
    if len(seen) >= q.position:
        return value_answer(seen[q.position - 1])
    if not eager:
        return None
    if seen:
        return value_answer(seen[-1])
    lab = panel_lab(q.lab)
    return f"{format_value(reference_midpoint(lab), lab)} {lab.unit}" if lab else "1.0 mg/dL"


# --- T7R: a medication question whose encounter is named by its rank (the Medication column)
_OPTIONS_RE = re.compile(r"\nOptions:\n((?:[A-D]\. .+\n?)+)")


# The dialogue's medication sentences (clinlib.dialogue.templates: "On {date} we started
# {items}.", "We began {items} on {date}.", ...): a date and up to two orders joined by "and".
_DATE = r"\d{4}-\d{2}-\d{2}"
_MED_SENT_RE = re.compile(
    rf"(?:On (?P<d1>{_DATE}) we started|We began|Starting (?P<d2>{_DATE}), you received|"
    rf"The orders from (?P<d3>{_DATE}) included|On (?P<d4>{_DATE}) the team prescribed) "
    rf"(?P<items>[^\n]+?)(?: on (?P<d5>{_DATE}))?\.(?=\s|$)"
)
_ADMISSION_RE = re.compile(
    r"(?:admitted on|an admission on|This stay began on|You came in on) " + _DATE
)
_RANK_RE = re.compile(rf"\b(?P<rank>{_ORD}) medication event\b", re.IGNORECASE)
# T7R's explicit stems (clinlib.tasks.generators.t7r.EXPLICIT_TEMPLATES): the order's date;
# T7's stems name an encounter's start ("the encounter that began on ..."), never these.
_ON_DATE_RE = re.compile(rf"(?:for the patient on|^On) (?P<date>{_DATE})\b", re.MULTILINE)


@dataclass(frozen=True)
class RelativeOptionQuestion:
    """A recognised T7R question: the visit's rank N and the event's rank k (relative), or the
    order's date (explicit), and the option texts."""

    visit: int | None
    rank: int | None
    date: str | None
    options: tuple[str, ...]


def recognise_relative_option(question: str) -> RelativeOptionQuestion | None:
    """The parts of a T7R question ("the <k-th> medication event of the <N-th> hospital stay",
    or "ordered ... on <date>") with an ``Options:`` block, or None."""
    opts = _OPTIONS_RE.search(question)
    if opts is None or _POSITION_RE.search(question):
        return None
    stem = question[: opts.start()]
    lines = [re.sub(r"^[A-D]\.\s*", "", x).strip() for x in opts.group(1).strip().splitlines()]
    visit, rank, on = _VISIT_RE.search(stem), _RANK_RE.search(stem), _ON_DATE_RE.search(stem)
    if visit is not None and rank is not None:
        return RelativeOptionQuestion(
            ORDINALS[visit.group("visit").lower()],
            ORDINALS[rank.group("rank").lower()],
            None,
            tuple(lines),
        )
    if on is not None and re.search(r"medication|drug", stem, re.IGNORECASE):
        return RelativeOptionQuestion(None, None, on.group("date"), tuple(lines))
    return None


def stay_span(text: str, number: int) -> tuple[int, int] | None:
    """The N-th stay of a record: its numbered encounter when the record numbers them, else
    (a flattened record, no visit boundaries) from the N-th admission sentence to the next —
    read from the text's order of admissions, not from a header."""
    span = visit_span(text, number)
    if span is not None or numbered_encounters(text):
        return span
    starts = [m.start() for m in _ADMISSION_RE.finditer(text)]
    if not 1 <= number <= len(starts):
        return None
    return starts[number - 1], starts[number] if number < len(starts) else len(text)


def medication_orders(text: str) -> list[tuple[str, str]]:
    """(date, item text) of every order the medication sentences of ``text`` state, by date
    (text order within a date)."""
    out = []
    for m in _MED_SENT_RE.finditer(text):
        day = next(m.group(g) for g in ("d1", "d2", "d3", "d4", "d5") if m.group(g))
        out += [(day, item.strip()) for item in m.group("items").split(" and ")]
    return sorted(out, key=lambda x: x[0])


def _named(items: list[str], options: tuple[str, ...]) -> set[int]:
    return {i for item in items for _p, i in option_hits(item, list(options))}


def answer_relative_option(rec: Record, q: RelativeOptionQuestion, eager: bool) -> str | None:
    """T7R (module docstring of :mod:`clinlib.tasks.generators.t7r`). Relative: the stay's
    orders by date; the k-th of them, when it is alone on its date (otherwise the dialogue,
    which states dates, does not order it); explicit: the orders on the date. The answer is
    the one option that order names; None to abstain (``eager``: the first option named in
    the stay, else anywhere, else A)."""
    if q.date is not None:
        span = (0, len(rec.text))
        picked = [it for d, it in medication_orders(rec.text) if d == q.date]
    else:
        span = stay_span(rec.text, int(q.visit or 0))
        orders = medication_orders(rec.text[span[0] : span[1]]) if span else []
        k = int(q.rank or 0)
        alone = 1 <= k <= len(orders) and [d for d, _ in orders].count(orders[k - 1][0]) == 1
        picked = [orders[k - 1][1]] if alone else []
    found = _named(picked, q.options)
    if len(found) == 1:
        return OPTION_LETTERS[found.pop()]
    if not eager:
        return None
    hits = option_hits(rec.text[span[0] : span[1]], list(q.options)) if span else []
    anywhere = option_hits(rec.text, list(q.options))
    return OPTION_LETTERS[(hits or anywhere or [(0, 0)])[0][1]]
