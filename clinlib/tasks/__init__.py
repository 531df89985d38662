"""The task suite T1–T9 (paper §3 "Task suite", Fig. 1) and the extended tasks (T10, the
LongMedBench ordering family; docs/design.md "Extended question set"): one registry entry per
task.

Importing :mod:`clinlib.tasks` fills :data:`clinlib.tasks.base.TASKS` with one
:class:`~clinlib.tasks.base.Task` per task (``paper=False`` for extended tasks) whose generator comes from
:mod:`clinlib.tasks.generators` and whose answer format, token cap, parsers and correctness
rule come from :mod:`clinlib.tasks.answers`. The parsers are looked up when called, so the
registry (and question generation) works before that module exists; calling a parser without it
raises a clear error.
"""

from __future__ import annotations

from collections.abc import Callable

from clinlib.tasks import answers
from clinlib.tasks.answers import ANSWER_FORMATS, DIAGNOSERS, GRADERS, MAX_TOKENS, TASK_NAMES
from clinlib.tasks.base import (
    ABSTAIN,
    QUESTION_COLUMNS,
    TASKS,
    Score,
    Task,
    get_task,
    register,
    score,
)
from clinlib.tasks.generators import GENERATORS, SUBTYPES, TITLES

__all__ = [
    "ABSTAIN",
    "QUESTION_COLUMNS",
    "TASKS",
    "Score",
    "Task",
    "get_task",
    "score",
]


def _answers():
    return answers


def _strict(name: str) -> Callable[[str, list[str] | None], str | None]:
    def parse(response: str, options: list[str] | None = None) -> str | None:
        return _answers().parse_strict(name, response, options)

    return parse


def _lenient(name: str) -> Callable[[str, list[str] | None], str | None]:
    def parse(response: str, options: list[str] | None = None) -> str | None:
        return _answers().parse_lenient(name, response, options)

    return parse


def _correct(name: str) -> Callable[[str, str], bool]:
    def is_correct(parsed: str, gold: str) -> bool:
        return bool(_answers().is_correct(name, parsed, gold))

    return is_correct


def _formats() -> tuple[dict[str, str], dict[str, int]]:
    return dict(ANSWER_FORMATS), {t: int(n) for t, n in MAX_TOKENS.items()}


def _register_all() -> None:
    formats, max_tokens = _formats()
    for name, gen in GENERATORS.items():
        if name in TASKS:  # re-import (e.g. importlib.reload): keep the first registration
            continue
        register(
            Task(
                name=name,
                title=TITLES[name],
                answer_format=formats[name],
                max_tokens=max_tokens[name],
                subtypes=SUBTYPES[name],
                parse_strict=_strict(name),
                parse_lenient=_lenient(name),
                is_correct=_correct(name),
                generate=gen,
                paper=name in TASK_NAMES,
                grade=GRADERS.get(name),
                diagnose=DIAGNOSERS.get(name),
            )
        )


_register_all()
