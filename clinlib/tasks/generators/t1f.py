"""T1F rejection questions, an extended task beside T1R (LongMedBench "event retrieval",
Table 2's Lab-F column: "Results in Table 2 report Lab-T (recall) and Lab-F (rejection) to
assess hallucination impact"; seed fact ``lmb_explicit_decay``). Not part of the paper's
6,271 questions.

A T1F question is worded exactly like a relative T1R question ("the third Potassium
measurement of the second hospital stay", T1R's templates) but names a measurement that does
not exist: the visit holds n measurements of the lab and the question asks the (n + 1)-th.
The correct answer is to say so (gold ``insufficient information``; answers are read as T9's,
its spec's answer kind is T9's ``ABSTENTION``), so a value is a hallucinated over-answer.

Eligible series are T1R's (:func:`clinlib.tasks.generators.t1r.visit_series`: at least two
measurements in the visit, all covered by the dialogue, on distinct days, each alone on its
day), so the dialogue states exactly n of them and the asked rank n + 1 <=
:data:`clinlib.tasks.generators.t1r.MAX_POSITION`. Anchors are the n measurements (the evidence
that there is no (n + 1)-th, and what places a history window). One candidate per series,
at most MAX_PER_SERIES per (patient, lab), by a stable hash.
"""

from __future__ import annotations

import pandas as pd

from clinlib.dialogue.turns import ordinal_word
from clinlib.tasks.answers.formats import VALUE_FORMAT
from clinlib.tasks.answers.kinds import ABSTENTION
from clinlib.tasks.base import ABSTAIN, STATED_NUMBER
from clinlib.tasks.gates.leaks import rejection_leak
from clinlib.tasks.generators.common import lab_event_meta, question_row, thin, to_frame
from clinlib.tasks.generators.inputs import TaskInputs
from clinlib.tasks.generators.t1r import MAX_POSITION, series_ok, visit_counts, visit_series
from clinlib.tasks.recompute.t1r import recompute_t1f
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T1R_RELATIVE_TEMPLATES

TASK = "T1F"
SUBTYPES = ("relative",)
MAX_PER_SERIES = 1


def _row(inp: TaskInputs, series: list[dict], n_visits: int) -> dict | None:
    first, n = series[0], len(series)
    meta = {
        **lab_event_meta(first),
        "event_id": None,
        "date": None,
        "n_visits": int(n_visits),
        "position": n + 1,
        "n_in_visit": n,
    }
    row = question_row(
        inp,
        task=TASK,
        subtype="relative",
        subject_ids=[first["subject_id"]],
        anchors=[r["event_id"] for r in series],
        templates=T1R_RELATIVE_TEMPLATES,
        fields={
            "lab": first["label"],
            "ordinal": ordinal_word(n + 1),
            "visit": ordinal_word(int(first["visit_idx"]) + 1),
        },
        gold=ABSTAIN,
        meta=meta,
        fmt=VALUE_FORMAT,
    )
    return None if STATED_NUMBER.search(row["_body"]) else row


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T1F candidates (QUESTION_COLUMNS + conflicts), sorted by qid."""
    ok = [s for s in visit_series(inp).values() if series_ok(inp, s) and len(s) < MAX_POSITION]
    picked = thin(
        ok,
        key=lambda s: (s[0]["subject_id"], s[0]["lab_key"]),
        ident=lambda s: s[0]["event_id"],
        cap=MAX_PER_SERIES,
        salt=TASK,
    )
    visits = visit_counts(inp)
    rows = [_row(inp, s, visits[s[0]["subject_id"]]) for s in picked]
    return to_frame([r for r in rows if r is not None])


SPEC = TaskSpec(
    name=TASK,
    title="Rejection of an absent measurement (extended set)",
    answer_format=VALUE_FORMAT,
    max_tokens=60,
    answer=ABSTENTION,
    family="extended",
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=recompute_t1f,
    leak=rejection_leak,
    counts={"paper": 300, "quick": 12},
)
