"""The task registry's shared types (paper §3 "Task suite", Fig. 1; Appendix A/B/G.3).

A task owns four things: its question generator (anchor + gold from structured fields, never a
model), its answer format, a strict and a lenient parser, and its correctness rule. Everything
downstream (gates, harness, notebooks) goes through :data:`TASKS` (the registry of
:class:`~clinlib.tasks.spec.TaskSpec`, :mod:`clinlib.tasks.registry`) and :func:`score`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clinlib.tasks.registry import TASKS, get_spec, register
from clinlib.tasks.spec import TaskSpec

ABSTAIN = "insufficient information"

STATED_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w]|\.\d)")
"""A number as a question states it (not glued to a word: "40 mg" states 40, "40mg" does not);
what gate L3 counts as stating a value, and what T8 avoids stating (clinlib.tasks.gates)."""

# questions.parquet columns (docs/design.md contract + documented additions).
QUESTION_COLUMNS: dict[str, str] = {
    "qid": "string",  # stable: "<task>-<sha1 of task, subjects, anchors, subtype>"[:12]
    "task": "string",  # T1..T9 (paper), T10.. (extended set, docs/design.md)
    "subtype": "string",  # task-specific stratum (Appendix B)
    "subject_ids": "list",  # one patient, two for T6 (A then B)
    "question": "string",  # full question text, states the answer format
    "gold": "string",  # canonical gold answer
    "options": "list",  # T7: the four option texts; T10: the items to order; else empty
    "anchor_event_ids": "list",  # source events the gold derives from
    "evidence_turns": "list",  # "<subject_id>:<turn_idx>" of turns holding the evidence
    "disease": "string",  # primary disease of the (first) patient
    "tertile": "string",  # complexity tertile of the (first) patient
    "template_id": "int64",  # which paraphrase template worded the question
    "injection": "string",  # JSON of the dialogue transformation (T3 positives, T5), or ""
    "meta": "string",  # JSON of the structured fields the gold came from (for L2)
}


@dataclass(frozen=True)
class Score:
    """Result of scoring one response.

    Attributes:
        parsed: the canonical parsed answer (None when nothing could be parsed).
        correct: whether the parsed answer matches the gold.
        parse_failed: True when the response parsed to nothing (the paper's D2).
        value: the graded score: 1.0 / 0.0 for correct / wrong in accuracy tasks, Kendall's
            tau in [-1, 1] for ordering tasks (T10; 0.0 for a parse failure or abstention).
        problem: why a response did not parse, where the task can say (T10), else None.
    """

    parsed: str | None
    correct: bool
    parse_failed: bool
    value: float = 0.0
    problem: str | None = None


Task = TaskSpec  # the name the notebooks and older callers use


def get_task(name: str) -> TaskSpec:
    """The registered task ``name``, with a clear error for unknown names."""
    return get_spec(name)


def score(
    task: str,
    response: str | None,
    gold: str,
    options: list[str] | None = None,
    lenient: bool = False,
) -> Score:
    """Score one response against the gold.

    Args:
        task: task name (``T1`` .. ``T10``).
        response: the raw model response (None or "" counts as a parse failure).
        gold: the canonical gold answer.
        options: T7's option texts / T10's items in letter order.
        lenient: use the lenient parser (Appendix G.3) instead of the strict one.

    Returns:
        A :class:`Score`.
    """
    t = get_task(task)
    if t.scorer is not None:  # a family with one rule for both modes (traps)
        return t.scorer(task, response, gold)
    text = (response or "").strip()
    parser = t.parse_lenient if lenient else t.parse_strict
    parsed = parser(text, options) if text else None
    if parsed is None:
        problem = t.diagnose(text, options) if t.diagnose is not None else None
        return Score(None, False, True, 0.0, problem)
    correct = bool(t.is_correct(parsed, gold))
    value = float(t.grade(parsed, gold)) if t.grade is not None else float(correct)
    return Score(parsed, correct, False, value)


__all__ = [
    "ABSTAIN",
    "QUESTION_COLUMNS",
    "STATED_NUMBER",
    "TASKS",
    "Score",
    "Task",
    "TaskSpec",
    "get_task",
    "register",
    "score",
]
