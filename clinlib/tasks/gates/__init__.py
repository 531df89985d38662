"""Validation gates L0–L4 on the candidate evaluation set (paper Appendix A; Fig. 2 stage 4
"L0–L4 deterministic + L5 human audit"; L5 support lives in :mod:`clinlib.tasks.audit`).

:func:`run_gates` returns one row per (gate, task) — gate, task, n_checked, n_failed,
threshold, passed, severity, detail — for all nine tasks (a task without questions is checked
on nothing and flagged by L4). :func:`check_gates` raises :class:`GateError` when a HARD gate
failed, so nothing downstream runs on a set that failed; :func:`gate_report` renders the table.

L0 schema (hard, 0 failures). Every :data:`clinlib.tasks.base.QUESTION_COLUMNS` column is
    present; per row: qid ``"<task>-..."`` and unique; task T1..T9; non-empty strings; lists
    where lists are due (subject_ids: one patient, two distinct for T6; evidence_turns
    ``"<subject>:<turn>"``); template_id >= 0; disease an index disease, tertile
    low/medium/high; meta a JSON object; injection "" or JSON; gold in the task's canonical
    vocabulary (:func:`clinlib.tasks.answers.gold_problem`); T7 four distinct options, other
    tasks none; T10 (extended set) 3–10 distinct items and a gold that is a permutation of
    their letters.
L1 anchor source (hard, < 1%). T1–T8: every anchor is a ``covered`` event
    (event_coverage.status) of the question's patients; anchors may be empty only for
    :data:`ANCHORLESS_SUBTYPES`. T9: every anchor is a ``missed`` event; a T9 question without
    anchors (a lab never measured on a date) must have no event of that lab on that date in the
    events table and no panel row of it that day in the raw labevents. T10: every anchor is a
    ``covered`` or ``missed`` event of the patient (the question lists its items itself).
    Plausibility, ZERO tolerance: no question may rest on a source row the
    cohort stage excluded as implausible (exclusions.parquet: an admission, a lab row, a
    pharmacy order) — neither an anchor nor a gold source row its meta names (event ids,
    hadm_ids: T4's evidence and earlier stays, T6's labs ...); one such question fails L1
    whatever its 1% threshold. L1 and not L2, because it is about where a question's facts
    come from; L2's recompute reads the raw tables with the excluded rows hidden
    (clinlib.data.plausibility.apply_exclusions), so it would only disagree, not say why.
L2 gold recompute (hard, < 0.5%). :mod:`clinlib.tasks.recompute` regenerates every gold from
    the raw hosp tables and the question's meta with its own SQL and arithmetic; a question
    fails when the gold differs, cannot be recomputed, or (where the rule fixes them) the
    recomputed anchor events differ from the question's.
L3 no gold leakage (hard, 0 failures). The question stem — the text without the task's
    answer-format statement, the shared abstention clause and T7's options block — must not
    contain: T1 the gold value (as a number, dates excluded); T2 / T8 the gold's label words
    unless every alternative of that axis is listed (a list of choices is not a leak); T3 / T5
    the injected sentence or its "Physician noted:" marker; T4 any gold event id; T6 the
    computed values of A or B (rule parameters such as "5%" excluded); T7 the answer option's
    text; T8 the before/after values; T9 an abstention cue (:data:`T9_CUES`); T10 see
    :mod:`clinlib.tasks.gates.ordering` (no date / ordinal in a sorting clip, no removed cloze
    event left in the visit, items not shown in gold order); T1R T1's rule, and a relative
    stem states no number (no date, time or visit number: the position, in words, is its only
    cue; "A1c" is a name).
L4 distribution coverage (soft). Per task: no empty disease / tertile / subtype stratum when
    the task has at least as many questions as strata; no disease holding more than twice its
    uniform share; no patient above :data:`MAX_PATIENT_SHARE` of a task of >= 20 questions;
    event-type mix of T7 (medication vs procedure) and T9 (lab vs other) within
    :data:`EVENT_TYPE_TARGETS`. Reported, never blocking — except for the binary tasks
    (:data:`BINARY_TASKS`: T3, T5), whose L4 row turns HARD when, from
    :data:`MIN_N_BINARY` questions, the rarer gold holds under :data:`MIN_MINORITY_SHARE` or one
    subtype holds over :data:`MAX_SUBTYPE_SHARE` (:func:`binary_collapse`): a set where a
    constant "yes" scores 100% must not be used.
"""

from __future__ import annotations

from clinlib.tasks.gates.common import (
    GATE_COLUMNS,
    GATE_NAMES,
    INPUT_COLUMNS,
    SEVERITY,
    THRESHOLDS,
    GateError,
    GateInputError,
)
from clinlib.tasks.gates.content import (
    BINARY_TASKS,
    EVENT_TYPE_TARGETS,
    MAX_PATIENT_SHARE,
    MAX_SUBTYPE_SHARE,
    MIN_MINORITY_SHARE,
    MIN_N_BINARY,
    T9_CUES,
    binary_collapse,
    gate_l3,
    gate_l4,
    question_stem,
)
from clinlib.tasks.gates.content import leak as leak  # tests probe the L3 check row by row
from clinlib.tasks.gates.gold import gate_l2
from clinlib.tasks.gates.run import check_gates, failed_hard, gate_report, run_gates
from clinlib.tasks.gates.structure import ANCHORLESS_SUBTYPES, gate_l0, gate_l1

__all__ = [
    "ANCHORLESS_SUBTYPES",
    "BINARY_TASKS",
    "MAX_SUBTYPE_SHARE",
    "MIN_MINORITY_SHARE",
    "MIN_N_BINARY",
    "binary_collapse",
    "EVENT_TYPE_TARGETS",
    "GATE_COLUMNS",
    "GATE_NAMES",
    "INPUT_COLUMNS",
    "MAX_PATIENT_SHARE",
    "SEVERITY",
    "T9_CUES",
    "THRESHOLDS",
    "GateError",
    "GateInputError",
    "check_gates",
    "failed_hard",
    "gate_l0",
    "gate_l1",
    "gate_l2",
    "gate_l3",
    "gate_l4",
    "gate_report",
    "question_stem",
    "run_gates",
]
