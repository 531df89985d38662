"""Source text is data, not instructions: the ONE helper every question builder passes a
free-text source field through before it reaches a prompt (drug names, lab and diagnosis
labels, locations, report text), and the gate row that flags an injection-shaped one.

:func:`as_data` — what a field may do to a prompt:

* it stays on its own line: control characters (newlines, tabs, NUL ...) become one space, so
  a drug name cannot open a forged ``Options:`` or ``Reply ...`` line;
* it is length-bounded: at most :data:`MAX_CHARS` characters (the longest label of the kit's
  vocabularies is 126), the rest cut and marked ``…``;
* a field that looks like an instruction or markup (:func:`injection_shaped`) is QUOTED as data
  (``"..."``, inner quotes escaped) so the prompt shows it as a value, not as text addressed to
  the reader. Deviation, named: a field without that shape is left unquoted, so the question
  sets (and the readers that recognise their wording) stay as they were; quoting every field
  would change all 6,271 question texts for no added safety on the kit's own vocabularies.

:func:`source_text_gate_rows` — a soft gate row per task (``source_text``) in the questions
stages' gate reports: how many questions carry an injection-shaped source field, the first
named. It never fails the set (the field is already quoted); it tells the operator that a
source holds text written at the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

MAX_CHARS = 200
# a template field may join several labels (T4's abnormal labs): bounded more loosely
FIELD_MAX_CHARS = 1000
ELLIPSIS = "…"
QUOTED = re.compile(r'^"(?:[^"\\]|\\.)*"$')
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b[^.]{0,40}\b(?:instructions?|prompts?|rules|above)\b"
    r"|<\s*/?\s*(?:script|iframe|img|system|im_start|im_end)\b"
    r"|\b(?:system|assistant|user)\s*(?:prompt)?\s*:"
    r"|\byou are now\b|\bnew instructions?\b|\breply (?:only|exactly)\b|\{\{|\}\}|```",
    re.IGNORECASE,
)


def injection_shaped(text: Any) -> str | None:
    """The first instruction- or markup-shaped span of ``text`` (None: none)."""
    m = _INJECTION.search(str(text))
    return None if m is None else m.group(0)


def as_data(text: Any, limit: int = MAX_CHARS) -> str:
    """``text`` as a prompt may carry it (module docstring): on one line, at most ``limit``
    characters, quoted when it is injection-shaped."""
    s = _CONTROL.sub(" ", "" if text is None else str(text))
    if len(s) > limit:
        s = s[: limit - 1].rstrip() + ELLIPSIS
    if injection_shaped(s) and not QUOTED.match(s):
        s = '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


class Assembled(str):
    """A multi-line block a generator assembled from lines it already passed through
    :func:`as_data` (T10's visit stream, T11's stay): a template field :func:`as_data_fields`
    keeps as it is. Any other string field is source text and is flattened to one line."""


def as_data_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Every string value of a template's fields through :func:`as_data` (bounded at
    :data:`FIELD_MAX_CHARS`), except an :class:`Assembled` block; other values kept."""
    return {
        k: as_data(v, FIELD_MAX_CHARS) if isinstance(v, str) and not isinstance(v, Assembled) else v
        for k, v in fields.items()
    }


_QUOTED_SPAN = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def quoted_injection(text: Any) -> str | None:
    """The first quoted span of a question that is injection-shaped: a source field
    :func:`as_data` quoted (the templates' own wording is never quoted)."""
    return next(
        (m.group(0) for m in _QUOTED_SPAN.finditer(str(text)) if injection_shaped(m.group(0))), None
    )


def flagged(questions: pd.DataFrame) -> pd.DataFrame:
    """The questions carrying an injection-shaped source field: qid, task, span."""
    rows = [
        (q, t, span)
        for q, t, text in zip(
            questions["qid"], questions["task"], questions["question"], strict=True
        )
        if (span := quoted_injection(text))
    ]
    return pd.DataFrame(rows, columns=["qid", "task", "span"])


def source_text_gate_rows(questions: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """One soft ``source_text`` gate row per task of ``questions`` (module docstring)."""
    hits = flagged(questions)
    rows = []
    for task, n in questions["task"].value_counts(sort=False).items():
        mine = hits[hits["task"] == task]
        detail = ""
        if len(mine):
            first = mine.iloc[0]
            detail = json.dumps({"qid": first["qid"], "span": first["span"]})
        rows.append(
            {
                "gate": "source_text",
                "task": task,
                "n_checked": int(n),
                "n_failed": len(mine),
                "threshold": 0.0,
                "passed": mine.empty,
                "severity": "soft",
                "detail": detail,
            }
        )
    return pd.DataFrame(rows, columns=list(columns))
