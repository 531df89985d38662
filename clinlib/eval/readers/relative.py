"""The offline readers' rule for relative-time questions (the extended T1R task, LongMedBench
"event retrieval"): "the {ordinal} {lab} measurement of the {visit} hospital stay" (templates
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
    span = visit_span(rec.text, q.visit)
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


@dataclass(frozen=True)
class RelativeOptionQuestion:
    """A recognised relative T7R question: the visit's rank N and the option texts."""

    visit: int
    options: tuple[str, ...]


def recognise_relative_option(question: str) -> RelativeOptionQuestion | None:
    """The parts of a relative multiple-choice question ("... during the patient's third
    hospital stay?" + an ``Options:`` block), or None."""
    visit, opts = _VISIT_RE.search(question), _OPTIONS_RE.search(question)
    if visit is None or opts is None or _POSITION_RE.search(question):
        return None
    lines = [re.sub(r"^[A-D]\.\s*", "", x).strip() for x in opts.group(1).strip().splitlines()]
    return RelativeOptionQuestion(ORDINALS[visit.group("visit").lower()], tuple(lines))


def answer_relative_option(rec: Record, q: RelativeOptionQuestion, eager: bool) -> str | None:
    """T7's rule inside the N-th encounter: the one option named there (module docstring of
    :mod:`clinlib.eval.readers.answers` for T7); None to abstain when the encounter is not
    rendered or names none or several (``eager``: the first option named anywhere, else A)."""
    span = visit_span(rec.text, q.visit)
    hits = option_hits(rec.text[span[0] : span[1]], list(q.options)) if span else []
    if len({i for _p, i in hits}) == 1:
        return OPTION_LETTERS[hits[0][1]]
    if not eager:
        return None
    anywhere = option_hits(rec.text, list(q.options))
    return OPTION_LETTERS[(hits or anywhere or [(0, 0)])[0][1]]
