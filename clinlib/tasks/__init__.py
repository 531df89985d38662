"""The task suite T1–T9 (paper §3 "Task suite", Fig. 1): one registry entry per task.

Importing :mod:`clinlib.tasks` fills :data:`clinlib.tasks.base.TASKS` with nine
:class:`~clinlib.tasks.base.Task` objects whose generator comes from
:mod:`clinlib.tasks.generators` and whose answer format, token cap, parsers and correctness
rule come from :mod:`clinlib.tasks.answers`. The parsers are looked up when called, so the
registry (and question generation) works before that module exists; calling a parser without it
raises a clear error.
"""

from __future__ import annotations

from collections.abc import Callable

from clinlib.tasks import answers
from clinlib.tasks.answers import ANSWER_FORMATS, MAX_TOKENS
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
from clinlib.tasks.generators import GENERATORS, SUBTYPES, TITLES, t1r

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
            )
        )


def _register_extended() -> None:
    """The extended (non-paper) tasks beside T1–T9: T1R relative-time retrieval asks T1's kind
    of question, so it states T1's format and uses T1's cap, parsers and correctness rule."""
    if t1r.TASK in TASKS:
        return
    register(
        Task(
            name=t1r.TASK,
            title="Relative-time retrieval (extended)",
            answer_format=ANSWER_FORMATS["T1"],
            max_tokens=int(MAX_TOKENS["T1"]),
            subtypes=tuple(t1r.SUBTYPES),
            parse_strict=_strict("T1"),
            parse_lenient=_lenient("T1"),
            is_correct=_correct("T1"),
            generate=t1r.generate,
            notes={"extended": True, "paired_by": "meta.pair"},
        )
    )


_register_all()
_register_extended()
