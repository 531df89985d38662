"""The meaning-bearing words of a question a paraphrase must keep (paper Fig. 2 stage 4: "an
LLM paraphrases each (anchor, gold) template" and the gold stays; §3 "Task suite").

A question's gold is computed from its ``meta``, not from its wording, so a paraphrase that
turns "from the earliest to the latest" into the reverse, "highest" into "lowest" or "before"
into "after" would keep a gold that no longer answers it. These words are slots too:

* ``order`` — first/last, earliest/latest, oldest/newest, most recent, chronological,
  ascending/descending, previous/next, earlier/later;
* ``superlative`` — highest/lowest, maximum/minimum, peak/nadir, largest/smallest, most/least;
* ``comparative`` — higher/lower, greater/smaller, more/less/fewer, increase/decrease,
  rise/fall, above/below, exceed;
* ``negation`` — not, no, never, without, none, neither, nor;
* ``time_anchor`` — before, after, prior to, since, until, within, preceding;
* ``unit`` — the lab units, %, and day/week/month/year/hour shortly after a number.

Words are canonicalised (``max`` = ``maximum``, ``rose`` = ``rise``); each class's words must
occur as often in the paraphrase as in the template, and ``order`` and ``time_anchor`` words in
the same sequence (a reversal changes it). :func:`answer_form` reads
the expected answer's form back from the wording (which extreme, which direction of order or
comparison), so a paraphrase that keeps every number but asks for the opposite is named.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from clinlib.data.vocab import LAB_PANEL

_CANON: dict[str, dict[str, str]] = {
    "order": {
        "first": "first",
        "last": "last",
        "earliest": "earliest",
        "latest": "latest",
        "oldest": "earliest",
        "newest": "latest",
        "most recent": "latest",
        "chronological": "chronological",
        "ascending": "ascending",
        "descending": "descending",
        "previous": "previous",
        "next": "next",
        "earlier": "earlier",
        "later": "later",
    },
    "superlative": {
        "highest": "max",
        "maximum": "max",
        "max": "max",
        "maxima": "max",
        "peak": "max",
        "largest": "max",
        "greatest": "max",
        "lowest": "min",
        "minimum": "min",
        "min": "min",
        "minima": "min",
        "nadir": "min",
        "smallest": "min",
        "most": "most",
        "least": "least",
        "fewest": "least",
    },
    "comparative": {
        "higher": "higher",
        "greater": "higher",
        "larger": "higher",
        "more": "more",
        "lower": "lower",
        "smaller": "lower",
        "less": "less",
        "fewer": "less",
        "increase": "increase",
        "increased": "increase",
        "rise": "increase",
        "rose": "increase",
        "decrease": "decrease",
        "decreased": "decrease",
        "fall": "decrease",
        "fell": "decrease",
        "above": "above",
        "below": "below",
        "exceed": "above",
        "exceeds": "above",
        "exceeded": "above",
    },
    "negation": {
        "not": "not",
        "no": "not",
        "never": "not",
        "without": "without",
        "none": "not",
        "neither": "not",
        "nor": "not",
        "n't": "not",
    },
    "time_anchor": {
        "before": "before",
        "prior to": "before",
        "preceding": "before",
        "after": "after",
        "since": "since",
        "until": "until",
        "within": "within",
    },
    "unit": {
        **{lab.unit.lower(): lab.unit.lower() for lab in LAB_PANEL},
        **{w: w.rstrip("s") for w in ("day", "days", "week", "weeks", "month", "months")},
        **{w: w.rstrip("s") for w in ("year", "years", "hour", "hours")},
    },
}
INVARIANT_CLASSES: tuple[str, ...] = tuple(_CANON)


def _pattern(words: Mapping[str, str]) -> re.Pattern[str]:
    alts = sorted(words, key=len, reverse=True)
    body = "|".join(re.escape(w) for w in alts)
    return re.compile(r"(?<![A-Za-z0-9/])(?:" + body + r")(?![A-Za-z0-9/])", re.I)


_PATTERNS = {cls: _pattern(words) for cls, words in _CANON.items()}
# A time word is a unit only shortly after a number ("at least 7 days", "7 or more days";
# "that day" is no unit).
_TIME_UNITS = frozenset(w for w in _CANON["unit"] if w[0] in "dwmyh" and "/" not in w)
_NUMBER_BEFORE = 16  # characters looked back for that number
_STANDALONE_NUMBER = re.compile(r"(?<![A-Za-z\d])\d+(?![A-Za-z\d])")  # not the 1 of "A1c"


def _is_unit(text: str, m: re.Match[str]) -> bool:
    if m.group(0).lower() not in _TIME_UNITS:
        return True
    before = text[max(0, m.start() - _NUMBER_BEFORE) : m.start()]
    return _STANDALONE_NUMBER.search(before) is not None


def invariants(text: str) -> dict[str, list[str]]:
    """Canonical invariant words of a text per class, every occurrence, in order."""
    out: dict[str, list[str]] = {}
    for cls, pat in _PATTERNS.items():
        plain = text.replace("n't", " n't")
        found = [m for m in pat.finditer(plain) if cls != "unit" or _is_unit(plain, m)]
        out[cls] = [_CANON[cls][m.group(0).lower()] for m in found]
    return out


# Classes whose word order carries meaning ("from the earliest to the latest"; "the latest
# before ... the first after"): compared as sequences; the others as counts.
SEQUENCE_CLASSES: frozenset[str] = frozenset({"order", "time_anchor"})


def invariant_problems(template: str, paraphrase: str) -> list[str]:
    """What a paraphrase changed: ``"<class>: <template words> -> <paraphrase words>"``."""
    a, b = invariants(template), invariants(paraphrase)
    bad = []
    for cls in INVARIANT_CLASSES:
        same = a[cls] == b[cls] if cls in SEQUENCE_CLASSES else Counter(a[cls]) == Counter(b[cls])
        if not same:
            bad.append(f"{cls}: {a[cls]} -> {b[cls]}")
    return bad


def answer_form(text: str) -> dict[str, str]:
    """The expected answer's form as the wording asks for it, where it says: ``extreme``
    (max/min), ``order`` (ascending = earliest to latest, descending = the reverse) and
    ``direction`` (higher/lower, more/less)."""
    inv = {cls: list(dict.fromkeys(words)) for cls, words in invariants(text).items()}
    form: dict[str, str] = {}
    ext = [w for w in inv["superlative"] if w in ("max", "min")]
    if len(ext) == 1:
        form["extreme"] = ext[0]
    seq = [w for w in inv["order"] if w in ("first", "last", "earliest", "latest")]
    early = {"first", "earliest"}
    if len(seq) >= 2 and (seq[0] in early) != (seq[1] in early):
        form["order"] = "ascending" if seq[0] in early else "descending"
    elif "ascending" in inv["order"] or "descending" in inv["order"]:
        form["order"] = "ascending" if "ascending" in inv["order"] else "descending"
    comp = [w for w in inv["comparative"] if w in ("higher", "lower", "more", "less")]
    if len(comp) == 1:
        form["direction"] = comp[0]
    return form


# --- the answer form a question's wording asks for (gate L2; paper Appendix A) ---------------
# Each rule reads the stem (the question without its format statement and options, except
# ``letter``, which reads the options block); the first rule that matches names the form.
# A question no rule reads asks for no particular form (None): L2 then checks nothing here.
_CLAUSE_START = r"(?:^|[,.;:?]\s+|\n)"
_FORM_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("patient", re.compile(r"\bwhich patient\b|\bwhose\b|\bpatient a\b.*\bpatient b\b", re.I)),
    ("letter", re.compile(r"^options:|^A\. |\bwhich of the (?:following|options)\b", re.I | re.M)),
    (
        "direction",
        re.compile(r"\btrend\b|\bhow (?:did|had|has|does)\b.*\bchange|\bgo (?:up|down)\b", re.I),
    ),
    (
        "date",
        re.compile(r"\b(?:on )?(?:what|which) (?:date|day)\b|\bwhen (?:was|were|did)\b", re.I),
    ),
    ("ids", re.compile(r"\bwhich\b.*\b(?:results|findings|events)\b|\blist the\b", re.I)),
    ("number", re.compile(r"\bhow many\b|\bwhat number of\b", re.I)),
    (
        "yes/no",
        re.compile(
            _CLAUSE_START + r"(?:was|were|is|are|does|do|did|has|have|had|can|could|will)\b"
            r"[^?]*\?",
            re.I,
        ),
    ),
    ("value", re.compile(_CLAUSE_START + r"(?:what|report|how much)\b", re.I)),
)
_ID = r"[A-Z]+(?:-[A-Z0-9]+)*-\d+"
_NUM = r"-?\d[\d,]*(?:\.\d+)?(?:-\d[\d,]*(?:\.\d+)?)?"
GOLD_FORMS: dict[str, re.Pattern[str]] = {
    "patient": re.compile(r"A|B|similar"),
    "letter": re.compile(r"[A-H]"),
    "direction": re.compile(r"(?:increased|decreased|stable|similar)(?:;[a-z]+)?"),
    "date": re.compile(r"\d{4}-\d{2}-\d{2}"),
    "ids": re.compile(rf"{_ID}(?:;{_ID})*"),
    "number": re.compile(_NUM),
    "yes/no": re.compile(r"yes|no"),
    "value": re.compile(rf"{_NUM}(?: \S+)*"),
}
ABSTAIN_GOLD = "insufficient information"
# The tasks whose every template the rules read as the task's form (tests/tasks/
# test_answer_form.py): the paper's T1-T9. The extended and trap sets word their options and
# answers otherwise (T10 a letter sequence, T11 options without a header, P-TST true/false), so
# the reading is not applied to them.
FORM_TASKS: frozenset[str] = frozenset(f"T{i}" for i in range(1, 10))


def asked_form(stem: str, question: str = "") -> str | None:
    """The answer form a question's wording asks for (a key of :data:`GOLD_FORMS`), or None
    when its wording says nothing the rules read.

    Args:
        stem: the question without its format statement, clause and options.
        question: the whole question (its options block makes the form ``letter``).
    """
    for form, pattern in _FORM_RULES:
        text = question if form == "letter" else stem
        if pattern.search(text):
            return form
    return None


def form_problem(stem: str, question: str, gold: str, task: str | None = None) -> str:
    """Why the gold is not of the form the wording asks for; "" when it is, when the gold is
    the abstention, or when ``task`` is outside :data:`FORM_TASKS`."""
    if task is not None and task not in FORM_TASKS:
        return ""
    form = asked_form(stem, question)
    gold = str(gold).strip()
    if form is None or gold == ABSTAIN_GOLD or GOLD_FORMS[form].fullmatch(gold):
        return ""
    return f"the wording asks for a {form} answer but the gold {gold!r} is not one"
