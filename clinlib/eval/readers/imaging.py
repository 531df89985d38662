"""The offline readers' policy for T7I imaging retrieval (a deterministic rule, not an LLM):
the question states the imaging memory (stays and radiology reports in time order, no visit
numbers) and four options; the rule finds the study by its date (explicit) or by counting
admission lines to the N-th stay and reports inside it to the k-th (relative), and answers the
option that names it. ``reference`` abstains when nothing matches; ``eager`` answers A."""

from __future__ import annotations

import re

from clinlib.eval.readers.relative import ORDINALS
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.generators.t7i import MEMORY_HEADER

_ORD = "|".join(sorted((re.escape(w) for w in ORDINALS), key=len, reverse=True))
_REL = (
    re.compile(
        rf"the (?P<rank>{_ORD}) imaging event of the patient's (?P<visit>{_ORD}) hospital", re.I
    ),
    re.compile(
        rf"patient's (?P<visit>{_ORD}) hospital stay, which study was the (?P<rank>{_ORD})", re.I
    ),
)
_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_EXAM = re.compile(r"EXAMINATION: (.+?)\. DATE: (\d{4}-\d{2}-\d{2})")
_OPTION = re.compile(r"^([A-D])\. (.+)$", re.M)


def is_imaging(question: str) -> bool:
    """Whether a question is a T7I question (it states the imaging memory)."""
    return MEMORY_HEADER in question


def _stays(question: str) -> list[list[tuple[str, str]]]:
    """The memory's stays, each its reports as (study, date) in order."""
    stays: list[list[tuple[str, str]]] = []
    for line in question.split(MEMORY_HEADER, 1)[1].splitlines():
        if line.endswith("admitted to hospital."):
            stays.append([])
        elif (m := _EXAM.search(line)) and stays:
            stays[-1].append((m.group(1), m.group(2)))
    return stays


def answer_imaging(question: str, eager: bool) -> str:
    """The letter of the option naming the asked study (module docstring)."""
    first = question.split("\n", 1)[0]
    options = {text.strip(): letter for letter, text in _OPTION.findall(question)}
    stays, found = _stays(question), None
    rel = next((m for rx in _REL if (m := rx.search(first))), None)
    if rel is not None:
        v, k = ORDINALS[rel.group("visit").lower()], ORDINALS[rel.group("rank").lower()]
        if v <= len(stays) and k <= len(stays[v - 1]):
            found = stays[v - 1][k - 1][0]
    elif (d := _DATE.search(first)) is not None:
        hits = [s for stay in stays for s, day in stay if day == d.group(1)]
        found = hits[0] if len(hits) == 1 else None
    if found in options:
        return options[found]
    return "A" if eager else ABSTAIN
