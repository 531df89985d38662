"""Correctness rules: whether a parsed answer matches the gold, and whether a gold is a
canonical answer of its task (paper §3 "Task suite"; Appendix A gate L0).
"""

from __future__ import annotations

import re
from decimal import Decimal

from clinlib.tasks.answers.decision import decision_correct, gold_decision_problem
from clinlib.tasks.answers.formats import AnswerError, reads_as
from clinlib.tasks.answers.order import gold_order_problem
from clinlib.tasks.answers.readings import _ID_RE, _norm_text
from clinlib.tasks.answers.values import _NUM, _split_value, _units_compatible
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
        task: ``T1`` .. ``T9``.
        parsed: a parser's output (None = parse failure = wrong).
        gold: the canonical gold answer.

    Returns:
        True when correct. Raises :class:`AnswerError` for a gold outside the task's
        canonical vocabulary.
    """
    task = reads_as(task)
    problem = gold_problem(task, gold)
    if problem:
        raise AnswerError(f"{task} gold {gold!r}: {problem}")
    if parsed is None:
        return False
    if parsed == ABSTAIN or gold == ABSTAIN:
        return parsed == gold
    if task == "T1":
        try:
            p_cmp, p_num, _, p_unit = _split_value(parsed)
        except AnswerError:
            return False
        g_cmp, g_num, g_dec, g_unit = _split_value(gold)
        half = Decimal(5) * Decimal(10) ** (-(g_dec + 1))
        return p_cmp == g_cmp and abs(p_num - g_num) < half and _units_compatible(p_unit, g_unit)
    if task == "T4":
        return set(parsed.upper().split(";")) == set(gold.upper().split(";"))
    if task == "T7":
        return parsed.strip().upper() == gold.strip().upper()
    if task == "T10":  # the exact order (its graded score is Kendall's tau)
        return parsed == gold
    if task == "T11":  # full credit (its graded score is the time-decay credit)
        return decision_correct(parsed, gold)
    return parsed.strip().lower() == gold.strip().lower()


def gold_problem(task: str, gold: object, options: list[str] | None = None) -> str | None:
    """Why ``gold`` is not a canonical answer of ``task`` (None when it is).

    Args:
        task: ``T1`` .. ``T9``.
        gold: the candidate gold.
        options: T7's options (checked to be four distinct non-empty texts when given).

    Returns:
        A short reason, or None.
    """
    task = reads_as(task)
    if not isinstance(gold, str) or not gold.strip():
        return "empty or not a string"
    if gold != gold.strip():
        return "surrounding whitespace"
    if task == "T1":
        m = re.fullmatch(r"([<>]=?)?" + _NUM + r" (\S.*)", gold)
        return None if m else "not '<value_text> <unit>'"
    if task == "T2":
        parts = gold.split(";")
        if len(parts) != 2 or parts[0] not in TREND_DIRECTIONS or parts[1] not in TREND_MAGNITUDES:
            return "not '<increased|decreased|stable>;<none|weak|moderate|strong>'"
        if (parts[0] == "stable") != (parts[1] == "none"):
            return "stable pairs with none and only with none"
        return None
    if task in ("T3", "T5"):
        return None if gold in YES_NO else "not 'yes' or 'no'"
    if task == "T4":
        ids = gold.split(";")
        if any(not _ID_RE.fullmatch(i) or i != i.upper() for i in ids):
            return "not event ids joined by ';'"
        if ids != sorted(set(ids)):
            return "ids not sorted and unique"
        return None
    if task == "T6":
        return None if gold in T6_ANSWERS else "not 'A', 'B' or 'similar'"
    if task == "T7":
        if gold not in OPTION_LETTERS:
            return "not an option letter A-D"
        if options is not None:
            texts = [str(o).strip() for o in options]
            if len(texts) != 4 or any(not t for t in texts):
                return "needs four non-empty options"
            if len({_norm_text(t) for t in texts}) != 4:
                return "options are not distinct"
        return None
    if task == "T8":
        return None if gold in T8_DIRECTIONS else "not 'increased', 'decreased' or 'similar'"
    if task == "T10":
        return gold_order_problem(gold, len(options) if options is not None else None)
    if task == "T11":
        return gold_decision_problem(gold, len(options) if options is not None else None)
    return None if gold == ABSTAIN else f"not {ABSTAIN!r}"
