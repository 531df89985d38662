"""The answer format every question states, per task (paper §3 "Task suite"; Appendix G.3).

All formats end with the same abstention clause, so that a T9 question reads exactly like a
T1 question (the rules the parsers apply are in :mod:`clinlib.tasks.answers`).
"""

from __future__ import annotations

TASK_NAMES: tuple[str, ...] = tuple(f"T{i}" for i in range(1, 10))
"""The paper's nine tasks (the 6,271-question set, every paper-facing analysis)."""
EXTENDED_TASK_NAMES: tuple[str, ...] = ("T10", "T1R", "T11", "T1F", "T7R")
"""Tasks beyond the paper (docs/design.md "Extended question set"): registered like T1–T9 but
written to temporal_questions.parquet, never pooled with the paper's tasks. A new extended
task adds its name here, its format and token cap below, and its generator module to
clinlib.tasks.generators."""
ALL_TASK_NAMES: tuple[str, ...] = TASK_NAMES + EXTENDED_TASK_NAMES
CUT_TASKS: tuple[str, ...] = ("T11",)
"""Tasks whose question cuts the target visit at a moment and asks what follows (LongMedBench
"Task 3"): the rest of that visit holds the answer, so the harness asks them only under
strategies that show nothing of the target visit (``Strategy.history_only``)."""

ABSTAIN_CLAUSE = "If the record does not state it, reply exactly: insufficient information."

# T1 and T9 share one wording: a T9 question must read exactly like a T1 question (§3).
# Its example value: a small model often repeats it (notebook 04 counts how often).
VALUE_EXAMPLE = "1.3 mg/dL"
VALUE_FORMAT = (
    f"Reply with the value and its unit only (for example: {VALUE_EXAMPLE}). " + ABSTAIN_CLAUSE
)

ANSWER_FORMATS: dict[str, str] = {
    "T1": VALUE_FORMAT,
    "T2": (
        "Reply as <direction>;<magnitude> with direction one of increased, decreased, stable "
        "and magnitude one of none, weak, moderate, strong (for example: decreased;weak). "
        + ABSTAIN_CLAUSE
    ),
    "T3": "Reply yes or no. " + ABSTAIN_CLAUSE,
    "T4": (
        "Reply with the event ids only, separated by semicolons (for example: "
        "LAB-101;LAB-202). " + ABSTAIN_CLAUSE
    ),
    "T5": "Reply yes or no. " + ABSTAIN_CLAUSE,
    "T6": "Reply A, B or similar. " + ABSTAIN_CLAUSE,
    "T7": "Reply with the letter of one option (A, B, C or D). " + ABSTAIN_CLAUSE,
    "T8": "Reply increased, decreased or similar. " + ABSTAIN_CLAUSE,
    "T9": VALUE_FORMAT,
    "T1R": VALUE_FORMAT,  # relative-time retrieval: T1's question, named by position
    "T1F": VALUE_FORMAT,  # Lab-F rejection: worded like T1R, the measurement does not exist
    "T7R": "Reply with the letter of one option (A, B, C or D). " + ABSTAIN_CLAUSE,  # = T7's
    # LongMedBench "temporal reasoning": the letters of the listed items in time order.
    "T10": (
        "Reply with the letters only, in chronological order (earliest first), separated by "
        "commas (for example: C, A, B). " + ABSTAIN_CLAUSE
    ),
    # LongMedBench "Task 3" decisions: one option letter (next action, argument, discharge).
    "T11": "Reply with the letter of one option only. " + ABSTAIN_CLAUSE,
}

MAX_TOKENS: dict[str, int] = {
    "T1": 60,
    "T2": 60,
    "T3": 80,
    "T4": 120,
    "T5": 80,
    "T6": 80,
    "T7": 80,
    "T8": 120,
    "T9": 80,
    "T10": 80,
    "T1R": 60,
    "T11": 60,
    "T1F": 60,
    "T7R": 80,
}

# An extended task whose answers are read exactly like a paper task's: same parsers, same
# correctness rule, same gold vocabulary (T1R asks T1's question about a position-named event).
# T1F asks for a measurement that does not exist: read like T9 (an abstention is correct).
READS_AS: dict[str, str] = {"T1R": "T1", "T1F": "T9", "T7R": "T7"}


class AnswerError(ValueError):
    """An unknown task or a gold answer outside the task's canonical vocabulary."""


def check_task(task: str) -> str:
    if task not in ALL_TASK_NAMES:
        raise AnswerError(f"unknown task {task!r}; known: {', '.join(ALL_TASK_NAMES)}")
    return task


def reads_as(task: str) -> str:
    """The task whose parsers and correctness rule ``task`` uses (itself unless listed in
    :data:`READS_AS`); raises AnswerError for an unknown task."""
    return READS_AS.get(check_task(task), task)
