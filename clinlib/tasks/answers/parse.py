"""The strict and lenient parsers of every task (paper §4 "Backbones": "the T9 abstention
parser", §5.4 Fig. 4;
Appendix E.2 "D2 parse failures"; Appendix G.3 "strict vs lenient parser", Tables 8–9).
"""

from __future__ import annotations

import re
from typing import Any

from clinlib.tasks.answers.formats import answer_kind
from clinlib.tasks.answers.readings import YN_START, yes_no_strict
from clinlib.tasks.answers.text import (
    ABSTAIN_CUES,
    abstention_or_guess,
    is_exact_abstention,
    normalize,
)
from clinlib.tasks.answers.values import date_in, pick_value, strict_value
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.rules import YES_NO

# --------------------------------------------------------------------------- T9 over-answers


def concrete_strict(norm: str, options: list[str] | None = None) -> str | None:
    value = strict_value(norm)
    if value:
        return value
    if re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", norm):
        return date_in(norm)
    return yes_no_strict(norm) if norm.lower() in YES_NO else None


def concrete_lenient(text: str, options: list[str] | None = None) -> str | None:
    value = pick_value(text)
    if value:
        return value
    date = date_in(text)
    if date:
        return date
    m = YN_START.match(text)
    return m.group(1).lower() if m else None


# --------------------------------------------------------------------------- public API


def parse_strict(task: str, response: str | None, options: list[str] | None = None) -> str | None:
    """Parse a response in the task's requested format (Appendix G.3 "strict").

    Args:
        task: a registered task name (its answer kind decides the reading).
        response: the raw model response.
        options: T7's four option texts in letter order; T10's items in letter order.

    Returns:
        The canonical answer, ``ABSTAIN`` for an exact abstention, or None (parse failure).
    """
    return read_strict(answer_kind(task), response, options)


def parse_lenient(task: str, response: str | None, options: list[str] | None = None) -> str | None:
    """Parse a response as a careful human reader would (Appendix G.3 "lenient").

    Args:
        task: a registered task name (its answer kind decides the reading).
        response: the raw model response.
        options: T7's four option texts in letter order.

    Returns:
        The canonical answer, ``ABSTAIN`` for a (verbose) abstention, or None (parse failure).
    """
    return read_lenient(answer_kind(task), response, options)


def read_strict(kind: Any, response: str | None, options: list[str] | None = None):
    """The strict reading of ``response`` as an answer of ``kind`` (see :func:`parse_strict`)."""
    norm = normalize(response)
    if not norm:
        return None
    if is_exact_abstention(norm):
        return ABSTAIN
    return kind.read_strict(norm, options)


def read_lenient(kind: Any, response: str | None, options: list[str] | None = None):
    """The lenient reading of ``response`` as an answer of ``kind`` (see :func:`parse_lenient`)."""
    strict = read_strict(kind, response, options)
    if strict is not None:
        return strict
    norm = normalize(response)
    if not norm:
        return None
    if kind.read_first is not None:  # the kind's own words outrank the abstention cues
        answer = kind.read_first(norm)
        if answer is not None:
            return answer
        return ABSTAIN if ABSTAIN_CUES.search(norm) else None
    abstains, guess = abstention_or_guess(norm)
    if abstains:
        # a hedged guess after the abstention is an answer only if it says something concrete
        answer = kind.read_lenient(guess, options) if guess else None
        return answer if answer is not None else ABSTAIN
    answer = kind.read_lenient(norm, options)
    if answer is None and kind.over_answer:
        return norm[:80]  # any other non-abstention is an over-answer, recorded as said
    return answer
