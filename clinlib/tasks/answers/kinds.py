"""Answer kinds: how an answer of one shape is read, checked and graded (paper §3 "Task
suite"; Appendix G.3 "strict vs lenient parser").

A task names its kind in its :class:`clinlib.tasks.spec.TaskSpec`; tasks that read the same way
share one (T1, T1R: :data:`VALUE`; T7, T7R: :data:`OPTION`; T9, T1F: :data:`ABSTENTION`). The
rules themselves are described in :mod:`clinlib.tasks.answers`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from clinlib.tasks.answers import correct as c
from clinlib.tasks.answers.decision import (
    decision_correct,
    decision_letter,
    decision_score,
    gold_decision_problem,
)
from clinlib.tasks.answers.order import (
    gold_order_problem,
    order_problem,
    order_score,
    parse_order_lenient,
    parse_order_strict,
)
from clinlib.tasks.answers.parse import (
    concrete_lenient,
    concrete_strict,
    read_lenient,
    read_strict,
)
from clinlib.tasks.answers.readings import (
    t2_lenient,
    t2_strict,
    t4_lenient,
    t4_strict,
    t6_lenient,
    t6_strict,
    t7_lenient,
    t7_strict,
    t8_lenient,
    t8_strict,
    yes_no_lenient,
    yes_no_strict,
)
from clinlib.tasks.answers.values import pick_value, strict_value

Reading = Callable[[str, "list[str] | None"], "str | None"]


@dataclass(frozen=True)
class AnswerKind:
    """How answers of one shape are read and judged.

    Attributes:
        shape: what the answer looks like ("value", "yes/no", "letter", ...); a response that
            reads as another shape is "an answer to another task" (clinlib.eval.interop.external).
        read_strict: ``(normalised response, options) -> answer | None`` in the requested
            format (abstention already handled).
        read_lenient: ``(text, options) -> answer | None``, what a careful reader accepts.
        gold_problem: ``(gold, options) -> reason | None`` for a non-canonical gold.
        match: ``(parsed, gold) -> bool`` for a non-abstention answer.
        read_first: a lenient reading that outranks the abstention cues (T3/T5: "the record
            does not mention an attribution" *is* the answer "no").
        over_answer: any other prose is an over-answer recorded as said (T9), not a failure.
        grade: ``(parsed, gold) -> float`` graded score (None: 1.0 if correct else 0.0).
        diagnose: ``(response, options) -> reason | None`` for a response that did not parse.
    """

    shape: str
    read_strict: Reading
    read_lenient: Reading
    gold_problem: Callable[[str, list[str] | None], str | None]
    match: Callable[[str, str], bool] = c.same_text
    read_first: Callable[[str], str | None] | None = None
    over_answer: bool = False
    grade: Callable[[str | None, str], float] | None = None
    diagnose: Callable[[str, list[str] | None], str | None] | None = None

    def parse_strict(self, response: str | None, options: list[str] | None = None) -> str | None:
        return read_strict(self, response, options)

    def parse_lenient(self, response: str | None, options: list[str] | None = None) -> str | None:
        return read_lenient(self, response, options)

    def is_correct(self, parsed: str | None, gold: str, task: str = "") -> bool:
        return c.judge(self, parsed, gold, task)


def _no_options(read: Callable[[str], str | None]) -> Reading:
    return lambda text, options=None: read(text)


def _order_strict(norm: str, options: list[str] | None) -> str | None:
    return parse_order_strict(norm, len(options)) if options else None


def _order_lenient(text: str, options: list[str] | None) -> str | None:
    return parse_order_lenient(text, len(options)) if options else None


def _order_diagnosis(response: str, options: list[str] | None) -> str | None:
    return order_problem(response, len(options)) if options else "the question lists no items"


def _order_gold(gold: str, options: list[str] | None) -> str | None:
    return gold_order_problem(gold, len(options) if options is not None else None)


def _decision_strict(norm: str, options: list[str] | None) -> str | None:
    return decision_letter(t7_strict(norm, options), len(options or ()))


def _decision_lenient(text: str, options: list[str] | None) -> str | None:
    return decision_letter(t7_lenient(text, options), len(options or ()))


def _decision_gold(gold: str, options: list[str] | None) -> str | None:
    return gold_decision_problem(gold, len(options) if options is not None else None)


def _yes_no(polarity: str) -> AnswerKind:
    return AnswerKind(
        "yes/no",
        _no_options(yes_no_strict),
        _no_options(yes_no_strict),
        c.yes_no_gold_problem,
        read_first=partial(yes_no_lenient, polarity=polarity),
    )


VALUE = AnswerKind(
    "value",
    _no_options(strict_value),
    _no_options(pick_value),
    c.value_gold_problem,
    c.value_match,
)
TREND = AnswerKind("trend", _no_options(t2_strict), _no_options(t2_lenient), c.trend_gold_problem)
ATTRIBUTION = _yes_no("attribution")
CONTRADICTION = _yes_no("contradiction")
EVENT_IDS = AnswerKind(
    "event ids", _no_options(t4_strict), _no_options(t4_lenient), c.ids_gold_problem, c.ids_match
)
PATIENT = AnswerKind(
    "letter", _no_options(t6_strict), _no_options(t6_lenient), c.patient_gold_problem
)
OPTION = AnswerKind("letter", t7_strict, t7_lenient, c.option_gold_problem, c.letter_match)
DIRECTION = AnswerKind(
    "direction", _no_options(t8_strict), _no_options(t8_lenient), c.direction_gold_problem
)
ABSTENTION = AnswerKind(
    "value", concrete_strict, concrete_lenient, c.abstain_gold_problem, over_answer=True
)
ORDER = AnswerKind(
    "letter order",
    _order_strict,
    _order_lenient,
    _order_gold,
    c.exact_match,
    grade=order_score,
    diagnose=_order_diagnosis,
)
DECISION = AnswerKind(
    "letter",
    _decision_strict,
    _decision_lenient,
    _decision_gold,
    decision_correct,
    grade=decision_score,
)

PROBES: tuple[AnswerKind, ...] = (VALUE, TREND, ATTRIBUTION, EVENT_IDS, OPTION, DIRECTION)
"""One kind per bare answer shape, probed to tell "an answer to another task"."""
