"""Gate L2 gold recompute (paper Appendix A: "the gold is independently regenerated from
the spec and the raw structured fields"; the recomputation is :mod:`clinlib.tasks.recompute`).

L2 also re-derives the answer form from the question's own wording where it can
(:func:`clinlib.tasks.paraphrase_invariants.asked_form`: a question asking "on what date"
expects a date, a polar question yes/no, an options block a letter, ...; for the paper's T1-T9,
``FORM_TASKS``) and fails a question whose gold is not of that form: the gold is recomputed
from ``meta``, so a reworded question that now asks for something else would otherwise keep a
gold that does not answer it.
"""

from __future__ import annotations

import pandas as pd

from clinlib.tasks.gates.common import as_list, check_per_task
from clinlib.tasks.gates.leaks import question_stem
from clinlib.tasks.paraphrase_invariants import form_problem
from clinlib.tasks.recompute import RawRecord, recompute_question

# --------------------------------------------------------------------------- L2


def gate_l2(
    questions: pd.DataFrame, raw: RawRecord, coverage: pd.DataFrame
) -> dict[str, tuple[int, list[tuple[str, str]]]]:
    """L2 gold-recompute failures per task (see module docstring)."""
    status = dict(
        zip(
            coverage["event_id"].astype(str).tolist(),
            coverage["status"].astype(str).tolist(),
            strict=True,
        )
    )

    def check(row):
        question, task = str(row.get("question") or ""), str(row.get("task"))
        form = form_problem(question_stem(row), question, row["gold"], task)
        if form:
            return form
        rec = recompute_question(row, raw, status)
        if rec.gold is None:
            return f"not recomputable: {rec.problem}"
        if rec.gold != row["gold"]:
            return f"gold {row['gold']!r} but recomputed {rec.gold!r}"
        if rec.anchors is not None:
            have = sorted(str(a) for a in (as_list(row.get("anchor_event_ids")) or []))
            if sorted(rec.anchors) != have:
                return f"anchors {have} but recomputed {sorted(rec.anchors)}"
        return rec.problem

    return check_per_task(questions, check)
