"""The answer format every question states, per task (paper §3 "Task suite"; Appendix G.3).

All formats end with the same abstention clause, so that a T9 question reads exactly like a
T1 question (the rules the parsers apply are in :mod:`clinlib.tasks.answers`).
"""

from __future__ import annotations

from typing import Any

from clinlib.tasks import registry

ABSTAIN_CLAUSE = "If the record does not state it, reply exactly: insufficient information."

# T1 and T9 share one wording: a T9 question must read exactly like a T1 question (§3).
# Its example value: a small model often repeats it (notebook 04 counts how often).
VALUE_EXAMPLE = "1.3 mg/dL"
VALUE_FORMAT = (
    f"Reply with the value and its unit only (for example: {VALUE_EXAMPLE}). " + ABSTAIN_CLAUSE
)

# Read-only views derived from the task specs (clinlib.tasks.registry), computed on access:
# TASK_NAMES (the paper's nine tasks, the 6,271-question set), EXTENDED_TASK_NAMES (docs/design.md
# "Extended question set", written to temporal_questions.parquet, never pooled with the paper's),
# ALL_TASK_NAMES (both), CUT_TASKS (questions that cut the target visit, asked only under
# history-only strategies), ANSWER_FORMATS and MAX_TOKENS (per task).
_VIEWS = (
    "TASK_NAMES",
    "EXTENDED_TASK_NAMES",
    "ALL_TASK_NAMES",
    "CUT_TASKS",
    "ANSWER_FORMATS",
    "MAX_TOKENS",
)


def __getattr__(name: str):
    if name in _VIEWS:
        return registry.derived(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class AnswerError(ValueError):
    """An unknown task or a gold answer outside the task's canonical vocabulary."""


def check_task(task: str) -> str:
    if task not in registry.TASKS or registry.TASKS[task].answer is None:
        known = ", ".join(registry.task_names("paper", "extended"))
        raise AnswerError(f"unknown task {task!r}; known: {known}")
    return task


def answer_kind(task: str) -> Any:
    """The answer kind ``task`` is read with (its spec's ``answer``); raises AnswerError for an
    unknown task."""
    return registry.TASKS[check_task(task)].answer
