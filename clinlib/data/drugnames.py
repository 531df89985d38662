"""Drug-name normalisation: one canonical key per recorded ``prescriptions.drug`` string, for
matching and class lookup (paper §3 "Task suite": T7, T8 and T9 are grounded in documented
prescriptions, docs/real-data.md "prescriptions and emar").

Real MIMIC-IV drug names are pharmacy free text: qualifiers in parentheses ("HYDROmorphone
(Dilaudid)", "Insulin (Regular) for Hyperkalemia", "Albumin 25% (12.5g / 50mL)"), tall-man
lettering ("OxyCODONE", "glipiZIDE"), trailing and double spaces ("Sodium Chloride 0.9%  Flush"),
double dashes ("OxyCODONE--Acetaminophen (5mg-325mg)"), strengths in the name, and the same drug
spelled several ways. :func:`drug_key` maps all of these to one lower-case key by four rules,
applied in order:

1. a parenthesised or bracketed qualifier is dropped — brand names, release forms, strengths,
   care settings (an unclosed ``(`` drops to the end): they name no other drug, and a class
   phrase must not be found inside them;
2. ASCII lower case (tall-man lettering); only ``A-Z`` are folded, so the SQL recompute folds
   exactly the same letters (MIMIC-IV drug names are ASCII);
3. every run of characters other than ``a-z`` / ``0-9`` becomes one space (punctuation, ``--``,
   ``/``, ``%``, trailing and double spaces, any non-ASCII character) — so a key is words
   separated by single spaces;
4. strength tokens are dropped: a number with or without a unit glued on (``5mg``, ``325mg``,
   the ``0`` and ``9`` of "0.9%") and the unit words right after a number (``20 mEq``,
   ``5000 units``, ``25 mcg/hr``); a word starting with a letter stays (``d5w``, ``b12``).

Everything else is kept, in order ("insulin for hyperkalemia", "potassium chloride
replacement", "sodium chloride flush"): the key is a normalised *name*, not a generic-name
lookup. Classes are found in it by whole-word phrases (:func:`has_phrase`), the longest phrase
winning, never by raw substrings ("epoetin" is not found in "darbepoetin").
:func:`drug_words` (rules 2–3 only) keeps the qualifiers, for "does this text appear anywhere in
the record" checks. Display never uses either: questions show the recorded string with its surrounding whitespace
trimmed and inner double spaces collapsed (:func:`drug_display`), exactly as the dialogue states
it (the event label is collapsed the same way; clinlib.dialogue.verify requires it verbatim).

The L2 recomputation (clinlib.tasks.recompute) does not import this module: it computes the same
key in SQL (:data:`clinlib.tasks.recompute.DRUG_KEY_SQL`), and a test holds the two equal on a
list of real MIMIC-IV names.
"""

from __future__ import annotations

import re
from functools import lru_cache

STRENGTH_UNITS: tuple[str, ...] = (
    "mg",
    "mcg",
    "g",
    "gm",
    "kg",
    "ml",
    "l",
    "meq",
    "mmol",
    "unit",
    "units",
    "u",
    "iu",
    "hr",
    "h",
)
"""Unit words dropped after a number (rule 4), also when glued to it ("5mg")."""

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_QUALIFIER = re.compile(r"[(\[][^)\]]*(?:[)\]]|$)")
_NON_WORD = re.compile(r"[^a-z0-9]+")
_NUMBER = re.compile(rf"[0-9]+(?:{'|'.join(STRENGTH_UNITS)})?")
_UNITS = frozenset(STRENGTH_UNITS)
SPACES_PATTERN = r"[ \t\n\r\f\v]+"
"""A run of ASCII whitespace: one space in a displayed drug name (the SQL of
clinlib.data.events uses the same pattern)."""
_SPACES = re.compile(SPACES_PATTERN)


def drug_words(name: object) -> str:
    """Rules 2–3 of the module docstring: lower-case words of the whole recorded name,
    qualifiers included (``"HYDROmorphone (Dilaudid)"`` -> ``"hydromorphone dilaudid"``)."""
    return " ".join(_NON_WORD.sub(" ", str(name).translate(_ASCII_LOWER)).split())


@lru_cache(maxsize=65536)
def drug_key(name: object) -> str:
    """The canonical matching key of a recorded drug name (rules 1–4 of the module docstring).

    ``"Insulin (Regular) for Hyperkalemia"`` -> ``"insulin for hyperkalemia"``,
    ``"OxyCODONE--Acetaminophen (5mg-325mg)"`` -> ``"oxycodone acetaminophen"``,
    ``"Sodium Chloride 0.9%  Flush"`` -> ``"sodium chloride flush"``.
    """
    words = drug_words(_QUALIFIER.sub(" ", str(name))).split()
    out: list[str] = []
    after_number = False
    for w in words:
        if _NUMBER.fullmatch(w):
            after_number = True
        elif after_number and w in _UNITS:
            continue  # a unit word after a number (or after another such unit)
        else:
            after_number = False
            out.append(w)
    return " ".join(out)


def has_phrase(key: str, phrase: str) -> bool:
    """Whether ``phrase`` (a key) occurs in ``key`` as whole words."""
    return bool(phrase) and f" {phrase} " in f" {key} "


def drug_head(name: object) -> str:
    """First all-letter word of a drug name (``"Insulin (Regular) for Hyperkalemia"`` ->
    ``"insulin"``, ``"0.9% Sodium Chloride"`` -> ``"sodium"``, ``"Heparin Sodium"`` ->
    ``"heparin"``); "" when there is none. Orders sharing it count as the same drug where a
    question must not be ambiguous (T7 distractors, T9's unstated drug)."""
    return next((w for w in drug_words(name).split() if w.isalpha()), "")


def drug_display(name: object) -> str:
    """The recorded name as shown to a reader: surrounding whitespace trimmed and inner runs of
    whitespace collapsed to one space (qualifiers, case and punctuation kept), the form the
    dialogue states (the event label, clinlib.data.events)."""
    return _SPACES.sub(" ", str(name)).strip(" ")
