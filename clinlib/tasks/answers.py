"""Answer formats, strict and lenient parsers and correctness rules for T1–T9 (paper §3 "Task
suite", §5.4 (T9 abstention parser), Appendix E.2 (D2 parse failures), Appendix G.3 (strict vs
lenient parser, Tables 8–9)).

Every question states ``ANSWER_FORMATS[task]`` verbatim. All formats end with the same
abstention clause, so that T9 questions (asked exactly like T1) do not reveal that the fact is
absent; an explicit abstention is therefore a *parsed* answer (``ABSTAIN``) in every task —
wrong everywhere except T9 — never a parse failure.

Parsers return the canonical answer or ``None``. ``None`` is a parse failure (the paper's D2)
and scores as wrong (:func:`clinlib.tasks.base.score`); an empty response (D1) is one too.
The lenient parser first tries the strict one, so it accepts everything strict accepts.

Shared normalisation (both modes): surrounding whitespace, quotes, backticks and markdown
emphasis are dropped, as is a leading ``Answer:`` / ``Final answer:`` label and a trailing
full stop.

Abstention.
    strict: the response is ``insufficient information``, alone or followed by punctuation
    ("Insufficient information. The dialogue does not ..."), as for every strict format.
    lenient: additionally any verbose abstention cue ("no sodium value was reported on that
    date", "not measured", "the record does not mention", "cannot be determined", "unknown",
    "no record of" ...). A cue followed by a hedged guess ("not documented, but probably 140",
    "cannot be determined; it likely increased") is NOT an abstention: the guess after the
    hedge word (probably, likely, possibly, approximately, roughly, maybe, perhaps,
    estimated, might/may/could be; "about" / "around" only right before a number) is parsed as
    the answer — the model committed to something it says is unsupported, which T9 counts as
    an over-answer. A hedge that guesses nothing parseable ("unknown, probably never
    measured") leaves the abstention, as does context without a hedge ("no value on that
    date; the previous one was 138"). For T3/T5 the task's
    own reading runs before the abstention cues, because "the record does not mention an
    attribution" *is* the answer "no" there.

T1 (lab value; gold ``"<value_text> <unit>"``, e.g. ``"1.3 mg/dL"``).
    strict: the whole response is ``<number>`` or ``<number> <unit>`` (an optional ``<`` /
    ``>`` comparator, a known unit spelling). Parsed form ``"<number> <canonical unit>"``.
    lenient: dates, times, visit ordinals ("visit 2") and reference ranges are removed; the
    numbers left are read. A value after an ``answer is`` / ``value:`` label wins; otherwise
    there must be exactly one distinct number (repeats allowed, its unit-bearing mention is
    kept): "rose from 1.1 to 1.3 mg/dL" or "1.1-1.3" is ambiguous -> ``None``.
    correct: the parsed number equals the gold number within half a unit of the gold's last
    reported decimal place, exclusive (gold "1.3" accepts 1.25 < x < 1.35; gold "140" accepts
    139.5 < x < 140.5) — the parsed value rounds to the gold at the gold's precision. Units
    are not required; an explicit unit must be the gold's unit up to spelling (mg/dl, MG/DL;
    K/uL, x10^3/uL, 10^3/µL, thou/uL) — a different unit is wrong (the number would mean
    something else), except mmol/L for a mEq/L gold: every mEq/L lab of the panel is a
    monovalent ion (or the anion gap), where the two units are numerically identical. A gold
    comparator ("<0.01") must be matched; a comparator the gold lacks is wrong.

T2 (trend; gold ``"<increased|decreased|stable>;<none|weak|moderate|strong>"``).
    strict: ``direction;magnitude`` from those vocabularies (``;`` or ``,`` between).
    lenient: direction words / phrases (rose, went up, fell, dropped, unchanged, "no
    significant change" ...) and magnitude words (slightly/mild -> weak, moderately ->
    moderate, markedly/substantially/sharply/significantly -> strong). A direction word in a
    negated clause ("did not increase") is discarded. Stable implies ``none``. Two
    directions, two magnitudes, or a direction without a magnitude -> ``None`` (the gold
    needs both and the reader cannot supply the missing half).
    correct: exact match.

T3, T5 (gold ``"yes"`` / ``"no"``).
    strict: the response is ``yes`` / ``no`` alone or followed by punctuation ("Yes." /
    "No, the clinician did not"); "No contradiction ..." is prose, not the format.
    lenient: an answer-position yes/no ("the answer is no", "no." ...) anywhere; a ``yes`` in
    a negated clause ("I would not say yes") is discarded, never flipped to ``no``; then the
    task's polarity phrases (T3: attributed / consistent with / due to / secondary to; T5:
    contradict / conflict / inconsistent / discrepancy, "consistent" meaning no
    contradiction), negated -> the opposite answer. Both answers found -> ``None``.

T4 (evidence event ids; gold the ids sorted and joined by ``;``).
    strict: the response is only ids (LAB-123, DX-20000001-3, ...) separated by ``;``.
    lenient: every id anywhere (in brackets, comma lists, prose), excluding ids in a negated
    clause ("not LAB-5"). Parsed form: unique upper-case ids, sorted, joined by ``;``.
    correct: exact set equality (the paper's binarised set-F1).

T6 (gold ``"A"`` / ``"B"`` / ``"similar"``).
    strict: ``A`` / ``B`` / ``Patient A`` / ``(B)`` alone or followed by punctuation, or a
    response starting with ``similar``.
    lenient: "the answer is B", comparatives ("Patient A has more diagnoses than patient B"
    -> A; "... fewer ... than" -> the other), a single patient named, or a similarity phrase
    (similar, the same, equal, comparable, no difference) when no single patient is named.

T7 (gold the option letter; ``options`` = the four option texts in letter order).
    strict: the response starts with a letter A–D ("B", "(B)", "B.", "Option B", "B. Lisinopril";
    "C Atorvastatin" only when an option's text follows — "A patient ..." is prose).
    lenient: also "the answer is C", the option text alone ("Atorvastatin"), a unique option
    whose text (or head word) is mentioned. A letter together with a different option's text
    ("B. Metformin" when B is Lisinopril) is contradictory: both modes return ``None`` (a
    reader cannot tell which the model meant, so it is a parse failure, scored wrong).

T8 (gold ``"increased"`` / ``"decreased"`` / ``"similar"``).
    strict: the response starts with one of the three words.
    lenient: the T2 direction reading without magnitude ("it went up slightly" ->
    increased; "no real change" -> similar).

T9 (gold ``"insufficient information"``; correct only for an abstention).
    strict: the requested abstention -> ``ABSTAIN``; otherwise a concrete answer in the requested
    format (a T1-style value, a YYYY-MM-DD date, a bare yes/no) is returned as the
    over-answer's parsed form; anything else (prose, including verbose abstentions) ->
    ``None``: the strict parser cannot tell them apart (the paper's "parser-missed" bucket).
    lenient: verbose abstentions -> ``ABSTAIN`` (hedged guesses excepted, see above); a
    concrete value / date / yes-no is the over-answer; any other non-empty prose is an
    over-answer too, recorded as its first 80 normalised characters.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from clinlib.data.vocab import EVENT_ID_PREFIX
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.rules import (
    OPTION_LETTERS,
    T6_ANSWERS,
    T8_DIRECTIONS,
    TREND_DIRECTIONS,
    TREND_MAGNITUDES,
    YES_NO,
)

TASK_NAMES: tuple[str, ...] = tuple(f"T{i}" for i in range(1, 10))

ABSTAIN_CLAUSE = "If the record does not state it, reply exactly: insufficient information."

# T1 and T9 share one wording: a T9 question must read exactly like a T1 question (§3).
VALUE_FORMAT = "Reply with the value and its unit only (for example: 1.3 mg/dL). " + ABSTAIN_CLAUSE

ANSWER_FORMATS: dict[str, str] = {
    "T1": VALUE_FORMAT,
    "T2": (
        "Reply as <direction>;<magnitude> with direction one of increased, decreased, stable "
        "and magnitude one of none, weak, moderate, strong (for example: decreased;weak). "
        + ABSTAIN_CLAUSE
    ),
    "T3": "Reply yes or no. " + ABSTAIN_CLAUSE,
    "T4": (
        "Reply with the event ids only, separated by semicolons (for example: "
        "LAB-101;LAB-202). " + ABSTAIN_CLAUSE
    ),
    "T5": "Reply yes or no. " + ABSTAIN_CLAUSE,
    "T6": "Reply A, B or similar. " + ABSTAIN_CLAUSE,
    "T7": "Reply with the letter of one option (A, B, C or D). " + ABSTAIN_CLAUSE,
    "T8": "Reply increased, decreased or similar. " + ABSTAIN_CLAUSE,
    "T9": VALUE_FORMAT,
}

MAX_TOKENS: dict[str, int] = {
    "T1": 60,
    "T2": 60,
    "T3": 80,
    "T4": 120,
    "T5": 80,
    "T6": 80,
    "T7": 80,
    "T8": 120,
    "T9": 80,
}


class AnswerError(ValueError):
    """An unknown task or a gold answer outside the task's canonical vocabulary."""


# --------------------------------------------------------------------------- normalisation

_LABEL_RE = re.compile(r"^\s*(?:final\s+answer|answer|response)\s*[:\-–—]\s*", re.IGNORECASE)
_WRAP_CHARS = " \t\r\n\"'`*_“”‘’"


def _normalize(text: str | None) -> str:
    """Trim wrappers, an ``Answer:`` label and a trailing full stop; unify dashes and spaces."""
    if text is None:
        return ""
    s = str(text).replace("\u2212", "-").replace("\u00a0", " ").replace("µ", "u").replace("μ", "u")
    s = s.strip(_WRAP_CHARS)
    s = _LABEL_RE.sub("", s).strip(_WRAP_CHARS)
    s = re.sub(r"\s+", " ", s)
    return s.rstrip(".!").strip(_WRAP_CHARS)


def _check_task(task: str) -> str:
    if task not in TASK_NAMES:
        raise AnswerError(f"unknown task {task!r}; known: {', '.join(TASK_NAMES)}")
    return task


# --------------------------------------------------------------------------- negation

_NEGATORS = {
    "not",
    "no",
    "never",
    "cannot",
    "without",
    "neither",
    "nor",
    "except",
    "excluding",
    "none",
}
_CLAUSE_BREAK = re.compile(r"[.;!?\n]|,\s*(?:but|however|though|although|so|and)\b|\bbut\b")


def _negated(text: str, start: int, window: int = 4) -> bool:
    """Whether the word at ``start`` sits in a negated clause (negator within ``window`` words)."""
    head = text[:start]
    breaks = list(_CLAUSE_BREAK.finditer(head))
    clause = head[breaks[-1].end() :] if breaks else head
    words = re.findall(r"[a-z']+", clause.lower())[-window:]
    return any(w in _NEGATORS or w.endswith("n't") for w in words)


# --------------------------------------------------------------------------- abstention

_STATE_VERBS = (
    r"(?:reported|recorded|documented|measured|mentioned|available|given|provided|noted|"
    r"found|listed|stated|specified|included|known|charted|obtained|drawn|checked)"
)
_ABSTAIN_CUES = re.compile(
    r"insufficient\s+(?:information|data|evidence|detail)"
    r"|not\s+(?:been\s+|be\s+)?" + _STATE_VERBS + r"|"
    r"\bno\b[^.;]{0,60}?\b(?:was|were|is|are|has\s+been|have\s+been)\s+(?:ever\s+)?"
    + _STATE_VERBS
    + r"|\bno\s+(?:record|mention|documentation|data|information|measurement|result|value|"
    r"values|evidence|entry|entries|reading|report)\b"
    r"|\bno\s+(?:\w+\s+){1,3}?" + _STATE_VERBS + r"\b"
    r"|(?:does|did|do)\s*(?:not|n't)\s+(?:mention|state|include|contain|document|record|"
    r"report|specify|provide|list|show|say|give|indicate)"
    r"|(?:cannot|can't|can\s+not|could\s+not|couldn't|unable\s+to|impossible\s+to|"
    r"not\s+possible\s+to)\s+(?:be\s+)?(?:determine|determined|tell|say|answer|find|know|"
    r"identify|establish|assess|confirm|provide)"
    r"|\bunknown\b|\bunavailable\b|\bnot\s+enough\s+information\b|\bno\s+way\s+to\s+know\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:probably|likely|possibly|perhaps|presumably|approximately|approx|roughly|maybe|"
    r"estimated?|guess(?:ing)?|might\s+be|may\s+be|could\s+be|might\s+have|may\s+have)\b"
    # "about"/"around" hedge only a number ("no information about sodium" is not a guess)
    r"|\b(?:about|around)\s+(?=[<>~]?\d)|~|≈",
    re.IGNORECASE,
)


_STRICT_ABSTAIN = re.compile(r"^insufficient\s+information(?=$|\s*[.,;:!)\-–—])", re.IGNORECASE)


def _is_exact_abstention(norm: str) -> bool:
    """The requested abstention, alone or followed by punctuation and an explanation."""
    return _STRICT_ABSTAIN.match(norm) is not None


def _abstention_or_guess(norm: str) -> tuple[bool, str | None]:
    """(True, guess_text) when ``norm`` carries an abstention cue.

    ``guess_text`` is the text after a hedge word that follows the cue (the model's guess), or
    None for a clean abstention.
    """
    cue = _ABSTAIN_CUES.search(norm)
    if not cue:
        return False, None
    hedge = _HEDGE.search(norm, cue.end())
    if hedge is not None:
        return True, norm[hedge.end() :]
    # a guess may also precede the cue: "probably 140, but it is not documented"
    before = _HEDGE.search(norm[: cue.start()])
    return True, (norm[before.end() : cue.start()] if before is not None else None)


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


def _units_compatible(a: str | None, b: str | None) -> bool:
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
_NUM = r"(?:\d+(?:\.\d+)?|\.\d+)"
_VALUE_RE = re.compile(
    r"(?<![\w.])(?P<cmp>[<>]=?\s*)?(?P<num>" + _NUM + r")(?![\d])"
    r"(?:\s*(?P<unit>" + _UNIT_PATTERN + r")(?![a-z0-9]))?",
    re.IGNORECASE,
)
_STRICT_VALUE_RE = re.compile(
    r"^(?P<cmp>[<>]=?\s*)?(?P<num>" + _NUM + r")(?:\s*(?P<unit>" + _UNIT_PATTERN + r"))?$",
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
    r"|\b(?:ref\w*|normal)(?:\s+range)?(?:\s+is|\s+of|:)?\s*" + _NUM + r"\s*(?:-|–|to)\s*" + _NUM,
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


def _strict_value(norm: str) -> str | None:
    m = _STRICT_VALUE_RE.match(norm)
    return _fmt_value(m["cmp"], m["num"], m["unit"]) if m else None


def _values_in(text: str) -> list[tuple[str | None, str, str | None]]:
    return [(m["cmp"], m["num"], m["unit"]) for m in _VALUE_RE.finditer(_scrub(text))]


def _pick_value(text: str) -> str | None:
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


def _split_value(text: str) -> tuple[str, Decimal, int, str | None]:
    """(comparator, number, decimals, unit) of a canonical value string."""
    m = re.match(r"^\s*(?P<cmp>[<>]=?)?\s*(?P<num>" + _NUM + r")\s*(?P<unit>.*?)\s*$", text)
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
    return _split_value(text)[1]


def _date_in(text: str) -> str | None:
    dates = {f"{y}-{int(m):02d}-{int(d):02d}" for y, m, d in _ISO_DATE_RE.findall(text)}
    return dates.pop() if len(dates) == 1 else None


# --------------------------------------------------------------------------- yes / no

# the requested format: the word alone or followed by punctuation ("Yes." / "No, the ...")
_YN_START = re.compile(r"^(yes|no)(?=$|\s*[.,;:!)\-–—])", re.IGNORECASE)
_YN_ANSWER = re.compile(
    r"\b(?:answer\s+is|answer:|i\s+would\s+say|i'd\s+say|so)\s*[\"']?(yes|no)\b"
    r"|\b(yes|no)\s*(?=[.,;:!)]|$)",
    re.IGNORECASE,
)
_T3_POLARITY = re.compile(
    r"\b(?:attribut\w*|consistent\s+with|due\s+to|secondary\s+to|explained\s+by|caused\s+by|"
    r"linked\s+to|link\w*|ascribed\s+to)",
    re.IGNORECASE,
)
_T5_CONTRA = re.compile(
    r"\b(?:contradict\w*|conflict\w*|inconsisten\w*|discrepan\w*|mismatch\w*)", re.IGNORECASE
)
_T5_CONSISTENT = re.compile(r"\b(?:consistent|agree\w*|match(?:es|ed)?)\b", re.IGNORECASE)


def _yes_no_strict(norm: str) -> str | None:
    m = _YN_START.match(norm)
    return m.group(1).lower() if m else None


def _yes_no_lenient(task: str, norm: str) -> str | None:
    found: set[str] = set()
    for m in _YN_ANSWER.finditer(norm):
        word = (m.group(1) or m.group(2)).lower()
        if word == "yes" and _negated(norm, m.start(m.lastindex or 1)):
            continue  # "I would not say yes": discarded, never flipped
        if word == "no" and m.group(2) and _negated(norm, m.start(2)):
            continue
        found.add(word)
    if not found:
        if task == "T3":
            for m in _T3_POLARITY.finditer(norm):
                found.add("no" if _negated(norm, m.start(), window=8) else "yes")
        else:
            for m in _T5_CONTRA.finditer(norm):
                found.add("no" if _negated(norm, m.start(), window=8) else "yes")
            if not found:
                for m in _T5_CONSISTENT.finditer(norm):
                    found.add("yes" if _negated(norm, m.start(), window=6) else "no")
    return found.pop() if len(found) == 1 else None


# --------------------------------------------------------------------------- trends (T2, T8)

_STABLE_RE = re.compile(
    r"\b(?:stable|unchanged|steady|flat|constant|similar|"
    r"no\s+(?:significant\s+|meaningful\s+|real\s+|notable\s+|clinically\s+significant\s+|"
    r"appreciable\s+|substantial\s+|major\s+)?(?:change|difference)|"
    r"(?:did|does|has)\s*(?:not|n't)\s+(?:\w+\s+)?change\w*|"
    r"(?:remained|stayed|remains|stays|was|were)\s+(?:essentially\s+|roughly\s+|about\s+|"
    r"largely\s+)?(?:the\s+same|stable|steady|flat|constant|unchanged|level)|"
    r"(?:about|roughly|essentially|basically|largely)\s+the\s+same)",
    re.IGNORECASE,
)
_UP_RE = re.compile(
    r"\b(?:increas\w*|rose|risen|rising|rises|rise|went\s+up|gone\s+up|go(?:es)?\s+up|"
    r"trend(?:ed|ing)?\s+up\w*|up-?trend\w*|upward\w*|climb\w*|higher|grew|grown|jump\w*)\b",
    re.IGNORECASE,
)
_DOWN_RE = re.compile(
    r"\b(?:decreas\w*|fell|fallen|falling|falls|fall|dropp\w*|drops?|went\s+down|gone\s+down|"
    r"go(?:es)?\s+down|trend(?:ed|ing)?\s+down\w*|down-?trend\w*|downward\w*|declin\w*|lower|"
    r"lowered|reduc\w*)\b",
    re.IGNORECASE,
)
_MAGNITUDE_RES: dict[str, re.Pattern[str]] = {
    "weak": re.compile(
        r"\b(?:weak(?:ly)?|slight(?:ly)?|mild(?:ly)?|small|minor|marginal(?:ly)?|a\s+little|"
        r"a\s+bit)\b",
        re.IGNORECASE,
    ),
    "moderate": re.compile(r"\bmoderate(?:ly)?\b", re.IGNORECASE),
    "strong": re.compile(
        r"\b(?:strong(?:ly)?|marked(?:ly)?|substantial(?:ly)?|significant(?:ly)?|sharp(?:ly)?|"
        r"large|dramatic(?:ally)?|considerabl[ey]|major|steep(?:ly)?|greatly|big)\b",
        re.IGNORECASE,
    ),
    "none": re.compile(r"\bnone\b", re.IGNORECASE),
}


def _directions(norm: str) -> set[str]:
    """Directions asserted in ``norm`` (negated clauses discarded)."""
    found: set[str] = set()
    if _STABLE_RE.search(norm):
        found.add("stable")
    rest = _STABLE_RE.sub(" ", norm)
    for label, rx in (("increased", _UP_RE), ("decreased", _DOWN_RE)):
        for m in rx.finditer(rest):
            if not _negated(rest, m.start()):
                found.add(label)
    return found


def _magnitudes(norm: str) -> set[str]:
    rest = _STABLE_RE.sub(" ", norm)
    return {
        label
        for label, rx in _MAGNITUDE_RES.items()
        if any(not _negated(rest, m.start(), window=2) for m in rx.finditer(rest))
    }


_T2_STRICT = re.compile(
    r"^(increased|decreased|stable)\s*[;,]\s*(none|weak|moderate|strong)$", re.IGNORECASE
)


def _t2_strict(norm: str) -> str | None:
    m = _T2_STRICT.match(norm)
    return f"{m.group(1).lower()};{m.group(2).lower()}" if m else None


def _t2_lenient(norm: str) -> str | None:
    dirs = _directions(norm)
    if len(dirs) != 1:
        return None
    direction = dirs.pop()
    if direction == "stable":
        return "stable;none"
    mags = _magnitudes(norm) - {"none"}
    return f"{direction};{mags.pop()}" if len(mags) == 1 else None


def _t8_strict(norm: str) -> str | None:
    m = re.match(r"^(increased|decreased|similar)\b", norm, re.IGNORECASE)
    return m.group(1).lower() if m else None


def _t8_lenient(norm: str) -> str | None:
    dirs = _directions(norm)
    if len(dirs) != 1:
        return None
    d = dirs.pop()
    return "similar" if d == "stable" else d


# --------------------------------------------------------------------------- T4 event ids

_ID_RE = re.compile(
    r"\b(" + "|".join(sorted(set(EVENT_ID_PREFIX.values()))) + r")-(\d+(?:-\d+)?)\b",
    re.IGNORECASE,
)


def _join_ids(ids) -> str:
    return ";".join(sorted({i.upper() for i in ids}))


def _t4_strict(norm: str) -> str | None:
    parts = [p.strip().strip("[]()") for p in norm.split(";")]
    if not parts or any(not _ID_RE.fullmatch(p) for p in parts):
        return None
    return _join_ids(parts)


def _t4_lenient(norm: str) -> str | None:
    ids = [m.group(0) for m in _ID_RE.finditer(norm) if not _negated(norm, m.start(), window=3)]
    return _join_ids(ids) if ids else None


# --------------------------------------------------------------------------- T6

# "Patient A: 5, patient B: 7" is a list, not an answer: a colon does not end the answer
_T6_START = re.compile(
    r"^(?:patient\s+\(?([ab])\)?|\(?([ab])\)?)(?=$|\s*[.,;)\-–—])|^(similar)\b", re.IGNORECASE
)
_T6_ANSWER = re.compile(
    r"\b(?:answer\s+is|answer:|so|therefore|thus|hence)\s*[:,]?\s*(?:patient\s+)?"
    r"(?:(?P<p>[AB])\b|(?P<s>similar)\b)",
    re.IGNORECASE,
)
# a bare capital A/B names a patient only before a verb or punctuation ("A has", "B.") — a
# sentence-initial article "A higher count ..." must not count.
_T6_PATIENT = re.compile(
    r"(?i:\bpatient)\s+([abAB])\b|(?<![\w'])([AB])(?=\s*(?:[.,;:)!]|$)|\s+(?:has|had|have|is|was|"
    r"shows|showed|with|'s)\b)"
)
_T6_COMPARE = re.compile(
    r"\b(?:patient\s+)?(?P<x>[AB])\s+(?:has|had|have|shows|showed|with|is|was)\s+(?:a\s+|the\s+)?"
    r"(?:(?P<more>more|higher|greater|larger|bigger|most|highest|largest|greatest)|"
    r"(?P<less>fewer|lower|less|smaller|least|lowest|fewest))\b",
    re.IGNORECASE,
)
_T6_SIMILAR = re.compile(
    r"\b(?:similar|the\s+same|equal(?:ly)?|comparable|identical|a\s+tie|tied|"
    r"no\s+(?:meaningful\s+|significant\s+|real\s+)?difference)\b",
    re.IGNORECASE,
)


def _t6_strict(norm: str) -> str | None:
    m = _T6_START.match(norm)
    if not m:
        return None
    return "similar" if m.group(3) else (m.group(1) or m.group(2)).upper()


def _t6_lenient(norm: str) -> str | None:
    answers = [
        (m["p"].upper() if m["p"] else "similar")
        for m in _T6_ANSWER.finditer(norm)
        if not m["p"] or m["p"].isupper() or "patient" in m.group(0).lower()
    ]
    if answers:
        return answers[-1]
    compares = set()
    for m in _T6_COMPARE.finditer(norm):
        if not m["x"].isupper() and "patient" not in m.group(0).lower():
            continue
        x = m["x"].upper()
        compares.add(x if m["more"] else ("B" if x == "A" else "A"))
    if len(compares) == 1:
        return compares.pop()
    named = {
        (m.group(1) or m.group(2)).upper()
        for m in _T6_PATIENT.finditer(norm)
        if not _negated(norm, m.start(), window=2)
    }
    similar = any(not _negated(norm, m.start(), window=3) for m in _T6_SIMILAR.finditer(norm))
    if len(named) == 1 and not similar:
        return named.pop()
    if similar and len(named) != 1:
        return "similar"
    return None


# --------------------------------------------------------------------------- T7


def _norm_text(s: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^a-z0-9]+", " ", str(s).lower())).strip()


def _contains(hay: str, needle: str) -> bool:
    return bool(needle) and re.search(r"(?<![a-z0-9])" + re.escape(needle) + r"(?![a-z0-9])", hay)


def _options_in(text: str, options: list[str]) -> set[int]:
    """Indices of options whose text (or distinctive head word) is mentioned, un-negated."""
    hay = _norm_text(text)
    hits: set[int] = set()
    norms = [_norm_text(o) for o in options]
    heads = [n.split(" ")[0] if n else "" for n in norms]
    for i, n in enumerate(norms):
        m = re.search(r"(?<![a-z0-9])" + re.escape(n) + r"(?![a-z0-9])", hay) if n else None
        if m is None and len(heads[i]) >= 4 and heads.count(heads[i]) == 1:
            m = re.search(r"(?<![a-z0-9])" + re.escape(heads[i]) + r"(?![a-z0-9])", hay)
        if m is not None and not _negated(hay, m.start(), window=3):
            hits.add(i)
    return hits


_T7_START = re.compile(
    r"^(?P<pre>(?:option|choice)\s+)?\(?(?P<letter>[A-Da-d])\)?"
    r"(?:(?P<sep>\s*[.):,;\-–—]\s*|\s*$)|\s+)(?P<rest>.*)$",
    re.IGNORECASE,
)
# "answer is C", "option (b).", "(C)": a lower-case letter only when punctuation follows.
_T7_LETTER = re.compile(
    r"(?i:\b(?:option|answer|choice)\s*(?:is|:)?\s*)\(?(?:([A-D])\b|([a-d])(?=\)|[.,;:]|$))\)?"
    r"|\(([A-D])\)"
)


def _t7_from_start(norm: str, options: list[str]) -> str | None | bool:
    """Letter at the start of ``norm`` (False: no letter there; None: contradictory text)."""
    m = _T7_START.match(norm)
    if not m:
        return False
    letter, rest = m["letter"], m["rest"].strip()
    idx = OPTION_LETTERS.index(letter.upper())
    if m["sep"] is None and not m["pre"]:
        # "A patient ..." is prose, not a letter: a letter followed by a space counts only
        # when an option's text comes next ("C Atorvastatin")
        head = _norm_text(rest)
        if not letter.isupper() or not any(
            _norm_text(o) and head.startswith(_norm_text(o).split(" ")[0]) for o in options
        ):
            return False
    if rest and options:
        hits = _options_in(rest, options)
        if hits and idx not in hits:
            return None  # "B. Metformin" when B is Lisinopril: contradictory
    return OPTION_LETTERS[idx]


def _t7_strict(norm: str, options: list[str] | None) -> str | None:
    r = _t7_from_start(norm, list(options or []))
    return r if isinstance(r, str) else None


def _t7_lenient(norm: str, options: list[str] | None) -> str | None:
    options = list(options or [])
    r = _t7_from_start(norm, options)
    if r is None:
        return None
    letters: set[str] = {r} if isinstance(r, str) else set()
    for m in _T7_LETTER.finditer(norm):
        letter = m.group(1) or m.group(2) or m.group(3)
        if not _negated(norm, m.start(), window=2):
            letters.add(letter.upper())
    if options:
        letters |= {OPTION_LETTERS[i] for i in _options_in(norm, options)}
    return letters.pop() if len(letters) == 1 else None


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
        options: T7's four option texts in letter order.

    Returns:
        The canonical answer, ``ABSTAIN`` for an exact abstention, or None (parse failure).
    """
    _check_task(task)
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
    return _concrete_lenient(text)


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
    _check_task(task)
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
    _check_task(task)
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
    return None if gold == ABSTAIN else f"not {ABSTAIN!r}"
