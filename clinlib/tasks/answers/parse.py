"""The strict and lenient parsers of every task (paper §4 "Backbones": "the T9 abstention
parser", §5.4 Fig. 4;
Appendix E.2 "D2 parse failures"; Appendix G.3 "strict vs lenient parser", Tables 8–9).
"""

from __future__ import annotations

import re

from clinlib.tasks.answers.decision import decision_letter
from clinlib.tasks.answers.formats import reads_as
from clinlib.tasks.answers.order import parse_order_lenient, parse_order_strict
from clinlib.tasks.answers.readings import (
    _YN_START,
    _t2_lenient,
    _t2_strict,
    _t4_lenient,
    _t4_strict,
    _t6_lenient,
    _t6_strict,
    _t7_lenient,
    _t7_strict,
    _t8_lenient,
    _t8_strict,
    _yes_no_lenient,
    _yes_no_strict,
)
from clinlib.tasks.answers.text import (
    _ABSTAIN_CUES,
    _abstention_or_guess,
    _is_exact_abstention,
    _normalize,
)
from clinlib.tasks.answers.values import _date_in, _pick_value, _strict_value
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.rules import YES_NO

# --------------------------------------------------------------------------- T9 over-answers


def _concrete_strict(norm: str) -> str | None:
    value = _strict_value(norm)
    if value:
        return value
    if re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", norm):
        return _date_in(norm)
    return _yes_no_strict(norm) if norm.lower() in YES_NO else None


def _concrete_lenient(text: str) -> str | None:
    value = _pick_value(text)
    if value:
        return value
    date = _date_in(text)
    if date:
        return date
    m = _YN_START.match(text)
    return m.group(1).lower() if m else None


# --------------------------------------------------------------------------- public API


def parse_strict(task: str, response: str | None, options: list[str] | None = None) -> str | None:
    """Parse a response in the task's requested format (Appendix G.3 "strict").

    Args:
        task: ``T1`` .. ``T9``.
        response: the raw model response.
        options: T7's four option texts in letter order; T10's items in letter order.

    Returns:
        The canonical answer, ``ABSTAIN`` for an exact abstention, or None (parse failure).
    """
    task = reads_as(task)
    norm = _normalize(response)
    if not norm:
        return None
    if _is_exact_abstention(norm):
        return ABSTAIN
    if task == "T1":
        return _strict_value(norm)
    if task == "T2":
        return _t2_strict(norm)
    if task in ("T3", "T5"):
        return _yes_no_strict(norm)
    if task == "T4":
        return _t4_strict(norm)
    if task == "T6":
        return _t6_strict(norm)
    if task == "T7":
        return _t7_strict(norm, options)
    if task == "T8":
        return _t8_strict(norm)
    if task == "T10":
        return parse_order_strict(norm, len(options)) if options else None
    if task == "T11":
        return decision_letter(_t7_strict(norm, options), len(options or ()))
    return _concrete_strict(norm)  # T9: an over-answer in the requested format


def parse_lenient(task: str, response: str | None, options: list[str] | None = None) -> str | None:
    """Parse a response as a careful human reader would (Appendix G.3 "lenient").

    Args:
        task: ``T1`` .. ``T9``.
        response: the raw model response.
        options: T7's four option texts in letter order.

    Returns:
        The canonical answer, ``ABSTAIN`` for a (verbose) abstention, or None (parse failure).
    """
    task = reads_as(task)
    strict = parse_strict(task, response, options)
    if strict is not None:
        return strict
    norm = _normalize(response)
    if not norm:
        return None
    if task in ("T3", "T5"):
        answer = _yes_no_lenient(task, norm)
        if answer is not None:
            return answer
        return ABSTAIN if _ABSTAIN_CUES.search(norm) else None
    abstains, guess = _abstention_or_guess(norm)
    if abstains:
        # a hedged guess after the abstention is an answer only if it says something concrete
        answer = _lenient_reading(task, guess, options) if guess else None
        return answer if answer is not None else ABSTAIN
    answer = _lenient_reading(task, norm, options)
    if answer is None and task == "T9":
        return norm[:80]  # any other non-abstention is an over-answer, recorded as said
    return answer


def _lenient_reading(task: str, text: str, options: list[str] | None) -> str | None:
    """The task-specific lenient reading of ``text`` (no abstention handling)."""
    if task == "T1":
        return _pick_value(text)
    if task == "T2":
        return _t2_lenient(text)
    if task == "T4":
        return _t4_lenient(text)
    if task == "T6":
        return _t6_lenient(text)
    if task == "T7":
        return _t7_lenient(text, options)
    if task == "T8":
        return _t8_lenient(text)
    if task == "T10":
        return parse_order_lenient(text, len(options)) if options else None
    if task == "T11":
        return decision_letter(_t7_lenient(text, options), len(options or ()))
    return _concrete_lenient(text)
