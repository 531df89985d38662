"""The offline readers on T11 decision questions (LongMedBench's decision task, T3-N / T3-A / T3-D: next action, argument,
discharge within 6 h; the task: :mod:`clinlib.tasks.generators.t11`). Like every reader
policy they see only the prompt: the question (the current stay up to the cut, "It is now
...", the options) and the context (the memory, e.g. ``history-visits(m=...)``). They are
deterministic policies, not clinical reasoning; each rule is one documented habit:

* next action — persistence: the kind of the LAST action line of the stated stay (a
  ``labs`` line -> lab test, ``medication`` -> medication order, ``procedure``);
* argument — repetition: the option whose text is mentioned latest in the stated stay, else
  latest in the memory;
* discharge — the patient's usual length of stay: each earlier stay in the memory (a ``Visit N
  (date)`` section; without headers, from one admission sentence to the next) lasts from its
  start date to the last date it mentions (its discharge sentence); "yes" iff the days elapsed since this stay's admission line reach the median
  of those lengths. It needs the memory: with no earlier stay shown it has no cue.

``reference`` abstains where its rule finds no cue; ``eager`` answers the first option
(next action, argument) or "no" (discharge) instead.
"""

from __future__ import annotations

import re
import statistics
from datetime import date

from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.templates import T11_MARKERS

_ITEM_RE = re.compile(r"^([A-J])\. (.*)$", re.MULTILINE)
_LINE_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2}) \d{2}:\d{2} (labs|lab|medication|procedure|admission):", re.MULTILINE
)
_NOW_RE = re.compile(r"It is now (\d{4}-\d{2}-\d{2}) \d{2}:\d{2}")
_VISIT_RE = re.compile(r"^Visit \d+ \((\d{4}-\d{2}-\d{2})\)", re.MULTILINE)
# Without visit headers (a flattened record, discharge notes): a stay starts at its admission
# sentence (the dialogue's admission frames, a note's "Admitted on").
_ADMITTED_RE = re.compile(
    r"(?:[Aa]dmitted on|an admission on|This stay began on|You came in on) (\d{4}-\d{2}-\d{2})"
)
_DATE_RE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
KIND_OPTION = {
    "labs": "lab test",
    "lab": "lab test",
    "medication": "medication order",
    "procedure": "procedure",
}


def decision_subtype(question: str) -> str | None:
    """The T11 subtype a question's wording marks (None: not a T11 question)."""
    for subtype, marker in T11_MARKERS.items():
        if marker in question:
            return subtype
    return None


def _items(question: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _ITEM_RE.finditer(question)]


def _stay(question: str) -> str:
    return question.split("It is now")[0]


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def usual_stay_days(record: str) -> float | None:
    """Median length in days of the earlier stays the memory shows (module docstring), None
    when it shows none."""
    heads = list(_VISIT_RE.finditer(record)) or list(_ADMITTED_RE.finditer(record))
    lengths = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(record)
        start = _day(m.group(1))
        days = [d for d in (_day(x) for x in _DATE_RE.findall(record[m.end() : end])) if d]
        if start is not None and days:
            lengths.append((max(days) - start).days)
    return float(statistics.median(lengths)) if lengths else None


def _next_action(question: str, items: list[tuple[str, str]]) -> str | None:
    kinds = [m.group(2) for m in _LINE_RE.finditer(_stay(question)) if m.group(2) != "admission"]
    if not kinds:
        return None
    want = KIND_OPTION[kinds[-1]]
    return next((letter for letter, text in items if text == want), None)


def _last_mention(text: str, option: str) -> int:
    return text.rfind(option) if option else -1


def _argument(record: str, question: str, items: list[tuple[str, str]]) -> str | None:
    for text in (_stay(question), record):
        pos = [(_last_mention(text, opt), letter) for letter, opt in items]
        best = max(pos)
        if best[0] >= 0:
            return best[1]
    return None


def _discharge(record: str, question: str) -> str | None:
    usual = usual_stay_days(record)
    adm = next((m for m in _LINE_RE.finditer(_stay(question)) if m.group(2) == "admission"), None)
    now = _NOW_RE.search(question)
    if usual is None or now is None or adm is None:
        return None
    elapsed = (_day(now.group(1)) - _day(adm.group(1))).days
    return "A" if elapsed >= usual else "B"


_ACTION_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2} (lab|medication|procedure): assistant — "
    r"(?:draws|orders|performs) (.+)$",
    re.MULTILINE,
)
_KIND_OF = {"lab test": "lab", "medication order": "medication", "procedure": "procedure"}


def answer_open(record: str, question: str, eager: bool = False) -> str:
    """The open-ended variant (T11O), by the same habits: next action — the kind of the last
    action turn of the stated stay; argument — the name of the latest action of the given
    kind in the stated stay (its first lab of a draw; an order's text), else ``ABSTAIN``
    (``eager``: ``lab test`` / ``Potassium``)."""
    subtype = decision_subtype(question)
    acts = [(m.group(1), m.group(2)) for m in _ACTION_RE.finditer(_stay(question))]
    if subtype == "next_action":
        if acts:
            return KIND_OPTION[acts[-1][0]]
        return "lab test" if eager else ABSTAIN
    given = re.search(r"the next action is a (lab test|medication order|procedure)", question)
    kind = _KIND_OF[given.group(1)] if given else None
    named = [what for k, what in acts if k == kind]
    if named:
        return named[-1].split("; ")[0]
    return "Potassium" if eager else ABSTAIN


def answer_decision(record: str, question: str, eager: bool = False) -> str:
    """A reader's answer to a T11 question (module docstring): one option letter or
    ``ABSTAIN``; a question without options is the open variant (:func:`answer_open`)."""
    subtype = decision_subtype(question)
    items = _items(question)
    if subtype is not None and not items and subtype != "discharge":
        return answer_open(record, question, eager)
    if subtype is None or not items:
        return ABSTAIN
    if subtype == "next_action":
        out = _next_action(question, items)
    elif subtype == "argument":
        out = _argument(record, question, items)
    else:
        out = _discharge(record, question)
    if out is not None:
        return out
    if not eager:
        return ABSTAIN
    return "B" if subtype == "discharge" else items[0][0]
