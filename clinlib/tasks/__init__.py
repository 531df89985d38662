"""The task suite T1–T9 (paper §3 "Task suite", Fig. 1), the extended tasks (docs/design.md
"Extended question set") and the MedMemoryBench trap types: one
:class:`~clinlib.tasks.spec.TaskSpec` per task, declared in the task's own module and listed
once in :mod:`clinlib.tasks.registry` (docs/extending.md "Add a task").
"""

from __future__ import annotations

from clinlib.tasks.base import ABSTAIN, QUESTION_COLUMNS, Score, Task, get_task, score
from clinlib.tasks.registry import (
    SPECS,
    TASKS,
    get_spec,
    register,
    specs,
    task_names,
    unregister,
)
from clinlib.tasks.spec import TaskSpec

__all__ = [
    "ABSTAIN",
    "QUESTION_COLUMNS",
    "SPECS",
    "TASKS",
    "Score",
    "Task",
    "TaskSpec",
    "get_spec",
    "get_task",
    "register",
    "score",
    "specs",
    "task_names",
    "unregister",
]
