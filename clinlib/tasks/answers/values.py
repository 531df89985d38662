"""Values (T1, T9), units and dates read from a response (paper §3 "Task suite" T1;
Appendix G.3 "strict vs lenient parser").
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from clinlib.tasks.answers.formats import AnswerError

# --------------------------------------------------------------------------- values (T1, T9)

# Unit spellings -> canonical unit (keys are lower case, spaces removed, µ written u).
UNIT_ALIASES: dict[str, str] = {
    "mg/dl": "mg/dL",
    "mgperdl": "mg/dL",
    "meq/l": "mEq/L",
    "mmol/l": "mmol/L",
    "g/dl": "g/dL",
    "%": "%",
    "percent": "%",
    "k/ul": "K/uL",
    "x10^3/ul": "K/uL",
    "x10e3/ul": "K/uL",
    "10^3/ul": "K/uL",
    "10*3/ul": "K/uL",
    "x10^9/l": "K/uL",
    "10^9/l": "K/uL",
    "thou/ul": "K/uL",
    "thou/cumm": "K/uL",
    "k/mm3": "K/uL",
    "ng/ml": "ng/mL",
    "pg/ml": "pg/mL",
    "iu/l": "IU/L",
    "u/l": "IU/L",
    "mg": "mg",
    "g": "g",
    "mcg": "mcg",
    "ug": "mcg",
    "unit": "UNIT",
    "units": "UNIT",
    "ml": "mL",
    "meq": "mEq",
    "mmol": "mmol",
    "tab": "TAB",
    "tabs": "TAB",
    "cap": "CAP",
    "puff": "PUFF",
}
# mEq/L and mmol/L are numerically identical for monovalent ions (every mEq/L panel lab).
_UNIT_EQUIV = {frozenset({"mEq/L", "mmol/L"})}


def _unit_key(unit: str) -> str:
    return re.sub(r"\s+", "", unit).lower().replace("µ", "u").replace("μ", "u").replace("×", "x")


def canonical_unit(unit: str | None) -> str | None:
    """Canonical spelling of a unit (unknown spellings are returned trimmed)."""
    if unit is None or not str(unit).strip():
        return None
    return UNIT_ALIASES.get(_unit_key(str(unit)), str(unit).strip())


def units_compatible(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return True
    ca, cb = canonical_unit(a), canonical_unit(b)
    return ca == cb or frozenset({ca, cb}) in _UNIT_EQUIV


_UNIT_PATTERN = "|".join(
    sorted(
        (re.escape(k).replace(r"\^", r"\s*\^\s*").replace("/", r"\s*/\s*") for k in UNIT_ALIASES),
        key=len,
        reverse=True,
    )
)
NUM = r"(?:\d+(?:\.\d+)?|\.\d+)"
_VALUE_RE = re.compile(
    r"(?<![\w.])(?P<cmp>[<>]=?\s*)?(?P<num>" + NUM + r")(?![\d])"
    r"(?:\s*(?P<unit>" + _UNIT_PATTERN + r")(?![a-z0-9]))?",
    re.IGNORECASE,
)
_STRICT_VALUE_RE = re.compile(
    r"^(?P<cmp>[<>]=?\s*)?(?P<num>" + NUM + r")(?:\s*(?P<unit>" + _UNIT_PATTERN + r"))?$",
    re.IGNORECASE,
)

_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|jun(?:e)?|jul(?:y)?|"
    r"aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DATE_RE = re.compile(
    r"\b\d{4}-\d{1,2}-\d{1,2}(?:[ t]\d{1,2}:\d{2}(?::\d{2})?)?\b"
    r"|\b\d{4}/\d{1,2}/\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    r"|\b" + _MONTHS + r"\.?\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTHS + r"\.?(?:,?\s+\d{4})?\b"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?\s*(?:am|pm)?\b",
    re.IGNORECASE,
)
_ISO_DATE_RE = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_ORDINAL_RE = re.compile(
    r"\b(?:visit|admission|encounter|hospital\s+day|day|week|month|year|turn|option|patient|"
    r"item|question|number|no\.|#)\s*#?\s*\d+\b|\b\d+(?:st|nd|rd|th)\b",
    re.IGNORECASE,
)
_RANGE_RE = re.compile(
    r"\([^()]*\b(?:ref\w*|normal|range|nl|rr)\b[^()]*\)"
    r"|\b(?:ref\w*|normal)(?:\s+range)?(?:\s+is|\s+of|:)?\s*" + NUM + r"\s*(?:-|–|to)\s*" + NUM,
    re.IGNORECASE,
)
_ANSWER_MARK = re.compile(r"\b(?:final\s+answer|answer|value)\s*(?:is|was|:|=)\s*", re.IGNORECASE)


def _scrub(text: str) -> str:
    """Remove dates, times, ordinals and reference ranges (numbers that are not answers)."""
    text = _RANGE_RE.sub(" ", text)
    text = _DATE_RE.sub(" ", text)
    return _ORDINAL_RE.sub(" ", text)


def _fmt_value(cmp: str | None, num: str, unit: str | None) -> str:
    cmp = re.sub(r"\s+", "", cmp or "")
    unit = canonical_unit(unit)
    return f"{cmp}{num}" + (f" {unit}" if unit else "")


def strict_value(norm: str) -> str | None:
    m = _STRICT_VALUE_RE.match(norm)
    return _fmt_value(m["cmp"], m["num"], m["unit"]) if m else None


def _values_in(text: str) -> list[tuple[str | None, str, str | None]]:
    return [(m["cmp"], m["num"], m["unit"]) for m in _VALUE_RE.finditer(_scrub(text))]


def pick_value(text: str) -> str | None:
    """The single value a careful reader takes from ``text`` (None when absent or ambiguous)."""
    mark = _ANSWER_MARK.search(text)
    if mark:
        after = _values_in(text[mark.end() :])
        if after:
            return _fmt_value(*after[0])
    found = [_fmt_value(*v) for v in _values_in(text)]
    # one number, possibly repeated ("1.3 ... 1.3 mg/dL"); a unit-bearing mention is preferred
    if not found or len({_value_number(v) for v in found}) != 1:
        return None
    with_unit = [v for v in found if " " in v]
    if len({canonical_unit(v.split(" ", 1)[1]) for v in with_unit}) > 1:
        return None  # same number, two different units
    return (with_unit or found)[0]


def split_value(text: str) -> tuple[str, Decimal, int, str | None]:
    """(comparator, number, decimals, unit) of a canonical value string."""
    m = re.match(r"^\s*(?P<cmp>[<>]=?)?\s*(?P<num>" + NUM + r")\s*(?P<unit>.*?)\s*$", text)
    if not m:
        raise AnswerError(f"not a value: {text!r}")
    num = m["num"]
    decimals = len(num.split(".")[1]) if "." in num else 0
    try:
        value = Decimal(num)
    except InvalidOperation:  # pragma: no cover - the regex admits only decimals
        raise AnswerError(f"not a value: {text!r}") from None
    return m["cmp"] or "", value, decimals, (m["unit"] or None)


def _value_number(text: str) -> Decimal:
    return split_value(text)[1]


def date_in(text: str) -> str | None:
    dates = {f"{y}-{int(m):02d}-{int(d):02d}" for y, m, d in _ISO_DATE_RE.findall(text)}
    return dates.pop() if len(dates) == 1 else None
