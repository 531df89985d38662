"""T1 numeric lab retrieval (paper §3 "Task suite": "Given a lab name and date, return the
value"; Fig. 1 point-in-time retrieval; Appendix B.1).

Candidates: every covered lab event that is the ONLY lab event of its (patient, lab, calendar
date) in the events table, so the question has exactly one right answer. Gold
``"<value_text> <unit>"`` as reported (``"1.3 mg/dL"``). Subtype: ``abnormal`` / ``normal``
(the source flag) — abnormal values draw a clinician reaction in the dialogue, normal ones are
often listed in passing. Candidates are thinned to MAX_PER_SERIES per (patient, lab,
subtype) by a stable hash (documented subsampling). Results that are not numbers (free text) get no question, and a
candidate whose wording would contain its own value outside dates is dropped (L3).
"""

from __future__ import annotations

import pandas as pd

from clinlib.tasks.answers.formats import VALUE_FORMAT
from clinlib.tasks.answers.kinds import VALUE
from clinlib.tasks.gates.leaks import value_leak
from clinlib.tasks.generators.common import (
    NUMERIC_TEXT,
    TaskInputs,
    lab_event_meta,
    mentions_number,
    question_row,
    thin,
    to_frame,
)
from clinlib.tasks.recompute.per_task import gold_t1
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T1_TEMPLATES

TASK = "T1"
SUBTYPES = ("abnormal", "normal")
MAX_PER_SERIES = 2


def _thinned(inp: TaskInputs) -> list[dict]:
    """At most MAX_PER_SERIES eligible lab events per (patient, lab, subtype), by a stable hash
    of the event id: a patient has hundreds of eligible values and selection needs few."""
    eligible = [
        e
        for e in inp.records
        if e["kind"] == "lab" and e["lab_key"] is not None and _eligible(inp, e)
    ]
    return thin(
        eligible,
        key=lambda e: (e["subject_id"], e["lab_key"], e["flag"] == "abnormal"),
        ident=lambda e: e["event_id"],
        cap=MAX_PER_SERIES,
        salt="T1",
    )


def _eligible(inp: TaskInputs, e: dict) -> bool:
    return (
        e["status"] == "covered"
        and inp.lab_day_count[(e["subject_id"], e["lab_key"], e["date"])] == 1
        and e["value_text"] is not None
        and e["unit"] is not None
        and e["value"] is not None
    )


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T1 candidates (QUESTION_COLUMNS + conflicts)."""
    rows = []
    for e in _thinned(inp):
        value_text = str(e["value_text"]).strip()
        if not NUMERIC_TEXT.fullmatch(value_text):
            continue  # a free-text result ("NEG") has no canonical T1 gold
        abnormal = e["flag"] == "abnormal"
        unit = str(e["unit"]).strip()
        row = question_row(
            inp,
            task=TASK,
            subtype="abnormal" if abnormal else "normal",
            subject_ids=[e["subject_id"]],
            anchors=[e["event_id"]],
            templates=T1_TEMPLATES,
            fields={"lab": e["label"], "date": e["date"]},
            gold=f"{value_text} {unit}",
            meta={
                **lab_event_meta(e),
                "value": float(e["value"]),
                "value_text": value_text,
                "unit": unit,
                "flag": "abnormal" if abnormal else None,
            },
        )
        if mentions_number(row["_body"], value_text):
            continue
        rows.append(row)
    return to_frame(rows)


SPEC = TaskSpec(
    name=TASK,
    title="Numeric lab retrieval",
    answer_format=VALUE_FORMAT,
    max_tokens=60,
    answer=VALUE,
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=gold_t1,
    leak=value_leak,
    reader_policy="clinlib.eval.readers.policies:answer_t1",
)
