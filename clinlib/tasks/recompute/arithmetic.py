"""Exact rule arithmetic of the recomputed golds (paper §3 "Task suite" T2, T6, T8;
Appendix A gate L2): :class:`decimal.Decimal` values, comparing ``|last - first|`` against
``threshold * |first|`` so that no division is needed.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from clinlib.tasks import rules

# --------------------------------------------------------------------------- arithmetic


def as_decimal(x: Any) -> Decimal:
    """The reported decimal of a float (shortest repr: 1.3 -> Decimal('1.3'))."""
    return Decimal(repr(float(x)))


_STABLE = Decimal(str(rules.STABLE_REL))
_MODERATE = Decimal(str(rules.MODERATE_REL))
_STRONG = Decimal(str(rules.STRONG_REL))
_SIMILAR = Decimal(str(rules.SIMILAR_REL))


def change_bin(first: Any, last: Any) -> tuple[int, str]:
    """(sign, magnitude) of ``(last - first) / |first|`` per rules.py, without dividing.

    Returns:
        sign in {-1, 0, 1} (0 for the stable band) and one of none / weak / moderate / strong.
    """
    f, la = as_decimal(first), as_decimal(last)
    if f == 0:
        raise ZeroDivisionError("first value is 0: the relative change is undefined")
    delta, base = abs(la - f), abs(f)
    if delta < _STABLE * base:
        return 0, "none"
    sign = 1 if la > f else -1
    if delta < _MODERATE * base:
        return sign, "weak"
    if delta < _STRONG * base:
        return sign, "moderate"
    return sign, "strong"


def trend_gold(first: Any, last: Any) -> str:
    """T2 gold of a first and a last value."""
    sign, mag = change_bin(first, last)
    if sign == 0:
        return "stable;none"
    return f"{'increased' if sign > 0 else 'decreased'};{mag}"


def t8_gold(before: Any, after: Any) -> tuple[str, str]:
    """T8 gold direction and bin (L-, M-, S-, 0, S+, M+, L+)."""
    sign, mag = change_bin(before, after)
    if sign == 0:
        return "similar", "0"
    letter = {"weak": "S", "moderate": "M", "strong": "L"}[mag]
    return ("increased" if sign > 0 else "decreased"), letter + ("+" if sign > 0 else "-")


def compare_values(a: Any, b: Any) -> str:
    """T6 gold of patient A's and B's values (rules.py SIMILAR_REL of the larger magnitude)."""
    da = a if isinstance(a, Decimal) else as_decimal(a)
    db = b if isinstance(b, Decimal) else as_decimal(b)
    if abs(da - db) <= _SIMILAR * max(abs(da), abs(db)):
        return "similar"
    return "A" if da > db else "B"
