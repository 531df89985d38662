"""Dialogue verifier: the source-verifiability contract of every synthesised dialogue
(paper §3 "Cohort" — "15 patients fail dialogue invariants during synthesis and are dropped";
Fig. 2 stage 3 "verifier v3.2 (10 HARD + 3 SOFT); 385/400 pass").

This module is the authority on provenance. It defines

- the tag format: a fact-bearing sentence is followed by ``[LAB-123, LAB-124]`` in
  ``text_tagged``; ``text`` is the same turn without tags;
- which fields of an event must appear verbatim in the turn that cites it
  (:func:`required_fields`) and which strings a citing turn may contain
  (:func:`traceable_strings`);
- what must be covered: everything except medications, labs outside :data:`KEY_LABS`, and
  normal key-lab results on a middle day of a visit (:func:`key_lab_missable`), which the
  synthesis rule may leave unstated (``missed``) as T9 abstention anchors; and what the length
  budget (clinlib.dialogue.budget, coverage reason ``budget: ...``) leaves out: any lab, medication,
  diagnosis or procedure, but never an admission, a discharge or every diagnosis of a visit.
  Must-cover coverage is covered / (covered + unusable).

HARD checks (any failure drops the patient):

==========================  ==================================================================
event_ids_exist             every id a turn lists exists in the patient's events and is usable
tags_consistent             ``text_tagged`` minus its tags equals ``text``; tags == event_ids
covered_fields_verbatim     each covered event's value, unit, date, code / title / drug, route
                            appear verbatim in a turn that lists its id (a medication's dose
                            and unit only when recorded: without one it is named as started)
no_untraced_numbers         every number in a turn traces to an event the turn lists
no_untraced_dates           every date in a turn is the date of an event the turn lists
no_untraced_codes           every ICD-like code in a turn is the code of an event it lists
no_untraced_drugs           every known drug name in a turn belongs to a medication it lists
visits_in_time_order        visits ascend in time, turns ascend, facts sit in their own visit
must_cover_coverage         >= 98 % of must-cover events covered; only missable kinds missed;
                            every source event accounted for; a diagnosis told per visit
missed_events_unstated      a missed event is never cited, a missed lab's name is never given
                            with its date, a missed drug or ICD code is never named in its visit
==========================  ==================================================================

SOFT checks (warnings): ``length_outlier`` (mean characters per visit outside the corpus'
Tukey fences on a log scale, k = 3), ``turn_alternation`` (patient and clinician alternate
within each visit, patient first), ``repeated_sentences`` (no sentence of five or more words
makes up more than 10 % of the dialogue's sentences, at least three copies). With an LLM
rewriter a fourth soft row, ``rewrite_preserved``, records visits that fell back to the
template text.

Numbers have no whitelist: templates write ordinals and counts as words, so any digit in a
turn must come from the events it cites (value_text, reference bounds, dose, dates, codes,
titles). Matching is boundary-aware ("1.3" is not found inside "11.3").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from clinlib.data.schema import ARTIFACTS
from clinlib.data.vocab import EVENT_ID_PREFIX, LAB_PANEL
from clinlib.dialogue.budget import BUDGET_REASON

# --- what must be covered ------------------------------------------------------------------

# Labs always verbalised (the labs the index diseases and the tasks lean on); other panel
# labs and medications may be left unstated by the synthesis rule (clinlib.dialogue.synth).
KEY_LABS: frozenset[str] = frozenset(
    {
        "creatinine",
        "potassium",
        "sodium",
        "glucose",
        "hba1c",
        "ldl",
        "troponin_t",
        "hemoglobin",
        "bun",
    }
)
MISSABLE_KINDS: tuple[str, ...] = ("lab", "medication")
# Left out for the length budget (clinlib.dialogue.budget; coverage reason starting with
# BUDGET_REASON): any lab, drug, diagnosis or procedure, never an admission or a discharge, and
# never every diagnosis of a visit.
BUDGET_MISSABLE_KINDS: tuple[str, ...] = ("lab", "medication", "diagnosis", "procedure")
MIN_COVERAGE = 0.98

HARD_CHECKS: dict[str, str] = {
    "event_ids_exist": "every event id a turn lists exists in the patient's events and is usable",
    "tags_consistent": "text_tagged without its tags equals text; tag ids equal event_ids",
    "covered_fields_verbatim": "each covered event's value, unit, date and code appear "
    "verbatim in a turn that lists its id",
    "no_untraced_numbers": "every number in a turn traces to an event that turn lists",
    "no_untraced_dates": "every date in a turn is the date of an event that turn lists",
    "no_untraced_codes": "every ICD-like code in a turn belongs to an event that turn lists",
    "no_untraced_drugs": "every known drug name in a turn belongs to a medication it lists",
    "visits_in_time_order": "visits ascend in time and every fact sits in its own visit",
    "must_cover_coverage": f">= {MIN_COVERAGE:.0%} of must-cover events covered; only missable "
    "kinds missed (rule or length budget); a diagnosis told in every visit",
    "missed_events_unstated": "missed events are never cited, named with their date (labs) "
    "or named in their visit (medications, ICD codes)",
}
SOFT_CHECKS: dict[str, str] = {
    "length_outlier": "mean characters per visit inside the corpus' Tukey fences (log, k=3)",
    "turn_alternation": "patient and clinician alternate within each visit, patient first",
    "repeated_sentences": "no sentence (>= 5 words) is more than 10% of the dialogue's sentences",
}
REWRITE_CHECK = "rewrite_preserved"
CHECK_ORDER: dict[str, int] = {
    c: i for i, c in enumerate([*HARD_CHECKS, *SOFT_CHECKS, REWRITE_CHECK])
}

# Default bounds (characters per visit) when no corpus is available to set the fences.
DEFAULT_CHARS_PER_VISIT = (150.0, 20_000.0)
TUKEY_K = 3.0
REPEAT_MIN_WORDS = 5
REPEAT_MAX_SHARE = 0.10
REPEAT_MIN_COUNT = 3
MAX_DETAIL_ITEMS = 3

CHECK_COLUMNS = ARTIFACTS["dialogue_checks"]

# Common inpatient drug names (generic, lower case). A drug from this list, or any medication
# label in the events, found in a turn that does not cite it is an untraced drug.
DRUG_LEXICON: tuple[str, ...] = (
    "acetaminophen", "albuterol", "allopurinol", "alprazolam", "amiodarone", "amlodipine",
    "amoxicillin", "apixaban", "aspirin", "atenolol", "atorvastatin", "azithromycin",
    "bisacodyl", "bumetanide", "calcitriol", "captopril", "carvedilol", "cefazolin",
    "ceftriaxone", "cephalexin", "ciprofloxacin", "clonidine", "clopidogrel", "dapagliflozin",
    "dexamethasone", "diazepam", "digoxin", "diltiazem", "docusate", "empagliflozin",
    "enalapril", "enoxaparin", "epoetin", "famotidine", "fentanyl", "furosemide", "gabapentin",
    "glargine", "glimepiride", "glipizide", "glyburide", "haloperidol", "heparin", "hydralazine",
    "hydrochlorothiazide", "hydromorphone", "ibuprofen", "insulin", "isosorbide", "ketorolac",
    "labetalol", "levetiracetam", "levofloxacin", "levothyroxine", "lisinopril", "lorazepam",
    "losartan", "magnesium sulfate", "meropenem", "metformin", "methylprednisolone",
    "metoclopramide", "metoprolol", "metronidazole", "midazolam", "morphine", "naloxone",
    "nifedipine", "nitroglycerin", "omeprazole", "ondansetron", "oxycodone", "pantoprazole",
    "piperacillin", "polyethylene glycol", "potassium chloride", "pravastatin", "prednisone",
    "propofol", "quetiapine", "ranolazine", "rivaroxaban", "rosuvastatin", "senna", "sevelamer",
    "simvastatin", "sitagliptin", "spironolactone", "tamsulosin", "ticagrelor", "torsemide",
    "tramadol", "trazodone", "valsartan", "vancomycin", "warfarin", "zolpidem",
)  # fmt: skip

# --- tags ----------------------------------------------------------------------------------

_ID = r"(?:" + "|".join(sorted(EVENT_ID_PREFIX.values())) + r")-[A-Za-z0-9_.\-]+"
TAG_RE = re.compile(r" ?\[(" + _ID + r"(?:, " + _ID + r")*)\]")
_ANY_TAG_RE = re.compile(r"\[\s*" + _ID)
# A sentence ends at . ! ? or after a tag, but never between a sentence and its own tag.
_SENTENCE_END_RE = re.compile(r"(?<=[.!?\]])\s+(?!\[" + _ID + r")(?=\S)")
DATE_RE = re.compile(r"(?<!\d)(?:\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4})(?!\d)")
CODE_RE = re.compile(r"\b(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z0-9]{3,7}(?:\.[A-Z0-9]{1,4})?\b")
NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")
_DIGIT_RE = re.compile(r"\d")


def format_tag(event_ids: Sequence[str]) -> str:
    """The provenance tag written after a fact-bearing sentence, e.g. ``[LAB-1, LAB-2]``."""
    return "[" + ", ".join(event_ids) + "]"


def tag_ids(text_tagged: str) -> list[str]:
    """Event ids of every tag in a tagged text, in order of first appearance."""
    seen: dict[str, None] = {}
    for m in TAG_RE.finditer(text_tagged):
        for eid in m.group(1).split(", "):
            seen.setdefault(eid, None)
    return list(seen)


def strip_tags(text_tagged: str) -> str:
    """The plain text of a tagged text (each tag and the one space before it removed)."""
    return TAG_RE.sub("", text_tagged)


def tagged_sentences(text_tagged: str) -> list[tuple[str, list[str]]]:
    """Split a tagged turn into (plain sentence, cited ids) pairs.

    A sentence ends at ``.``/``!``/``?`` or after a tag; the tag belongs to the sentence it
    follows.
    """
    out = []
    for chunk in _SENTENCE_END_RE.split(text_tagged.strip()):
        if chunk:
            out.append((strip_tags(chunk).strip(), tag_ids(chunk)))
    return out


# --- values and fields ---------------------------------------------------------------------


def present(value: Any) -> bool:
    """True for a real value (not None/NaN/NaT/NA, not an empty string)."""
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, float):
        return value == value  # NaN is the only float unequal to itself
    if value is None or value is pd.NA or value is pd.NaT:
        return False
    if isinstance(value, int | pd.Timestamp):
        return True
    try:
        return not bool(pd.isna(value))
    except (TypeError, ValueError):
        return True


def fmt_number(value: float) -> str:
    """Plain decimal text for a float (``133.0`` -> ``133``, ``0.01`` -> ``0.01``)."""
    return np.format_float_positional(float(value), trim="-")


@lru_cache(maxsize=1 << 16)
def _iso_date(ts: pd.Timestamp) -> str:
    return f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d}"


def fmt_date(value: Any) -> str:
    """ISO calendar date of a timestamp (``2150-03-02``)."""
    return _iso_date(value if isinstance(value, pd.Timestamp) else pd.Timestamp(value))


def required_fields(event: Mapping[str, Any]) -> dict[str, str]:
    """Fields of ``event`` that must appear verbatim in the turn citing it.

    Args:
        event: one events-table row (mapping with the events columns).

    Returns:
        ``{field name: verbatim string}``; absent optional fields (route, discharge location)
        are left out.
    """
    kind = event.get("kind")
    out: dict[str, str] = {}
    if present(event.get("time")):
        out["date"] = fmt_date(event["time"])
    if kind == "lab":
        out |= {"label": event.get("label"), "value": event.get("value_text")}
        out["unit"] = event.get("unit")
    elif kind == "medication":
        out["drug"] = event.get("label")
        # Without a dose the turn names the drug only (no unit either); no_untraced_numbers
        # then refuses any number, so a dose can never be invented.
        if present(event.get("value_text")):
            out |= {"dose": event.get("value_text"), "unit": event.get("unit")}
        if present(event.get("route")):
            out["route"] = event["route"]
    elif kind in ("diagnosis", "procedure"):
        out |= {"code": event.get("code"), "title": event.get("label")}
    elif kind == "admission":
        out["admission_type"] = event.get("code")
    elif kind == "discharge" and present(event.get("code")):
        out["discharge_location"] = event["code"]
    return {k: str(v).strip() for k, v in out.items() if present(v)}


def traceable_strings(
    event: Mapping[str, Any], required: Mapping[str, str] | None = None
) -> set[str]:
    """Strings a turn that cites ``event`` may contain: its required fields (``required`` if
    already computed), reference-range bounds and end date (numbers inside them trace to the
    event)."""
    out = set((required if required is not None else required_fields(event)).values())
    for col in ("ref_low", "ref_high"):
        if present(event.get(col)):
            out.add(fmt_number(event[col]))
    if present(event.get("end_time")):
        out.add(fmt_date(event["end_time"]))
    return out


def _boundary_ok(text: str, start: int, end: int, needle: str) -> bool:
    # A match must not continue a longer word or number on either side ("3" is not found in
    # "13" nor in the decimals of "1.3"; "1.3" is not found in "1.35").
    if needle[0].isalnum() and start > 0:
        prev = text[start - 1]
        if prev.isalnum():
            return False
        if needle[0].isdigit() and prev in ".," and start > 1 and text[start - 2].isdigit():
            return False
    if needle[-1].isalnum() and end < len(text):
        nxt = text[end]
        if nxt.isalnum():
            return False
        if needle[-1].isdigit() and nxt in ".," and end + 1 < len(text):
            if text[end + 1].isdigit():
                return False
    return True


def _spans(hay: str, pin: str) -> list[tuple[int, int]]:
    spans, i = [], hay.find(pin)
    if i == -1:
        return spans
    n, left, right = len(pin), pin[0].isalnum(), pin[-1].isalnum()
    while i != -1:
        j = i + n
        # Fast path: the match is delimited by non-alphanumerics on both sides.
        if (not left or i == 0 or not hay[i - 1].isalnum() and hay[i - 1] not in ".,") and (
            not right or j == len(hay) or not hay[j].isalnum() and hay[j] not in ".,"
        ):
            spans.append((i, j))
        elif _boundary_ok(hay, i, j, pin):
            spans.append((i, j))
        i = hay.find(pin, i + 1)
    return spans


def find_spans(text: str, needle: str, ignore_case: bool = False) -> list[tuple[int, int]]:
    """Boundary-aware occurrences of ``needle`` in ``text`` as (start, end) spans."""
    if not needle:
        return []
    if ignore_case:
        return _spans(text.lower(), needle.lower())
    return _spans(text, needle)


def contains_verbatim(text: str, needle: str) -> bool:
    """True if ``needle`` occurs in ``text`` exactly (case-sensitive, boundary-aware)."""
    if not needle:
        return False
    i = text.find(needle)
    while i != -1:
        if _boundary_ok(text, i, i + len(needle), needle):
            return True
        i = text.find(needle, i + 1)
    return False


def _mask(text: str, allowed: Iterable[str]) -> str:
    """Blank out (case-insensitively) every boundary-aware occurrence of the allowed strings,
    so what is left is text the cited events do not explain. Every occurrence of an allowed
    string is legitimate, so spans are found on the unmasked text and merged."""
    low = text.lower()
    chars: list[str] | None = None
    for s in allowed:
        if not s:
            continue
        for i, j in _spans(low, s.lower()):
            if chars is None:
                chars = list(text)
            chars[i:j] = " " * (j - i)
    return text if chars is None else "".join(chars)


class DrugMatcher:
    """Finds known drug names (word-bounded, case-insensitive) in text.

    Args:
        names: drug names; names shorter than four characters or without a letter are
            ignored (they collide with ordinary words).
    """

    _WORD = re.compile(r"[a-z0-9]+")

    def __init__(self, names: Iterable[str]):
        by_word: dict[str, set[tuple[str, int]]] = {}
        for name in names:
            n = " ".join(str(name).lower().split())
            first = self._WORD.search(n)
            if len(n) >= 4 and any(c.isalpha() for c in n) and first:
                by_word.setdefault(first.group(0), set()).add((n, first.start()))
        # Longest first, so "potassium chloride" wins over a lexicon entry "potassium".
        self._by_word = {
            k: sorted(v, key=lambda x: len(x[0]), reverse=True) for k, v in by_word.items()
        }
        # One compiled pass finds the candidate first words; Python only checks those.
        words = sorted(self._by_word, key=len, reverse=True)
        self._first = (
            re.compile(r"(?<![a-z0-9])(?:" + "|".join(map(re.escape, words)) + r")(?![a-z0-9])")
            if words
            else None
        )

    def find(self, text: str) -> list[str]:
        """Drug names occurring in ``text`` (lower case, in order of appearance)."""
        if self._first is None:
            return []
        low = text.lower()
        if "  " in low or "\n" in low or "\t" in low:
            low = " ".join(low.split())
        found = []
        for m in self._first.finditer(low):
            for name, offset in self._by_word[m.group(0)]:
                start = m.start() - offset
                if start >= 0 and low.startswith(name, start):
                    if _boundary_ok(low, start, start + len(name), name):
                        found.append(name)
                        break
        return found


# One pass classifies what is left after masking: a date, else an ICD-like code, else a number.
_TOKEN_RE = re.compile(
    "(?P<dates>" + DATE_RE.pattern + ")|(?P<codes>" + CODE_RE.pattern + ")|(?P<numbers>"
    + NUMBER_RE.pattern + ")"
)  # fmt: skip


def untraced_tokens(text: str, allowed: Iterable[str], drugs: DrugMatcher) -> dict[str, list[str]]:
    """Dates, ICD-like codes, numbers and drug names in ``text`` not explained by ``allowed``.

    Args:
        text: plain turn text.
        allowed: traceable strings of the events the turn cites.
        drugs: known drug names.

    Returns:
        ``{"dates": [...], "codes": [...], "numbers": [...], "drugs": [...]}``.
    """
    out: dict[str, list[str]] = {"dates": [], "codes": [], "numbers": [], "drugs": []}
    has_digit = _DIGIT_RE.search(text) is not None
    if not has_digit and not drugs.find(text):
        return out
    rest = _mask(text, allowed)
    if has_digit:
        for m in _TOKEN_RE.finditer(rest):
            out[m.lastgroup].append(m.group(0))
    out["drugs"] = drugs.find(rest)
    return out


def records(df: pd.DataFrame | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows as dicts, fast (column ``tolist`` instead of ``DataFrame.to_dict``, which is slow
    on Arrow-backed string columns)."""
    if not isinstance(df, pd.DataFrame):
        return [dict(r) for r in df]
    cols = list(df.columns)
    lists = []
    for c in cols:
        vals = df[c].tolist()
        if isinstance(df[c].dtype, pd.api.extensions.ExtensionDtype):
            # pd.NA refuses bool(); plain None keeps comparisons and `present` simple.
            vals = [None if v is pd.NA else v for v in vals]
        lists.append(vals)
    return [dict(zip(cols, vals, strict=True)) for vals in zip(*lists, strict=True)]


class EventIndex:
    """A patient's events by id, with their required and traceable strings memoised.

    Args:
        events: event records, or an existing ``{event_id: record}`` mapping.
    """

    def __init__(self, events: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]]):
        if isinstance(events, Mapping):
            self.by_id = dict(events)
        else:
            self.by_id = {str(e["event_id"]): e for e in events}
        self._req: dict[str, dict[str, str]] = {}
        self._trace: dict[str, set[str]] = {}
        self._maskable: dict[str, set[str]] = {}

    def __contains__(self, eid: object) -> bool:
        return eid in self.by_id

    def get(self, eid: str) -> Mapping[str, Any] | None:
        """The event record, or None."""
        return self.by_id.get(eid)

    def required(self, eid: str) -> dict[str, str]:
        """:func:`required_fields` of an event (memoised)."""
        if eid not in self._req:
            self._req[eid] = required_fields(self.by_id[eid])
        return self._req[eid]

    def traceable(self, eid: str) -> set[str]:
        """:func:`traceable_strings` of an event (memoised)."""
        if eid not in self._trace:
            self._trace[eid] = traceable_strings(self.by_id[eid], self.required(eid))
        return self._trace[eid]

    def maskable(self, eid: str, drugs: DrugMatcher) -> set[str]:
        """The traceable strings that can hide a finding of :func:`untraced_tokens`: those
        with a digit or a known drug name (memoised; labels and units without either
        cannot, so masking them is wasted work)."""
        if eid not in self._maskable:
            self._maskable[eid] = {
                s for s in self.traceable(eid) if _DIGIT_RE.search(s) or drugs.find(s)
            }
        return self._maskable[eid]


def group_records(df: pd.DataFrame, key: str = "subject_id") -> dict[int, list[dict[str, Any]]]:
    """:func:`records` grouped by an integer key column, in first-appearance order."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r in records(df):
        out.setdefault(int(r[key]), []).append(r)
    return out


def _index(events: EventIndex | Mapping[str, Mapping[str, Any]]) -> EventIndex:
    return events if isinstance(events, EventIndex) else EventIndex(events)


PANEL_LABELS: tuple[str, ...] = tuple(sorted((lab.label for lab in LAB_PANEL), key=len)[::-1])


def labels_mentioned(text: str) -> set[str]:
    """Panel lab labels named in ``text`` (longest first, so "% Hemoglobin A1c" does not also
    count as "Hemoglobin"); case-insensitive."""
    chars, found = list(text), set()
    for label in PANEL_LABELS:
        for i, j in find_spans("".join(chars), label, ignore_case=True):
            found.add(label)
            chars[i:j] = " " * (j - i)
    return found


# --- the checks ----------------------------------------------------------------------------


def _row(sid: int, check: str, passed: bool, detail: str = "") -> dict[str, Any]:
    severity = "hard" if check in HARD_CHECKS else "soft"
    return dict(subject_id=int(sid), check=check, severity=severity, passed=bool(passed),
                detail=detail)  # fmt: skip


def _detail(problems: list[str], ok: str = "") -> str:
    if not problems:
        return ok
    more = len(problems) - MAX_DETAIL_ITEMS
    head = "; ".join(problems[:MAX_DETAIL_ITEMS])
    return f"{head}; and {more} more" if more > 0 else head


def lab_day_bounds(events: Iterable[Mapping[str, Any]]) -> dict[int, tuple[str, str]]:
    """First and last calendar day (``YYYY-MM-DD``) with a lab result in each visit.

    Args:
        events: event records (visit_idx, time, kind).

    Returns:
        ``{visit_idx: (first_day, last_day)}``.
    """
    days: dict[int, list[str]] = {}
    for e in events:
        if e.get("kind") == "lab" and present(e.get("visit_idx")) and present(e.get("time")):
            days.setdefault(int(e["visit_idx"]), []).append(fmt_date(e["time"]))
    return {v: (min(d), max(d)) for v, d in days.items()}


def key_lab_missable(e: Mapping[str, Any], bounds: Mapping[int, tuple[str, str]]) -> bool:
    """Whether a key lab may be left unstated: only a normal result (not flagged, inside its
    reference range) on a middle day of its visit — neither the visit's first nor its last lab
    day. Admission and discharge labs and every abnormal key result are always told, as a
    clinician's visit summary would (this keeps dialogue length near the paper's).
    """
    if e.get("flag") == "abnormal" or not present(e.get("visit_idx")):
        return False
    val, lo, hi = e.get("value"), e.get("ref_low"), e.get("ref_high")
    if present(val) and (
        (present(lo) and float(val) < float(lo)) or (present(hi) and float(val) > float(hi))
    ):
        return False
    first, last = bounds.get(int(e["visit_idx"]), ("", ""))
    return fmt_date(e["time"]) not in (first, last)


def visit_starts(events: Iterable[Mapping[str, Any]]) -> dict[int, pd.Timestamp]:
    """Start of each visit: its admission time, else its earliest event time.

    Args:
        events: event records (visit_idx, time, kind).

    Returns:
        ``{visit_idx: start timestamp}``.
    """
    starts: dict[int, pd.Timestamp] = {}
    adm: dict[int, pd.Timestamp] = {}
    for e in events:
        v, t = e.get("visit_idx"), e.get("time")
        if not (present(v) and present(t)):
            continue
        v, t = int(v), t if isinstance(t, pd.Timestamp) else pd.Timestamp(t)
        if e.get("kind") == "admission" and (v not in adm or t < adm[v]):
            adm[v] = t
        if v not in starts or t < starts[v]:
            starts[v] = t
    return starts | adm


def check_turns(
    turns: list[dict[str, Any]],
    events_by_id: EventIndex | Mapping[str, Mapping[str, Any]],
    drugs: DrugMatcher,
) -> dict[str, list[str]]:
    """Per-turn HARD checks shared by the verifier and the rewriter's acceptance test.

    Args:
        turns: turn records (turn_idx, text, text_tagged, event_ids).
        events_by_id: the patient's events keyed by event_id (or an :class:`EventIndex`).
        drugs: known drug names.

    Returns:
        ``{check name: [problem, ...]}`` for tags_consistent and the four no_untraced checks.
    """
    index = _index(events_by_id)
    problems: dict[str, list[str]] = {
        "tags_consistent": [],
        "no_untraced_numbers": [],
        "no_untraced_dates": [],
        "no_untraced_codes": [],
        "no_untraced_drugs": [],
    }
    for t in turns:
        tid, text, tagged = t["turn_idx"], str(t["text"]), str(t["text_tagged"])
        ids = list(t["event_ids"])
        if strip_tags(tagged) != text:
            problems["tags_consistent"].append(f"turn {tid}: text differs from untagged text")
        if _ANY_TAG_RE.search(text):
            problems["tags_consistent"].append(f"turn {tid}: plain text contains a tag")
        if set(tag_ids(tagged)) != set(ids):
            problems["tags_consistent"].append(f"turn {tid}: tags do not match event_ids")
        allowed: set[str] = set()
        for eid in ids:
            if eid in index:
                allowed |= index.maskable(eid, drugs)
        found = untraced_tokens(text, allowed, drugs)
        for key, check in (
            ("numbers", "no_untraced_numbers"),
            ("dates", "no_untraced_dates"),
            ("codes", "no_untraced_codes"),
            ("drugs", "no_untraced_drugs"),
        ):
            for tok in found[key]:
                problems[check].append(f"turn {tid}: {key[:-1]} {tok!r} traces to no cited event")
    return problems


def check_covered(
    turns: list[dict[str, Any]],
    events_by_id: EventIndex | Mapping[str, Mapping[str, Any]],
    covered: Mapping[str, Any],
) -> list[str]:
    """``covered_fields_verbatim``: every required field of each covered event is in the turn
    that the coverage row names, and that turn lists the event id.

    Args:
        turns: turn records.
        events_by_id: the patient's events keyed by event_id.
        covered: ``{event_id: turn_idx}`` for the covered events.

    Returns:
        Problems, empty when the check passes.
    """
    index = _index(events_by_id)
    by_idx = {int(t["turn_idx"]): t for t in turns}
    problems = []
    for eid, tidx in covered.items():
        event = index.get(eid)
        if event is None:
            problems.append(f"{eid}: covered but not a source event")
            continue
        turn = by_idx.get(int(tidx)) if present(tidx) else None
        if turn is None:
            problems.append(f"{eid}: covered but names no existing turn")
            continue
        if eid not in list(turn["event_ids"]):
            problems.append(f"{eid}: turn {turn['turn_idx']} does not list it")
            continue
        for field, value in index.required(eid).items():
            if not contains_verbatim(str(turn["text"]), value):
                problems.append(f"{eid}: {field} {value!r} not in turn {turn['turn_idx']}")
    return problems


def check_missed(
    turns: list[dict[str, Any]],
    events_by_id: EventIndex | Mapping[str, Mapping[str, Any]],
    missed: Iterable[str],
) -> list[str]:
    """``missed_events_unstated``: a missed event is not cited; a missed lab's label is not
    named in a turn that also gives its date; a missed drug is not named in its visit.
    Strings explained by a cited non-lab event (a title, another drug's name) are ignored.

    Args:
        turns: turn records (turn_idx, visit_idx, text_tagged, event_ids).
        events_by_id: the patient's events keyed by event_id.
        missed: ids of the missed events.

    Returns:
        Problems, empty when the check passes.
    """
    index = _index(events_by_id)
    missed = [m for m in missed if m in index]
    if not missed:
        return []
    problems = []
    cited = {eid for t in turns for eid in t["event_ids"]}
    # Mask what cited non-lab events explain (a title that contains a lab word, a drug whose
    # name contains another drug's) before looking for a missed fact. Turns are indexed by
    # the dates they mention and by visit, so the check stays linear in dialogue length.
    views: list[tuple[dict[str, Any], str]] = []
    by_date: dict[str, list[int]] = {}
    by_visit: dict[int, list[int]] = {}
    for t in turns:
        allowed: set[str] = set()
        for eid in t["event_ids"]:
            ev = index.get(eid)
            if ev is not None and ev.get("kind") != "lab":
                allowed |= index.traceable(eid)
        plain = _mask(strip_tags(str(t["text_tagged"])), allowed)
        k = len(views)
        views.append((t, plain))
        for d in set(DATE_RE.findall(plain)):
            by_date.setdefault(d, []).append(k)
        by_visit.setdefault(int(t["visit_idx"]), []).append(k)
    labels_cache: dict[int, set[str]] = {}
    for eid in missed:
        ev = index.by_id[eid]
        if eid in cited:
            problems.append(f"{eid}: missed but cited by a turn")
            continue
        if ev.get("kind") == "lab" and present(ev.get("time")) and present(ev.get("label")):
            date, label = fmt_date(ev["time"]), str(ev["label"])
            for k in by_date.get(date, []):
                if k not in labels_cache:
                    labels_cache[k] = labels_mentioned(views[k][1])
                if label in labels_cache[k]:
                    problems.append(f"{eid}: {label} on {date} stated in turn "
                                    f"{views[k][0]['turn_idx']}")  # fmt: skip
                    break
        elif ev.get("kind") in ("diagnosis", "procedure") and present(ev.get("code")):
            code = str(ev["code"]).strip()
            for k in by_visit.get(int(ev["visit_idx"]), []):
                if find_spans(views[k][1], code):
                    problems.append(f"{eid}: code {code} named in turn {views[k][0]['turn_idx']}")
                    break
        elif ev.get("kind") == "medication" and present(ev.get("label")):
            drug = str(ev["label"])
            for k in by_visit.get(int(ev["visit_idx"]), []):
                if find_spans(views[k][1], drug, True):
                    problems.append(f"{eid}: {drug} named in turn {views[k][0]['turn_idx']}")
                    break
    return problems


def chars_per_visit(turns: Sequence[Mapping[str, Any]]) -> float:
    """Mean characters of turn text per visit (0 without turns)."""
    visits = {t["visit_idx"] for t in turns}
    return sum(len(str(t["text"])) for t in turns) / len(visits) if visits else 0.0


def length_row(
    subject_id: int, turns: Sequence[Mapping[str, Any]], bounds: tuple[float, float]
) -> dict[str, Any]:
    """The ``length_outlier`` SOFT row: mean characters per visit inside ``bounds``."""
    per_visit = chars_per_visit(turns)
    lo, hi = bounds
    return _row(subject_id, "length_outlier", lo <= per_visit <= hi,
                f"{per_visit:.0f} chars/visit, bounds {lo:.0f}-{hi:.0f}")  # fmt: skip


def _soft_checks(sid: int, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    bad = []
    prev: dict[str, Any] | None = None
    for t in sorted(turns, key=lambda r: int(r["turn_idx"])):
        new_visit = prev is None or int(prev["visit_idx"]) != int(t["visit_idx"])
        if new_visit and t["speaker"] != "patient":
            bad.append(f"visit {t['visit_idx']} opens with {t['speaker']}")
        elif not new_visit and prev is not None and prev["speaker"] == t["speaker"]:
            bad.append(f"turns {prev['turn_idx']}-{t['turn_idx']} both {t['speaker']}")
        prev = t
    rows.append(_row(sid, "turn_alternation", not bad, _detail(bad)))
    sentences = [
        " ".join(s.lower().split())
        for t in turns
        for s, _ in tagged_sentences(str(t["text_tagged"]))
        if len(s.split()) >= REPEAT_MIN_WORDS
    ]
    counts = Counter(sentences)
    total = max(len(sentences), 1)
    worst = counts.most_common(1)
    msg = ""
    ok = True
    if worst:
        sent, n = worst[0]
        share = n / total
        ok = not (n >= REPEAT_MIN_COUNT and share > REPEAT_MAX_SHARE)
        msg = f"most repeated: {n}x of {total} ({share:.0%}): {sent[:60]!r}"
    rows.append(_row(sid, "repeated_sentences", ok, msg))
    return rows


def verify_records(
    subject_id: int,
    turns: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    coverage: Sequence[Mapping[str, Any]],
    *,
    drugs: DrugMatcher | None = None,
    length_bounds: tuple[float, float] | None = None,
    rewrites: Sequence[Mapping[str, Any]] | None = None,
    include_length: bool = True,
) -> list[dict[str, Any]]:
    """Run every check on one patient's records (the fast path :func:`verify_corpus` uses).

    Args:
        subject_id: the patient.
        turns: turn records (turn_idx, visit_idx, speaker, text, text_tagged, event_ids and,
            optionally, visit_date).
        events: the patient's source events (events-table rows).
        coverage: coverage records (event_id, status, turn_idx).
        drugs: known drug names (default: :data:`DRUG_LEXICON` + the patient's drugs).
        length_bounds: accepted characters per visit (default :data:`DEFAULT_CHARS_PER_VISIT`).
        rewrites: rewriter log records (visit_idx, accepted, reason); adds ``rewrite_preserved``.
        include_length: add the ``length_outlier`` row (off when the corpus fences are not
            known yet; :func:`length_row` adds it later).

    Returns:
        Check rows (subject_id, check, severity, passed, detail), HARD checks first.
    """
    sid = int(subject_id)
    turns = sorted(turns, key=lambda r: int(r["turn_idx"]))
    events = list(events)
    index = EventIndex(events)
    events_by_id = index.by_id
    if drugs is None:
        meds = [e.get("label") for e in events if e.get("kind") == "medication"]
        drugs = DrugMatcher([*DRUG_LEXICON, *(m for m in meds if present(m))])
    status = {str(c["event_id"]): c for c in coverage}
    covered = {eid: c.get("turn_idx") for eid, c in status.items() if c["status"] == "covered"}
    missed = [eid for eid, c in status.items() if c["status"] == "missed"]
    rows: list[dict[str, Any]] = []

    # event_ids_exist
    bad = []
    for t in turns:
        for eid in list(t["event_ids"]) + tag_ids(str(t["text_tagged"])):
            if eid not in events_by_id:
                bad.append(f"turn {t['turn_idx']}: {eid} is not a source event")
            elif status.get(eid, {}).get("status") == "unusable":
                bad.append(f"turn {t['turn_idx']}: {eid} is unusable ({status[eid]['reason']})")
    rows.append(_row(sid, "event_ids_exist", not bad, _detail(sorted(set(bad)))))

    per_turn = check_turns(turns, index, drugs)
    rows.append(_row(sid, "tags_consistent", not per_turn["tags_consistent"],
                     _detail(per_turn["tags_consistent"])))  # fmt: skip

    bad = check_covered(turns, index, covered)
    rows.append(_row(sid, "covered_fields_verbatim", not bad,
                     _detail(bad, f"{len(covered)} covered events verified")))  # fmt: skip
    for check in ("no_untraced_numbers", "no_untraced_dates", "no_untraced_codes",
                  "no_untraced_drugs"):  # fmt: skip
        rows.append(_row(sid, check, not per_turn[check], _detail(per_turn[check])))

    # visits_in_time_order
    bad = []
    idxs = [int(t["turn_idx"]) for t in turns]
    if idxs != list(range(len(idxs))):
        bad.append("turn_idx is not 0..n-1 in order")
    seq = [int(t["visit_idx"]) for t in turns]
    if any(b < a for a, b in zip(seq, seq[1:], strict=False)):
        bad.append("visit_idx decreases along the dialogue")
    starts = visit_starts(events)
    order = sorted(starts)
    for a, b in zip(order, order[1:], strict=False):
        if not starts[a] < starts[b]:
            bad.append(f"visit {b} ({fmt_date(starts[b])}) does not follow visit {a} "
                       f"({fmt_date(starts[a])})")  # fmt: skip
    for t in turns:
        vd = t.get("visit_date")
        v = int(t["visit_idx"])
        if present(vd) and v in starts and str(vd) != fmt_date(starts[v]):
            bad.append(f"turn {t['turn_idx']}: visit_date {vd} != visit start")
            break
    turn_visit = {int(t["turn_idx"]): int(t["visit_idx"]) for t in turns}
    for eid, tidx in covered.items():
        ev = events_by_id.get(eid)
        if ev is None or not present(tidx) or int(tidx) not in turn_visit:
            continue
        if present(ev.get("visit_idx")) and int(ev["visit_idx"]) != turn_visit[int(tidx)]:
            bad.append(f"{eid} (visit {ev['visit_idx']}) told in visit {turn_visit[int(tidx)]}")
    rows.append(_row(sid, "visits_in_time_order", not bad, _detail(bad)))

    # must_cover_coverage
    bad = []
    bounds = lab_day_bounds(events_by_id.values())
    for eid in events_by_id:
        if eid not in status:
            bad.append(f"{eid} has no coverage row")
    for eid in missed:
        ev = events_by_id.get(eid, {})
        kind = ev.get("kind")
        if str(status[eid].get("reason") or "").startswith(BUDGET_REASON):
            if kind not in BUDGET_MISSABLE_KINDS:
                bad.append(f"{eid}: a {kind} may not be left out for length")
        elif kind not in MISSABLE_KINDS:
            bad.append(f"{eid}: a {kind} may not be missed")
        elif (
            kind == "lab"
            and str(ev.get("label")) in _KEY_LAB_LABELS
            and not key_lab_missable(ev, bounds)
        ):
            bad.append(f"{eid}: key lab {ev.get('label')} may not be missed on that day")
    told_dx = {v for v, n in _visit_diagnoses(events_by_id, status, "covered").items() if n}
    for v in sorted(set(_visit_diagnoses(events_by_id, status, "")) - told_dx):
        bad.append(f"visit {v}: none of its diagnoses is told")
    must = [eid for eid, c in status.items() if c["status"] != "missed"]
    n_cov = sum(1 for eid in must if status[eid]["status"] == "covered")
    ratio = n_cov / len(must) if must else 1.0
    if ratio < MIN_COVERAGE:
        unusable = [f"{eid} ({status[eid]['reason']})" for eid in must
                    if status[eid]["status"] == "unusable"]  # fmt: skip
        bad.insert(0, f"coverage {n_cov}/{len(must)} = {ratio:.1%} < {MIN_COVERAGE:.0%}; "
                      f"unusable: {_detail(unusable)}")  # fmt: skip
    rows.append(_row(sid, "must_cover_coverage", not bad,
                     _detail(bad, f"{n_cov}/{len(must)} must-cover events covered")))  # fmt: skip

    bad = check_missed(turns, index, missed)
    rows.append(_row(sid, "missed_events_unstated", not bad,
                     _detail(bad, f"{len(missed)} missed events unstated")))  # fmt: skip

    if include_length:
        rows.append(length_row(sid, turns, length_bounds or DEFAULT_CHARS_PER_VISIT))
    rows += _soft_checks(sid, turns)
    if rewrites:
        fell = [f"visit {r['visit_idx']}: {r['reason']}" for r in rewrites if not r["accepted"]]
        rows.append(_row(sid, REWRITE_CHECK, not fell,
                         _detail(fell, f"{len(rewrites)} visits rewritten")))  # fmt: skip
    return rows


def _visit_diagnoses(
    events_by_id: Mapping[str, Mapping[str, Any]],
    status: Mapping[str, Mapping[str, Any]],
    want: str,
) -> dict[int, int]:
    """Usable diagnoses per visit with status ``want`` (every usable one for "")."""
    out: dict[int, int] = {}
    for eid, ev in events_by_id.items():
        st = status.get(eid, {}).get("status")
        if (
            ev.get("kind") != "diagnosis"
            or st in (None, "unusable")
            or not present(ev.get("visit_idx"))
        ):
            continue
        v = int(ev["visit_idx"])
        out[v] = out.get(v, 0) + (1 if not want or st == want else 0)
    return out


_KEY_LAB_LABELS = frozenset(lab.label for lab in LAB_PANEL if lab.key in KEY_LABS)


def checks_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Check rows as a ``dialogue_checks`` frame with the artifact dtypes."""
    df = pd.DataFrame(rows, columns=list(CHECK_COLUMNS))
    return df.astype(CHECK_COLUMNS)


def verify_dialogue(
    turns: pd.DataFrame,
    events: pd.DataFrame,
    coverage: pd.DataFrame,
    *,
    rewrites: pd.DataFrame | None = None,
    known_drugs: Iterable[str] | None = None,
    length_bounds: tuple[float, float] | None = None,
) -> pd.DataFrame:
    """Verify one patient's dialogue against its source events.

    Args:
        turns: the patient's turns (dialogues.parquet columns).
        events: the patient's events (events.parquet columns).
        coverage: the patient's event coverage (event_id, status, reason, turn_idx).
        rewrites: optional rewriter log (visit_idx, accepted, reason).
        known_drugs: drug names for the hallucination check (default: lexicon + own drugs).
        length_bounds: accepted characters per visit.

    Returns:
        dialogue_checks rows for the patient (10 HARD + 3 SOFT, + rewrite_preserved).
    """
    sids = set(events["subject_id"].astype("int64")) | set(turns["subject_id"].astype("int64"))
    if len(sids) != 1:
        raise ValueError(f"verify_dialogue expects one patient, got subject_ids {sorted(sids)}")
    drugs = DrugMatcher(known_drugs) if known_drugs is not None else None
    rows = verify_records(
        sids.pop(),
        records(turns),
        records(events),
        records(coverage),
        drugs=drugs,
        length_bounds=length_bounds,
        rewrites=records(rewrites) if rewrites is not None else None,
    )
    return checks_frame(rows)


def length_bounds_from(values: Iterable[float]) -> tuple[float, float]:
    """Tukey fences (k = 3) on log10 characters per visit; the default below 20 dialogues."""
    x = np.log10(np.array([c for c in values if c > 0], dtype=float))
    if len(x) < 20:
        return DEFAULT_CHARS_PER_VISIT
    q1, q3 = np.percentile(x, [25, 75])
    iqr = q3 - q1
    return float(10 ** (q1 - TUKEY_K * iqr)), float(10 ** (q3 + TUKEY_K * iqr))


def verify_groups(
    turns: Mapping[int, list[dict[str, Any]]],
    events: Mapping[int, list[dict[str, Any]]],
    coverage: Mapping[int, list[dict[str, Any]]],
    rewrites: Mapping[int, list[dict[str, Any]]] | None = None,
    drugs: DrugMatcher | None = None,
) -> list[dict[str, Any]]:
    """Verify every patient of ``coverage`` from per-patient record lists (the fast path).

    Args:
        turns / events / coverage / rewrites: ``{subject_id: [record, ...]}``.
        drugs: known drug names (default: :data:`DRUG_LEXICON` + every medication label).

    Returns:
        Check rows for all patients; the length fences come from the whole corpus.
    """
    if drugs is None:
        meds = {e.get("label") for evs in events.values() for e in evs
                if e.get("kind") == "medication" and present(e.get("label"))}  # fmt: skip
        drugs = DrugMatcher([*DRUG_LEXICON, *meds])
    bounds = length_bounds_from(chars_per_visit(tr) for tr in turns.values() if tr)
    rows: list[dict[str, Any]] = []
    for sid in sorted(coverage):
        rows += verify_records(
            sid,
            turns.get(sid, []),
            events.get(sid, []),
            coverage[sid],
            drugs=drugs,
            length_bounds=bounds,
            rewrites=(rewrites or {}).get(sid),
        )
    return rows


def verify_corpus(
    turns: pd.DataFrame,
    events: pd.DataFrame,
    coverage: pd.DataFrame,
    *,
    rewrites: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Verify every patient's dialogue; length fences come from the whole corpus.

    Args:
        turns: all turns (kept and not yet decided), dialogues.parquet columns.
        events: the events of every patient in ``coverage``.
        coverage: event_coverage rows of every patient.
        rewrites: optional rewriter log with subject_id.

    Returns:
        dialogue_checks rows, one per (patient, check).
    """
    rw = group_records(rewrites) if rewrites is not None and len(rewrites) else None
    rows = verify_groups(group_records(turns), group_records(events), group_records(coverage), rw)
    return checks_frame(rows)


def decide(rows: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Keep/drop per patient from check rows: dropped iff any HARD check failed.

    Returns:
        ``{subject_id: {"kept", "drop_reason", "n_soft_warnings"}}``; the reason lists the
        failed HARD checks with their details ("" when kept).
    """
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        d = out.setdefault(int(r["subject_id"]), {"hard": [], "n_soft_warnings": 0})
        if not r["passed"]:
            if r["severity"] == "hard":
                d["hard"].append(f"{r['check']}: {r['detail']}")
            else:
                d["n_soft_warnings"] += 1
    return {
        sid: {"kept": not d["hard"], "drop_reason": " | ".join(d["hard"]),
              "n_soft_warnings": d["n_soft_warnings"]}
        for sid, d in out.items()
    }  # fmt: skip


def drop_decisions(checks: pd.DataFrame) -> pd.DataFrame:
    """Which patients are kept: a patient is dropped iff any HARD check failed.

    Returns:
        One row per patient: subject_id, kept, drop_reason (failed HARD checks with their
        details, "" when kept), n_soft_warnings.
    """
    dec = decide(records(checks))
    rows = [{"subject_id": sid, **d} for sid, d in sorted(dec.items())]
    df = pd.DataFrame(rows, columns=["subject_id", "kept", "drop_reason", "n_soft_warnings"])
    return df.astype({"subject_id": "int64", "kept": "bool", "drop_reason": "string",
                      "n_soft_warnings": "int64"})  # fmt: skip


def drop_report(checks: pd.DataFrame) -> pd.DataFrame:
    """Failures per check: check, severity, n_patients, n_failed, description."""
    desc = HARD_CHECKS | SOFT_CHECKS | {REWRITE_CHECK: "LLM rewrite kept every required field"}
    g = checks.groupby(["severity", "check"], sort=False)["passed"]
    out = g.agg(n_patients="size", n_failed=lambda s: int((~s).sum())).reset_index()
    out["description"] = out["check"].map(desc)
    order = {c: i for i, c in enumerate(desc)}
    out["_o"] = out["check"].map(order)
    out = out.sort_values(["_o"]).drop(columns="_o").reset_index(drop=True)
    return out[["check", "severity", "n_patients", "n_failed", "description"]]
