"""Provenance tags and boundary-aware matching for the dialogue verifier (paper §3 "Cohort";
Fig. 2 stage 3 "verifier v3.2"; docs/design.md "Layout").

The tag format: a fact-bearing sentence is followed by ``[LAB-123, LAB-124]`` in
``text_tagged``; ``text`` is the same turn without tags. Matching is boundary-aware ("1.3" is
not found inside "11.3"), and :func:`untraced_tokens` finds the dates, ICD-like codes, numbers
and drug names a turn's cited events do not explain.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from clinlib.data.vocab import EVENT_ID_PREFIX, LAB_PANEL, NOISE_ID_PREFIX, TRAP_STATEMENT_PREFIX

# Common inpatient drug names (generic, lower case). A drug from this list, or any medication
# label in the events, found in a turn that does not cite it is an untraced drug.
DRUG_LEXICON: tuple[str, ...] = (
    "acetaminophen",
    "albuterol",
    "allopurinol",
    "alprazolam",
    "amiodarone",
    "amlodipine",
    "amoxicillin",
    "apixaban",
    "aspirin",
    "atenolol",
    "atorvastatin",
    "azithromycin",
    "bisacodyl",
    "bumetanide",
    "calcitriol",
    "captopril",
    "carvedilol",
    "cefazolin",
    "ceftriaxone",
    "cephalexin",
    "ciprofloxacin",
    "clonidine",
    "clopidogrel",
    "dapagliflozin",
    "dexamethasone",
    "diazepam",
    "digoxin",
    "diltiazem",
    "docusate",
    "empagliflozin",
    "enalapril",
    "enoxaparin",
    "epoetin",
    "famotidine",
    "fentanyl",
    "furosemide",
    "gabapentin",
    "glargine",
    "glimepiride",
    "glipizide",
    "glyburide",
    "haloperidol",
    "heparin",
    "hydralazine",
    "hydrochlorothiazide",
    "hydromorphone",
    "ibuprofen",
    "insulin",
    "isosorbide",
    "ketorolac",
    "labetalol",
    "levetiracetam",
    "levofloxacin",
    "levothyroxine",
    "lisinopril",
    "lorazepam",
    "losartan",
    "magnesium sulfate",
    "meropenem",
    "metformin",
    "methylprednisolone",
    "metoclopramide",
    "metoprolol",
    "metronidazole",
    "midazolam",
    "morphine",
    "naloxone",
    "nifedipine",
    "nitroglycerin",
    "omeprazole",
    "ondansetron",
    "oxycodone",
    "pantoprazole",
    "piperacillin",
    "polyethylene glycol",
    "potassium chloride",
    "pravastatin",
    "prednisone",
    "propofol",
    "quetiapine",
    "ranolazine",
    "rivaroxaban",
    "rosuvastatin",
    "senna",
    "sevelamer",
    "simvastatin",
    "sitagliptin",
    "spironolactone",
    "tamsulosin",
    "ticagrelor",
    "torsemide",
    "tramadol",
    "trazodone",
    "valsartan",
    "vancomycin",
    "warfarin",
    "zolpidem",
)

# --- tags ----------------------------------------------------------------------------------

# Noise sessions' tags (clinlib.dialogue.noise) and injected statements' (the trap
# constraints of clinlib.tasks.traps) use the same format with their own prefixes.
_PREFIXES = sorted({*EVENT_ID_PREFIX.values(), NOISE_ID_PREFIX, *TRAP_STATEMENT_PREFIX.values()})
_ID = r"(?:" + "|".join(_PREFIXES) + r")-[A-Za-z0-9_.\-]+"
TAG_RE = re.compile(r" ?\[(" + _ID + r"(?:, " + _ID + r")*)\]")
ANY_TAG_RE = re.compile(r"\[\s*" + _ID)
# A sentence ends at . ! ? or after a tag, but never between a sentence and its own tag.
_SENTENCE_END_RE = re.compile(r"(?<=[.!?\]])\s+(?!\[" + _ID + r")(?=\S)")
DATE_RE = re.compile(r"(?<!\d)(?:\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4})(?!\d)")
CODE_RE = re.compile(r"\b(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z0-9]{3,7}(?:\.[A-Z0-9]{1,4})?\b")
NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")
DIGIT_RE = re.compile(r"\d")


def format_tag(event_ids: Sequence[str]) -> str:
    """The provenance tag written after a fact-bearing sentence, e.g. ``[LAB-1, LAB-2]``."""
    return "[" + ", ".join(event_ids) + "]"


def is_noise_id(event_id: object) -> bool:
    """True for a noise session's provenance tag (``NOISE-...``, clinlib.dialogue.noise)."""
    return str(event_id).startswith(NOISE_ID_PREFIX + "-")


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


# --- boundary-aware matching ---------------------------------------------------------------


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


def mask(text: str, allowed: Iterable[str]) -> str:
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
    "(?P<dates>"
    + DATE_RE.pattern
    + ")|(?P<codes>"
    + CODE_RE.pattern
    + ")|(?P<numbers>"
    + NUMBER_RE.pattern
    + ")"
)


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
    has_digit = DIGIT_RE.search(text) is not None
    if not has_digit and not drugs.find(text):
        return out
    rest = mask(text, allowed)
    if has_digit:
        for m in _TOKEN_RE.finditer(rest):
            out[m.lastgroup].append(m.group(0))
    out["drugs"] = drugs.find(rest)
    return out


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
