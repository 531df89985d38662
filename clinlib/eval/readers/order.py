"""The offline readers on T10 ordering questions (LongMedBench "Temporal reasoning", Table 3;
docs/design.md "T10"). Like every reader policy, they see only the prompt.

* visit cloze: the removed events keep their timestamps (``A. YYYY-MM-DD HH:MM ...``), so
  ``reference`` and ``eager`` both order them by timestamp and insert each after the last
  numbered visit line (``[i] YYYY-MM-DD HH:MM ...``) stamped before it (``C:0, A:3, B:3``;
  tau = 1, what a perfect reader of the stated cue achieves; the seed's top models reach
  0.925–0.969).
* visit / joint sorting: the clips state no date, so there is no cue a rule can read:
  ``reference`` abstains ("insufficient information", score 0). ``eager`` never abstains
  and applies one documented clinical-progression heuristic: chronic diagnoses accumulate,
  so visits (joint: discharge halves) are ordered by the number of diagnoses they list,
  fewest first, ties in shown order; in joint sorting each admission half is paired with
  the discharge half at its shown rank (admission halves in shown order). Its tau measures
  how much that heuristic carries, not reasoning. Visit sorting from notes is read the same
  way (a note lists its "Discharge diagnoses:").
"""

from __future__ import annotations

import re

from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.templates import T10_MARKERS

_ITEM_RE = re.compile(r"^([A-J])\. (.*)$", re.MULTILINE)
_STAMP_RE = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\b")
_LINE_RE = re.compile(r"^\[(\d+)\] (\d{4}-\d{2}-\d{2} \d{2}:\d{2})\b", re.MULTILINE)


def order_subtype(question: str) -> str | None:
    """The T10 subtype a question's wording marks (None: not a T10 question)."""
    for subtype, marker in T10_MARKERS.items():
        if marker in question:
            return subtype
    return None


def _items(question: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _ITEM_RE.finditer(question)]


def _n_diagnoses(clip: str) -> int:
    m = re.search(r"[Dd]iagnoses: (.*?)\.(?: [A-Z]|$)", clip)
    if m is None or m.group(1) == "none coded":
        return 0
    return len(m.group(1).split("; "))


def answer_order(question: str, eager: bool = False) -> str:
    """A reader's answer to a T10 question (module docstring)."""
    subtype = order_subtype(question)
    items = _items(question)
    if subtype is None or len(items) < 2:
        return ABSTAIN
    if subtype == "visit_cloze":
        stamps = [_STAMP_RE.match(text) for _, text in items]
        if any(s is None for s in stamps):
            return ABSTAIN
        ranked = sorted(range(len(items)), key=lambda i: stamps[i].group(1))
        lines = [m.group(2) for m in _LINE_RE.finditer(question)]
        if not lines:  # a cloze without numbered lines asks for the order only
            return ", ".join(items[i][0] for i in ranked)
        gap = [sum(line < stamps[i].group(1) for line in lines) for i in range(len(items))]
        return ", ".join(f"{items[i][0]}:{gap[i]}" for i in ranked)
    if not eager:
        return ABSTAIN  # no stated cue: the clips carry no date
    if subtype in ("visit_sorting", "visit_sorting_notes"):
        ranked = sorted(range(len(items)), key=lambda i: _n_diagnoses(items[i][1]))
        return ", ".join(items[i][0] for i in ranked)
    adm = [label for label, text in items if text.startswith("Admission type:")]
    dis = [(label, text) for label, text in items if not text.startswith("Admission type:")]
    dis = [label for label, _ in sorted(dis, key=lambda x: _n_diagnoses(x[1]))]
    if len(adm) != len(dis):  # not halves after all: keep the shown order
        return ", ".join(label for label, _ in items)
    return ", ".join(x for pair in zip(adm, dis, strict=True) for x in pair)
