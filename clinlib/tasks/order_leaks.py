"""What a T10 sorting clip must not say (LongMedBench "Visit Sorting": visits "ordered solely
by clinical progression cues with their timestamps removed"; docs/design.md "T10").

A clip leaks its position in time when it states a date or time (ISO, numeric m/d[/y],
month-name dates, a clock time, a bare year), or an ordinal of a visit ("Visit 3",
"admission #2", "3rd admission", "second visit", "last stay", "previous admission"). The
sorting generators drop candidates whose clips leak; gate L3 re-checks every T10 sorting
question with :func:`clip_leak` (and the cloze question's own rules, see
:mod:`clinlib.tasks.gates.content`).

Numbers that are values (a lab result or a dose) are followed by their unit; a four-digit
number 1900–2299 that is not followed by a unit reads as a year and is a leak.
"""

from __future__ import annotations

import re
from functools import lru_cache

_MONTHS = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_VISIT_WORDS = r"(?:visits?|admissions?|encounters?|stays?|hospitali[sz]ations?)"
_ORDINALS = (
    r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|final|latest|"
    r"previous|prior|preceding|next|following|earlier|later|\d+(?:st|nd|rd|th)"
)
# A unit right after a number makes it a value, not a year (lab and dose units of the record).
_UNIT = (
    r"(?:%|x10|[a-zµ]+/\S+|(?:k|m|mc|n|p|u|µ|f)?(?:g|gm|mol|eq|l|iu|u|units?)(?:/\S+)?\b|"
    r"(?:tab|cap|puff|vial|bag|drop|syr|pkt|spray|patch)s?\b)"
)
# Matched against the lower-cased text (faster than re.IGNORECASE on these alternations).
LEAK_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx))
    for name, rx in (
        ("ISO date", r"\b\d{4}-\d{1,2}-\d{1,2}\b"),
        (
            "numeric date",
            r"(?<![\d.])(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12]\d|3[01])(?:/\d{2,4})?(?!\d|\.\d)",
        ),
        ("month-name date", rf"\b(?:{_MONTHS})\.?\s+\d{{1,2}}\b|\b\d{{1,2}}\s+(?:{_MONTHS})\b"),
        ("month and year", rf"\b(?:{_MONTHS})\.?,?\s+\d{{4}}\b"),
        ("clock time", r"\b\d{1,2}:\d{2}\b"),
        ("year", rf"(?<![\d.,])(?:19|20|21|22)\d{{2}}(?!\d|[.,]\d)(?!\s*{_UNIT})"),
        ("visit number", rf"\b{_VISIT_WORDS}\s*(?:#|no\.?|number)?\s*\d+\b"),
        ("visit ordinal", rf"\b(?:{_ORDINALS})\s+(?:\w+\s+)?{_VISIT_WORDS}\b"),
    )
)


@lru_cache(maxsize=1 << 16)
def clip_leak(text: str) -> str | None:
    """The first date / time / visit-ordinal cue in ``text`` as ``"<kind> '<match>'"``, or None.

    Args:
        text: one rendered sorting clip.

    Returns:
        A short description of the leak, or None when the clip states no position in time.
    """
    low = text.lower()
    for name, rx in LEAK_PATTERNS:
        m = rx.search(low)
        if m:
            return f"{name} {m.group(0)!r}"
    return None
