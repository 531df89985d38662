"""Correctness rules: whether a parsed answer matches the gold, and whether a gold is a
canonical answer of its task (paper §3 "Task suite"; Appendix A gate L0).

The per-kind rules below are public so that an answer kind
(:class:`clinlib.tasks.answers.kinds.AnswerKind`) can name them; :func:`is_correct` and
:func:`gold_problem` look the task's kind up in the task registry.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from clinlib.tasks.answers.formats import AnswerError, answer_kind
from clinlib.tasks.answers.readings import ID_RE, norm_text
from clinlib.tasks.answers.values import NUM, split_value, units_compatible
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.rules import (
    OPTION_LETTERS,
    T6_ANSWERS,
    T8_DIRECTIONS,
    TREND_DIRECTIONS,
    TREND_MAGNITUDES,
    YES_NO,
)


def is_correct(task: str, parsed: str | None, gold: str) -> bool:
    """Whether a parsed answer matches the canonical gold (rules in the module docstring).

    Args:
        task: a registered task name.
        parsed: a parser's output (None = parse failure = wrong).
        gold: the canonical gold answer.

    Returns:
        True when correct. Raises :class:`AnswerError` for a gold outside the task's
        canonical vocabulary.
    """
    return judge(answer_kind(task), parsed, gold, task)


def judge(kind: Any, parsed: str | None, gold: str, task: str = "") -> bool:
    """:func:`is_correct` for an answer kind (``task`` names the task in the error)."""
    problem = kind_gold_problem(kind, gold)
    if problem:
        raise AnswerError(f"{task} gold {gold!r}: {problem}")
    if parsed is None:
        return False
    if parsed == ABSTAIN or gold == ABSTAIN:
        return parsed == gold
    return bool(kind.match(parsed, gold))


def gold_problem(task: str, gold: object, options: list[str] | None = None) -> str | None:
    """Why ``gold`` is not a canonical answer of ``task`` (None when it is).

    Args:
        task: a registered task name.
        gold: the candidate gold.
        options: T7's options (checked to be four distinct non-empty texts when given).

    Returns:
        A short reason, or None.
    """
    return kind_gold_problem(answer_kind(task), gold, options)


def kind_gold_problem(kind: Any, gold: object, options: list[str] | None = None):
    """:func:`gold_problem` for an answer kind."""
    if not isinstance(gold, str) or not gold.strip():
        return "empty or not a string"
    if gold != gold.strip():
        return "surrounding whitespace"
    return kind.gold_problem(gold, options)


# --------------------------------------------------------------------------- matches


def same_text(parsed: str, gold: str) -> bool:
    """Case-insensitive equality (T2, T3, T5, T6, T8, T9)."""
    return parsed.strip().lower() == gold.strip().lower()


def value_match(parsed: str, gold: str) -> bool:
    """T1: the parsed number rounds to the gold at the gold's precision, compatible units."""
    try:
        p_cmp, p_num, _, p_unit = split_value(parsed)
    except AnswerError:
        return False
    g_cmp, g_num, g_dec, g_unit = split_value(gold)
    half = Decimal(5) * Decimal(10) ** (-(g_dec + 1))
    return p_cmp == g_cmp and abs(p_num - g_num) < half and units_compatible(p_unit, g_unit)


def ids_match(parsed: str, gold: str) -> bool:
    """T4: exact set equality of the event ids."""
    return set(parsed.upper().split(";")) == set(gold.upper().split(";"))


def letter_match(parsed: str, gold: str) -> bool:
    """T7: the same option letter."""
    return parsed.strip().upper() == gold.strip().upper()


def exact_match(parsed: str, gold: str) -> bool:
    """T10: the exact order (its graded score is Kendall's tau)."""
    return parsed == gold


# --------------------------------------------------------------------------- gold vocabularies


def value_gold_problem(gold: str, options: list[str] | None = None) -> str | None:
    m = re.fullmatch(r"([<>]=?)?" + NUM + r" (\S.*)", gold)
    return None if m else "not '<value_text> <unit>'"


def trend_gold_problem(gold: str, options: list[str] | None = None) -> str | None:
    parts = gold.split(";")
    if len(parts) != 2 or parts[0] not in TREND_DIRECTIONS or parts[1] not in TREND_MAGNITUDES:
        return "not '<increased|decreased|stable>;<none|weak|moderate|strong>'"
    if (parts[0] == "stable") != (parts[1] == "none"):
        return "stable pairs with none and only with none"
    return None


def yes_no_gold_problem(gold: str, options: list[str] | None = None) -> str | None:
    return None if gold in YES_NO else "not 'yes' or 'no'"


def ids_gold_problem(gold: str, options: list[str] | None = None) -> str | None:
    ids = gold.split(";")
    if any(not ID_RE.fullmatch(i) or i != i.upper() for i in ids):
        return "not event ids joined by ';'"
    if ids != sorted(set(ids)):
        return "ids not sorted and unique"
    return None


def patient_gold_problem(gold: str, options: list[str] | None = None) -> str | None:
    return None if gold in T6_ANSWERS else "not 'A', 'B' or 'similar'"


def option_gold_problem(gold: str, options: list[str] | None = None) -> str | None:
    if gold not in OPTION_LETTERS:
        return "not an option letter A-D"
    if options is not None:
        texts = [str(o).strip() for o in options]
        if len(texts) != 4 or any(not t for t in texts):
            return "needs four non-empty options"
        if len({norm_text(t) for t in texts}) != 4:
            return "options are not distinct"
    return None


def direction_gold_problem(gold: str, options: list[str] | None = None) -> str | None:
    return None if gold in T8_DIRECTIONS else "not 'increased', 'decreased' or 'similar'"


def abstain_gold_problem(gold: str, options: list[str] | None = None) -> str | None:
    return None if gold == ABSTAIN else f"not {ABSTAIN!r}"
