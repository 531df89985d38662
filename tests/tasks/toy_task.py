"""A toy task declared from a spec alone (docs/extending.md "Add a task"): "how many lab results
of this patient does the record discuss?". Everything the kit needs about the task is here: its
answer kind (a bare count), generator, gate-L2 recomputation and gate-L3 leak check.
"""

from __future__ import annotations

import re

import pandas as pd

from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE
from clinlib.tasks.answers.kinds import AnswerKind
from clinlib.tasks.generators.common import question_row, to_frame
from clinlib.tasks.generators.inputs import TaskInputs
from clinlib.tasks.recompute import Recomputed
from clinlib.tasks.spec import TaskSpec

TASK = "TX"
FORMAT = "Reply with a number only (for example: 4). " + ABSTAIN_CLAUSE
TEMPLATES = ("How many lab results of this patient does the record discuss?",)


def _count_strict(norm: str, options=None) -> str | None:
    return norm if re.fullmatch(r"\d+", norm) else None


def _count_lenient(text: str, options=None) -> str | None:
    found = set(re.findall(r"\b\d+\b", text))
    return found.pop() if len(found) == 1 else None


def _count_gold(gold: str, options=None) -> str | None:
    return None if re.fullmatch(r"\d+", gold) else "not a count"


COUNT = AnswerKind("count", _count_strict, _count_lenient, _count_gold)


def generate(inp: TaskInputs) -> pd.DataFrame:
    labs = [e for e in inp.records if e["kind"] == "lab" and e["status"] == "covered"]
    rows = []
    for sid in sorted({e["subject_id"] for e in labs}):
        ids = sorted(str(e["event_id"]) for e in labs if e["subject_id"] == sid)
        rows.append(
            question_row(
                inp,
                task=TASK,
                subtype="all",
                subject_ids=[sid],
                anchors=ids,
                templates=TEMPLATES,
                fields={},
                gold=str(len(ids)),
                meta={"subject_id": int(sid)},
            )
        )
    return to_frame(rows)


def recompute(meta, question, raw, status) -> Recomputed:
    anchors = [str(a) for a in question["anchor_event_ids"]]
    covered = [a for a in anchors if status.get(a) == "covered"]
    return Recomputed(str(len(covered)), tuple(covered))


def leak(row) -> str | None:
    return "the stem states the count" if str(row["gold"]) in str(row["question"]) else None


SPEC = TaskSpec(
    name=TASK,
    title="Lab results discussed (toy)",
    answer_format=FORMAT,
    max_tokens=20,
    answer=COUNT,
    family="extended",
    subtypes=("all",),
    generate=generate,
    recompute=recompute,
    leak=leak,
    counts={"paper": 10, "quick": 4},
)
