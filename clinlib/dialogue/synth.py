"""Source-verifiable dialogue synthesis and rendering (paper §3 "Cohort": "Each record is
transformed into a multi-visit patient–clinician dialogue, preserving structured fields (dates,
lab values, ICD / procedure codes, medications) inside narrative turns"; Fig. 2 stage 3;
Appendix C.1 corpus statistics).

Each cohort patient's events become one dialogue: visits in order, each visit a sequence of
alternating patient and clinician turns. The clinician states the facts with their structured
fields verbatim (dates, lab labels with values, units and reference ranges, ICD codes with
titles, drugs with dose, unit and route, procedure codes) and reacts to abnormal values; the
patient reports symptoms consistent with the visit's diagnoses and asks questions, never with a
number. Several templates per event kind are chosen by a hash of (seed, patient, visit, slot),
so the text varies but is reproducible. Each fact-bearing sentence carries its event ids, so
``text_tagged`` shows e.g. ``... was 1.3 mg/dL. [LAB-123]`` (tag format: clinlib.dialogue.verify).

Event status (``event_coverage.parquet``):

- ``unusable`` — the event cannot be stated faithfully: unknown kind, no time or visit, a lab
  outside the 18-lab panel or without value or unit, a medication without drug or with a dose
  but no dose unit (a medication without a dose is usable: it is told as started, drug and
  route only, never with a made-up dose), a diagnosis / procedure without code or title (unknown code), an admission without
  type, a duplicated event_id. It is left out and its reason recorded.
- ``missed`` — deliberately left unstated, the anchors of T9 abstention questions. The rule
  is deterministic and hash-based on (seed, event_id): with ``u = hash(seed, event_id)`` in
  [0, 1), a lab outside :data:`clinlib.dialogue.verify.KEY_LABS` measured on a calendar day other than
  its visit's first day (and the patient's only value of that lab on that day) is missed if
  ``u < P_MISS_LAB``; a background medication (a drug that treats none of the index diseases,
  see :data:`DISEASE_DRUGS`) is missed, together with every other order of the same drug in
  the same visit, if ``u < P_MISS_MED`` (u of the group's smallest event_id); a key lab is
  missed if ``u < P_MISS_KEY_LAB`` when :func:`clinlib.dialogue.verify.key_lab_missable` allows it (a
  normal result on a middle day of its visit: admission-day, last-day and abnormal key results
  are always told, as in a clinician's visit summary). If that leaves fewer than
  :data:`MIN_MISSED` anchors, the eligible anchors with the smallest u are added up to that
  floor. Admissions, discharges, diagnoses and procedures are never missed by this rule.
  Then the length budget (:mod:`clinlib.dialogue.budget`, fitted to the paper's Fig. 13): a record of
  n visits gets ``13,700 * (n / 10) ** (1/3)`` characters, split over visits by max-min
  fairness; a visit over its share tells its facts in priority order (admission, discharge and
  principal diagnosis always, and so are a condition's first diagnosis and the abnormal values
  that foreshadowed it; then procedures, index-disease diagnoses and abnormal values
  that foreshadow a later diagnosis or are a lab's first; key labs; disease drugs; other
  diagnoses; ...; background drugs and routine labs last) and drops the small talk when even its bare facts crowd it. What does not
  fit is ``missed`` with reason ``budget: over the visit's time budget (<tier>: <group>)`` and
  joins the T9 pool.
- ``covered`` — stated in the turn given by ``turn_idx``.

The clinician explains the first abnormal value of each lab and direction in a visit and notes
repeats briefly (at most :data:`MAX_REACTIONS` per lab day), which keeps dialogues compact.

The verifier (clinlib.dialogue.verify) then checks every dialogue; a patient failing any HARD check is
dropped and the reason reported (the paper keeps 385 of 400). Large corpora run in two
processes (:data:`PARALLEL_MIN_EVENTS`); the result does not depend on it.

LLM rewriting is an optional seam: a :class:`Rewriter` gets each visit's tagged draft and the
strings it must keep verbatim; a rewrite is accepted only if it passes the verifier's per-turn
checks, otherwise the visit keeps its template text and the fallback is recorded.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import multiprocessing as mp
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from clinlib.core.config import PROFILES, artifact_path, resolve_profile
from clinlib.core.guards import check_artifact, check_kept, group_reasons, stage_run
from clinlib.core.io import atomic_path, read_artifact
from clinlib.data.schema import ARTIFACTS
from clinlib.data.vocab import EVENT_ID_PREFIX, EVENT_KINDS, LAB_PANEL, PANEL_ITEMIDS
from clinlib.dialogue import budget as B
from clinlib.dialogue import verify as V

log = logging.getLogger(__name__)

# --- the missed-events rule ----------------------------------------------------------------

P_MISS_LAB = 0.8
P_MISS_KEY_LAB = 0.8
P_MISS_MED = 0.3
MIN_MISSED = 4

# Substrings (lower case) of drug names that treat an index disease (diabetes, hypertension,
# CKD, CAD) or its immediate complications; every other drug is "background".
DISEASE_DRUGS: tuple[str, ...] = (
    # diabetes
    "insulin", "glargine", "lispro", "aspart", "detemir", "degludec", "metformin", "glipizide", "glyburide", "glimepiride", "gliptin", "glitazone",
    "gliflozin", "glutide", "exenatide", "acarbose", "repaglinide", "nateglinide",
    # hypertension / heart failure
    "pril", "sartan", "dipine", "diltiazem", "verapamil", "olol", "labetalol", "thiazide",
    "chlorthalidone", "furosemide", "torsemide", "bumetanide", "spironolactone", "eplerenone",
    "hydralazine", "clonidine", "doxazosin", "terazosin", "prazosin", "minoxidil", "isosorbide",
    "sacubitril",
    # CKD
    "sevelamer", "calcium acetate", "lanthanum", "calcitriol", "paricalcitol", "cinacalcet",
    "epoetin", "darbepoetin", "sodium bicarbonate", "patiromer", "polystyrene",
    # CAD
    "aspirin", "clopidogrel", "prasugrel", "ticagrelor", "statin", "ezetimibe", "nitroglycerin",
    "heparin", "enoxaparin", "warfarin", "apixaban", "rivaroxaban", "ranolazine", "bivalirudin",
    "eptifibatide",
)  # fmt: skip

# --- templates (no digits anywhere: every number in a turn must come from an event) -------

OPENERS_FIRST = ("Hello, doctor.", "Hi.", "Good morning.", "Thanks for seeing me.", "Hello.")
OPENERS_LATER = ("Hello again.", "Hi, doctor, it's me again.", "Good to see you again.",
                 "Hello, doctor.", "Hi.")  # fmt: skip
SYMPTOM_LEADS = (
    "I came in because {s}.",
    "The main problem is that {s}.",
    "Lately {s}.",
    "Over the past few days {s}.",
    "I'm worried because {s}.",
    "Honestly, {s}.",
)
SYMPTOM_CODES: dict[str, tuple[str, ...]] = {
    "diabetes": ("249", "250", "E08", "E09", "E10", "E11", "E13"),
    "hypertension": ("401", "402", "403", "404", "405", "I10", "I11", "I12", "I13", "I15", "I16"),
    "ckd": ("585", "586", "N18", "N19"),
    "cad": ("410", "411", "412", "413", "414", "I20", "I21", "I22", "I23", "I24", "I25"),
    "heart_failure": ("428", "I50"),
    "arrhythmia": ("4273", "I48", "I49"),
    "aki": ("584", "N17"),
    "pneumonia": (
        "480",
        "481",
        "482",
        "483",
        "484",
        "485",
        "486",
        "J12",
        "J13",
        "J14",
        "J15",
        "J16",
        "J17",
        "J18",
    ),  # fmt: skip
    "copd": ("491", "492", "496", "J44"),
    "uti": ("5990", "N390"),
    "sepsis": ("038", "99591", "99592", "A40", "A41", "R652"),
    "anemia": ("280", "281", "285", "D50", "D62", "D63", "D64"),
    "gi_bleed": ("578", "K92"),
    "stroke": ("433", "434", "436", "I63", "I64"),
    "electrolytes": ("2765", "2766", "2767", "2768", "E87"),
    "obesity": ("278", "E66"),
    "depression": ("296", "311", "F32", "F33"),
    "back_pain": ("724", "M54"),
}
SYMPTOMS: dict[str, tuple[str, ...]] = {
    "diabetes": ("I've been thirsty all the time", "I keep getting up at night to pass water",
                 "my feet have been tingling", "my vision has been blurry"),
    "hypertension": ("I've had pounding headaches", "I feel dizzy when I stand up quickly",
                     "I can feel my heart pounding in my ears"),
    "ckd": ("I've been tired all the time", "my ankles are swollen by the evening",
            "my skin has been itchy", "I've lost my appetite"),
    "cad": ("I get a tight feeling in my chest when I walk uphill",
            "there's a pressure in my chest that spreads to my left arm",
            "I get short of breath when I exert myself"),
    "heart_failure": ("I get breathless lying flat", "my legs have swollen up",
                      "I've been waking up at night gasping for air"),
    "arrhythmia": ("my heart keeps fluttering", "I've had spells of a racing heartbeat"),
    "aki": ("I've been passing much less urine", "I've felt sick and washed out"),
    "pneumonia": ("I've had a cough with phlegm and a fever", "it hurts when I breathe in"),
    "copd": ("I've been wheezy and breathless", "my cough is worse than usual"),
    "uti": ("it burns when I pass urine", "I've needed the toilet much more often"),
    "sepsis": ("I've had fevers and shaking chills", "I felt confused and very weak"),
    "anemia": ("I've been pale and tired", "I get breathless doing very little"),
    "gi_bleed": ("I noticed black stools", "I've felt light-headed"),
    "stroke": ("one side of my body felt weak", "my speech was slurred for a while"),
    "electrolytes": ("I've had muscle cramps and weakness",),
    "obesity": ("I've been struggling with my weight",),
    "depression": ("my mood has been low",),
    "back_pain": ("my back has been hurting",),
    "generic": ("I just haven't felt like myself", "I've been feeling run down",
                "things have not been right lately"),
}  # fmt: skip

GREETINGS_FIRST = (
    "I'm sorry to hear that; let's go through this stay together.",
    "Thanks for telling me, let me walk you through your record.",
    "Let's look at what happened during this admission.",
)
GREETINGS_LATER = (
    "Welcome back; this is your {ordinal} hospital stay with us.",
    "I'm sorry you're back; this is your {ordinal} admission in our records.",
    "Let's review this stay, your {ordinal} one with us.",
)
ADMISSION_FRAMES = (
    "You were admitted on {date}, and the admission type was {code}.",
    "Our records show an admission on {date} with admission type {code}.",
    "This stay began on {date}; it was registered as {code}.",
    "You came in on {date}, and the admission is recorded as {code}.",
)
# (sentence frame, item format) pairs so the item grammar fits its frame.
LAB_FRAMES = (
    ("On {date}, your {items}.", "{label} was {value} {unit}"),
    ("The blood work from {date} showed {items}.", "{label} at {value} {unit}"),
    ("Results for {date}: {items}.", "{label} {value} {unit}"),
    ("Your labs on {date} came back with {items}.", "{label} of {value} {unit}"),
    ("From the samples taken on {date}, {items}.", "{label} measured {value} {unit}"),
    ("Looking at {date}, I can see {items}.", "{label} at {value} {unit}"),
)
LAB_MORE_FRAMES = (
    ("Also on {date}: {items}.", "{label} {value} {unit}"),
    ("The same day, {date}, {items}.", "{label} was {value} {unit}"),
    ("Further results from {date} include {items}.", "{label} of {value} {unit}"),
)
# Reaction frames end in ", {meaning}." and every meaning is a "which ..." clause.
HIGH_FRAMES = (
    "That {label} of {value} {unit} is above {range}, {meaning}.",
    "Your {label} at {value} {unit} is higher than {range}, {meaning}.",
    "I'm concerned about the {label}: {value} {unit} is over {range}, {meaning}.",
    "The {label} result, {value} {unit}, exceeds {range}, {meaning}.",
)
LOW_FRAMES = (
    "That {label} of {value} {unit} is below {range}, {meaning}.",
    "Your {label} at {value} {unit} is lower than {range}, {meaning}.",
    "I'm concerned about the {label}: {value} {unit} is under {range}, {meaning}.",
    "The {label} result, {value} {unit}, falls short of {range}, {meaning}.",
)
FLAGGED_FRAMES = (
    "The lab flagged your {label} of {value} {unit} as abnormal, {meaning}.",
    "Note that the {label}, {value} {unit}, was flagged abnormal, {meaning}.",
)
RANGE_BOTH = ("the reference range of {lo} to {hi} {unit}", "the normal range, {lo} to {hi} {unit}")
RANGE_HIGH_ONLY = ("the upper reference limit of {hi} {unit}",)
RANGE_LOW_ONLY = ("the lower reference limit of {lo} {unit}",)
LAB_MEANING: dict[str, dict[str, tuple[str, ...]]] = {
    "creatinine": {"high": ("which suggests your kidneys are filtering less well",
                            "which tells me the kidneys are under strain"),
                   "low": ("which usually reflects low muscle mass",)},
    "potassium": {"high": ("which can upset the heart rhythm, so we will watch it closely",
                           "which we need to bring down because it affects the heart"),
                  "low": ("which can cause cramps and palpitations", "which we will need to replace")},
    "sodium": {"high": ("which often means you are dehydrated",),
               "low": ("which can make you confused and unsteady",
                       "which often comes from a fluid balance problem")},
    "glucose": {"high": ("which means your blood sugar is running high",
                         "which fits with poorly controlled blood sugar"),
                "low": ("which is a low blood sugar we need to prevent",)},
    "bun": {"high": ("which fits with dehydration or reduced kidney function",),
            "low": ("which is not usually a concern",)},
    "bicarbonate": {"high": ("which points to an alkaline shift in the blood",),
                    "low": ("which means some acid is building up in the blood",)},
    "chloride": {"high": ("which follows your fluid and salt balance",),
                 "low": ("which follows your fluid and salt balance",)},
    "anion_gap": {"high": ("which can mean acid is building up",),
                  "low": ("which is rarely significant",)},
    "calcium": {"high": ("which we will look into further",),
                "low": ("which can cause tingling and cramps",)},
    "hemoglobin": {"high": ("which means your blood is more concentrated than usual",),
                   "low": ("which means you are anaemic and explains some of the tiredness",
                           "which means you have some anaemia")},
    "hematocrit": {"high": ("which means your blood is more concentrated than usual",),
                   "low": ("which goes along with anaemia",)},
    "platelets": {"high": ("which can happen with inflammation",),
                  "low": ("which raises the risk of bleeding and bruising",)},
    "wbc": {"high": ("which suggests your body is fighting an infection or inflammation",),
            "low": ("which lowers your defences against infection",)},
    "hba1c": {"high": ("which tells me your average blood sugar over recent months was too high",
                       "which means your diabetes control needs tightening"),
              "low": ("which means your average blood sugar has been low",)},
    "ldl": {"high": ("which raises your risk of heart disease",
                     "which means we should work on lowering your cholesterol")},
    "total_cholesterol": {"high": ("which adds to your cardiovascular risk",)},
    "triglycerides": {"high": ("which is linked to diet and blood sugar control",)},
    "troponin_t": {"high": ("which points to strain or injury of the heart muscle",
                            "which means the heart muscle has been under stress")},
}  # fmt: skip
MEANING_DEFAULT = ("which we will keep an eye on",)
# lab -> (condition of SYMPTOM_CODES, direction) it points to: an abnormal value before that
# condition is first coded foreshadows it, and the length budget tells it first (clinlib.dialogue.budget).
FORESHADOWS: dict[str, tuple[str, str]] = {
    "creatinine": ("ckd", "high"), "bun": ("ckd", "high"), "glucose": ("diabetes", "high"),
    "hba1c": ("diabetes", "high"), "troponin_t": ("cad", "high"), "ldl": ("cad", "high"),
    "potassium": ("electrolytes", "high"), "sodium": ("electrolytes", "low"),
    "hemoglobin": ("anemia", "low"), "hematocrit": ("anemia", "low"),
}  # fmt: skip
STILL_FRAMES = ("{label} is still {state}.", "{label} remains {state}.",
                "The {label} is again {state}.")  # fmt: skip
STILL_STATE = {"high": "above its range", "low": "below its range", "flagged": "flagged abnormal"}
OTHERS_WATCH = ("I'll keep an eye on the other results too.",
                "A few others are also out of range, and we are watching them.")  # fmt: skip
ALL_NORMAL = (
    "Those values are all within their usual ranges.",
    "Everything there looks within the expected range.",
    "Nothing there is out of range.",
    "I'm happy with all of those.",
    "None of those worry me.",
    "That is all reassuring.",
)
SOME_NORMAL = (
    "The rest are within their usual ranges.",
    "The others look fine.",
    "Everything else there is normal.",
    "The remaining values are reassuring.",
    "The other results don't concern me.",
)
MED_FRAMES = (
    "On {date} we started {items}.",
    "We began {items} on {date}.",
    "Starting {date}, you received {items}.",
    "The orders from {date} included {items}.",
    "On {date} the team prescribed {items}.",
)
MED_ITEMS = ("{drug} {dose} {unit} {route}", "{drug} {dose} {unit} ({route})")
MED_ITEM_NO_ROUTE = "{drug} {dose} {unit}"
# A medication without a dose: named with its route only; no dose is ever made up.
MED_ITEMS_NO_DOSE = ("{drug} {route}", "{drug} ({route})")
MED_ITEM_NAME_ONLY = "{drug}"
PROCEDURE_FRAMES = (
    "On {date} we performed {title} (procedure code {code}).",
    "You had {title} on {date}; its procedure code is {code}.",
    "The record lists procedure {code}, {title}, on {date}.",
    "On {date} you underwent {title}, coded as {code}.",
)
DIAGNOSIS_FRAMES = (
    "The diagnoses recorded on {date} were {items}.",
    "At discharge on {date} we documented {items}.",
    "Your discharge diagnoses on {date} include {items}.",
    "On {date} the chart lists {items}.",
)
DIAGNOSIS_MORE_FRAMES = (
    "Also recorded on {date}: {items}.",
    "The chart for {date} further lists {items}.",
)
DISCHARGE_FRAMES = (
    "You were discharged on {date} to {code}.",
    "The stay ended on {date} with discharge location {code}.",
    "On {date} you were discharged; the discharge location was {code}.",
)
DISCHARGE_NEUTRAL_FRAMES = DISCHARGE_FRAMES[1:]
DISCHARGE_NO_LOCATION = ("The stay ended on {date}.", "You were discharged on {date}.")
NEUTRAL_LOCATIONS = frozenset({"DIED", "HOSPICE"})
NO_FACTS = ("There isn't much more recorded for this stay.",)

ASK_LABS_FIRST = (
    "What did my blood tests show?",
    "Did the blood work come back?",
    "Can you tell me about my labs?",
    "Were my blood results okay?",
)
ASK_LABS_LATER = (
    "What about the next set of bloods?",
    "Did the later tests change anything?",
    "And the bloods after that?",
    "How did the repeat tests look?",
)
WORRY = ("That sounds worrying.", "Oh dear, is that serious?", "I was afraid of that.",
         "Hmm, that doesn't sound good.")  # fmt: skip
ASK_MEDS = ("What are you giving me for it?", "Which medicines did I get?",
            "What treatment did you start?", "Did I need new medication?")  # fmt: skip
ASK_PROCEDURES = ("Did I need any procedures?", "What was done while I was in?",
                  "Were there any procedures?")  # fmt: skip
ASK_DIAGNOSES = ("So what's the diagnosis?", "What did you conclude in the end?",
                 "What conditions did you write down?")  # fmt: skip
ASK_DISCHARGE = ("When could I go home?", "How did the stay end?", "And when was I discharged?")
CLOSINGS = ("Thank you, that helps.", "Okay, I understand.", "Thanks for explaining everything.",
            "Got it, thank you.", "That makes sense, thanks.")  # fmt: skip

LAB_CHUNK = 5
# The clinician explains the first abnormal value of each lab and direction in a visit and
# notes a repeat briefly, at most MAX_REACTIONS abnormal values per lab day (keeps length down).
MAX_REACTIONS = 2
# Below this many events one process is faster than starting workers.
PARALLEL_MIN_EVENTS = 60_000
MED_CHUNK = 2
DX_CHUNK = 3

REWRITE_SYSTEM_PROMPT = """You rewrite one hospital visit of a patient-clinician dialogue so \
that it reads more naturally.
Rules:
1. Keep one line per turn, each starting with "Patient:" or "Clinician:", in the same order.
2. Keep every bracketed tag such as [LAB-123, LAB-124] right after the sentence that states
   those facts, and keep each fact in the line that carries its tag.
3. Copy every required string exactly as given: values, units, dates, codes, titles, drug
   names and routes.
4. Do not add any number, date, code, drug name or clinical fact that is not in the draft.
5. Patient lines contain no numbers.
Return only the rewritten lines."""
REWRITE_USER_TEMPLATE = "Required strings (each verbatim):\n{required}\n\nDraft:\n{draft}"

SPEAKER_PREFIX = {"patient": "Patient", "clinician": "Clinician"}
VISIT_HEADER = "Visit {number} ({date})"

# Appendix C.1, Figure 13: the paper's n = 385 verified dialogues.
PAPER_DIALOGUE_STATS: dict[str, dict[str, float]] = {
    "visits per patient": {"median": 10.0, "mean": 16.0, "max": 93.0},
    "characters per dialogue (k)": {"median": 13.7, "mean": 15.0, "max": 30.7},
}

TURN_COLUMNS: dict[str, str] = {**ARTIFACTS["dialogues"], "text_tagged": "string",
                                "visit_date": "string"}  # fmt: skip
COVERAGE_COLUMNS: dict[str, str] = {
    "subject_id": "int64",
    "event_id": "string",
    "kind": "string",
    "visit_idx": "Int64",
    "status": "string",
    "reason": "string",
    "turn_idx": "Int64",
    "kept": "bool",
}
SUMMARY_COLUMNS: dict[str, str] = {
    "subject_id": "int64",
    "kept": "bool",
    "n_visits": "int64",
    "n_turns": "int64",
    "n_chars": "int64",
    "n_events": "int64",
    "n_covered": "int64",
    "n_missed": "int64",
    "n_unusable": "int64",
    "n_soft_warnings": "int64",
    "drop_reason": "string",
}
_COVERAGE_BASE = {k: t for k, t in COVERAGE_COLUMNS.items() if k != "kept"}
REWRITE_COLUMNS: dict[str, str] = {
    "subject_id": "int64",
    "visit_idx": "int64",
    "accepted": "bool",
    "reason": "string",
}
REQUIRED_EVENT_COLUMNS: tuple[str, ...] = (
    "event_id", "subject_id", "visit_idx", "time", "kind", "code", "label", "value",
    "value_text", "unit", "ref_low", "ref_high", "flag", "route", "end_time",
)  # fmt: skip
_TEXT_FIELDS = ("code", "label", "value_text", "unit", "route")
_PANEL_ORDER = {lab.key: i for i, lab in enumerate(LAB_PANEL)}
_LAB_BY_KEY = {lab.key: lab for lab in LAB_PANEL}


class DialogueInputError(ValueError):
    """The events (or cohort) table given to the dialogue stage is malformed."""


class Rewriter(Protocol):
    """Makes a visit's draft read more naturally while keeping every required string."""

    def rewrite(self, draft: str, required: list[str]) -> str:
        """Return the rewritten visit: one ``Patient:``/``Clinician:`` line per turn, tags
        kept after the sentences that carry them, every ``required`` string verbatim."""
        ...


@dataclass
class ChatRewriter:
    """Adapter from any chat function (the kit's LLM layer) to :class:`Rewriter`.

    Args:
        chat: ``chat(messages) -> reply text`` with OpenAI-style ``[{"role", "content"}]``
            messages; caching and model choice are the caller's.
    """

    chat: Callable[[list[dict[str, str]]], str]

    def rewrite(self, draft: str, required: list[str]) -> str:
        """Send the draft with :data:`REWRITE_SYSTEM_PROMPT`; return the reply."""
        user = REWRITE_USER_TEMPLATE.format(required="\n".join(required), draft=draft)
        messages = [
            {"role": "system", "content": REWRITE_SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ]
        return self.chat(messages)


@dataclass(frozen=True)
class DialogueResult:
    """One patient's synthesised dialogue.

    Attributes:
        subject_id: the patient.
        turns: one row per turn (:data:`TURN_COLUMNS`).
        coverage: one row per source event: status covered|missed|unusable, reason, turn_idx.
        rewrites: one row per visit handed to a rewriter (empty without a rewriter).
    """

    subject_id: int
    turns: pd.DataFrame
    coverage: pd.DataFrame
    rewrites: pd.DataFrame = field(default_factory=lambda: _frame([], REWRITE_COLUMNS))


# --- small pure helpers --------------------------------------------------------------------


def _hash(seed: int, *parts: object) -> int:
    key = "|".join(str(p) for p in (seed, *parts)).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def hash_unit(seed: int, *parts: object) -> float:
    """Deterministic uniform number in [0, 1) from (seed, *parts)."""
    return _hash(seed, *parts) / 2.0**64


def _pick(options: Sequence[Any], seed: int, *parts: object) -> Any:
    return options[_hash(seed, *parts) % len(options)]


def _sentence(text: str) -> str:
    # A verbatim field ending in "." (admission type "EW EMER.") already closes the sentence.
    return text[:-1] if text.endswith("..") else text


_ONES = ("", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen")  # fmt: skip
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_ORDINAL_IRREGULAR = {"one": "first", "two": "second", "three": "third", "five": "fifth",
                      "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}  # fmt: skip


def ordinal_word(n: int) -> str:
    """``3 -> "third"``, ``21 -> "twenty-first"`` (1..99); ``"next"`` beyond.

    Visit ordinals are words so that no digit in a turn escapes the hallucination check.
    """
    if not 1 <= n <= 99:
        return "next"
    tens, ones = divmod(n, 10)
    if n < 20:
        word = _ONES[n]
        return _ORDINAL_IRREGULAR.get(word, word + "th")
    if ones == 0:
        return _TENS[tens][:-1] + "ieth"
    last = _ONES[ones]
    return f"{_TENS[tens]}-{_ORDINAL_IRREGULAR.get(last, last + 'th')}"


@functools.lru_cache(maxsize=1 << 18)
def _natural_key(eid: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", eid))


def _join(items: Sequence[str], sep: str = ", ") -> str:
    if len(items) <= 1:
        return "".join(items)
    return sep.join(items[:-1]) + (f"{sep}and " if sep != ", " else " and ") + items[-1]


def _chunks(seq: Sequence[Any], n: int) -> list[Sequence[Any]]:
    return [seq[i : i + n] for i in range(0, len(seq), n)]


def _frame(rows: list[dict[str, Any]], columns: Mapping[str, str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(columns))
    casts = {c: t for c, t in columns.items() if t != "list"}
    return df.astype(casts)


def lab_key(event: Mapping[str, Any]) -> str | None:
    """Panel key of a lab event (``"creatinine"``), None if its itemid is not in the panel."""
    try:
        return PANEL_ITEMIDS[int(str(event.get("code")).strip())][0]
    except (KeyError, ValueError):
        return None


def is_background_drug(name: str) -> bool:
    """True if ``name`` treats none of the index diseases (see :data:`DISEASE_DRUGS`)."""
    low = str(name).lower()
    return not any(s in low for s in DISEASE_DRUGS)


@functools.lru_cache(maxsize=1 << 14)
def condition_of(code: str) -> str | None:
    """Symptom group of an ICD code (prefix match, codes read as text), or None."""
    c = str(code).strip().upper().replace(".", "")
    for cond, prefixes in SYMPTOM_CODES.items():
        if any(c.startswith(p) for p in prefixes):
            return cond
    return None


# --- input checks --------------------------------------------------------------------------


def validate_events(events: pd.DataFrame, source: str = "events") -> pd.DataFrame:
    """Check the table-level shape of an events frame and coerce its types.

    Problems with single events are not errors here: :func:`event_problem` turns them into
    per-event ``unusable`` reasons.

    Args:
        events: the events table (clinlib.data.schema.ARTIFACTS["events"] columns).
        source: name used in error messages (e.g. the parquet path).

    Returns:
        A copy with ``time``/``end_time`` as timestamps and ``visit_idx`` as Int64.

    Raises:
        DialogueInputError: a required column is missing, an event_id or subject_id is
            null, or one event_id belongs to two patients.
    """
    missing = [c for c in REQUIRED_EVENT_COLUMNS if c not in events.columns]
    if missing:
        raise DialogueInputError(
            f"{source}: missing column(s) {', '.join(missing)}; expected the events table "
            "written by `clintrace cohort`"
        )
    df = events.copy()
    for col, other in (("event_id", "subject_id"), ("subject_id", "event_id")):
        nulls = df[col].isna()
        if nulls.any():
            examples = df.loc[nulls, other].astype(str).head(3).tolist()
            raise DialogueInputError(
                f"{source}: column {col!r} is null in {int(nulls.sum())} row(s) "
                f"(their {other}: {examples})"
            )
    try:
        df["subject_id"] = df["subject_id"].astype("int64")
    except (TypeError, ValueError) as exc:
        raise DialogueInputError(f"{source}: column 'subject_id' is not integer: {exc}") from None
    df["event_id"] = df["event_id"].astype("string")
    owners = df.groupby("event_id")["subject_id"].nunique()
    shared = owners[owners > 1]
    if len(shared):
        raise DialogueInputError(
            f"{source}: event_id {shared.index[0]!r} belongs to {int(shared.iloc[0])} patients"
        )
    for col in ("time", "end_time"):
        df[col] = pd.to_datetime(df[col], errors="coerce")
    for col in ("value", "ref_low", "ref_high"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    df["visit_idx"] = pd.to_numeric(df["visit_idx"], errors="coerce").astype("Int64")
    return df


def event_problem(event: Mapping[str, Any]) -> str | None:
    """Why an event cannot be stated faithfully (None when it can).

    Args:
        event: one events-table row.

    Returns:
        A short reason naming the field and value, e.g. ``"Creatinine unit missing"``.
    """
    present = V.present
    kind, eid = event.get("kind"), str(event.get("event_id"))
    if kind not in EVENT_KINDS:
        return f"unknown event kind {kind!r}"
    if not eid.startswith(EVENT_ID_PREFIX[kind] + "-"):
        return f"event_id {eid} does not match kind {kind!r}"
    if not present(event.get("visit_idx")):
        return "visit_idx missing"
    if not present(event.get("time")):
        return "time missing or not a timestamp"
    for col in _TEXT_FIELDS:
        val = event.get(col)
        if isinstance(val, str) and ("\n" in val or "\r" in val):
            return f"{col} contains a line break"
    label = event.get("label")
    if kind == "lab":
        key = lab_key(event)
        if key is None:
            return f"lab itemid {event.get('code')!r} is not in the 18-lab panel"
        name = label if present(label) else _LAB_BY_KEY[key].label
        if not present(label):
            return f"{name} label missing"
        vt = event.get("value_text")
        if not present(vt):
            return f"{name} value missing"
        if not any(ch.isdigit() for ch in str(vt)):
            return f"{name} value {vt!r} is not a number"
        if not present(event.get("unit")):
            return f"{name} unit missing"
    elif kind == "medication":
        if not present(label):
            return "drug name missing"
        # No dose (a MEDS eMAR / pharmacy start, an empty dose_val_rx) is still an order: it
        # is told as started, without a number. A dose without its unit cannot be told.
        if present(event.get("value_text")) and not present(event.get("unit")):
            return f"{label} dose unit missing"
    elif kind in ("diagnosis", "procedure"):
        code = event.get("code")
        if not present(code):
            return "ICD code missing"
        if not present(label):
            return f"unknown ICD code {code} (no title)"
    elif kind == "admission" and not present(event.get("code")):
        return "admission type missing"
    return None


def _med_item(e: Mapping[str, Any], p, day: str, c_i: int) -> str:
    """One medication as told: drug, dose, unit and route as recorded ("1-2" stays a range);
    without a dose just the drug and route, so a sentence says it was started."""
    route = V.present(e.get("route"))
    if V.present(e.get("value_text")):
        fmt = p(MED_ITEMS, "med_item", day, c_i) if route else MED_ITEM_NO_ROUTE
    else:
        fmt = p(MED_ITEMS_NO_DOSE, "med_item", day, c_i) if route else MED_ITEM_NAME_ONLY
    return fmt.format(drug=e["label"], dose=e["value_text"], unit=e["unit"], route=e.get("route"))


def missed_events(
    events: Sequence[Mapping[str, Any]],
    seed: int = 0,
    starts: Mapping[int, pd.Timestamp] | None = None,
) -> dict[str, str]:
    """Apply the missed-events rule (module docstring) to one patient's usable events.

    Args:
        events: the patient's usable events.
        seed: synthesis seed.
        starts: visit start times (default: :func:`clinlib.dialogue.verify.visit_starts` of events).

    Returns:
        ``{event_id: reason}`` for every event left unstated.
    """
    starts = V.visit_starts(events) if starts is None else starts
    first_day = {v: V.fmt_date(t) for v, t in starts.items()}
    bounds = V.lab_day_bounds(events)
    candidates: list[tuple[float, list[str], str, str]] = []  # (u, ids, kind, reason)
    med_groups: dict[tuple[int, str], list[str]] = {}
    # A lab is only missable if no other lab of the same kind shares its calendar day (two
    # visits can touch one day): otherwise "what was X on that day" would stay answerable.
    per_day: dict[tuple[str | None, str], int] = {}
    for e in events:
        if e["kind"] == "lab":
            k = (lab_key(e), V.fmt_date(e["time"]))
            per_day[k] = per_day.get(k, 0) + 1
    for e in events:
        eid, kind = str(e["event_id"]), e["kind"]
        if kind == "lab":
            key, day = lab_key(e), V.fmt_date(e["time"])
            if per_day[(key, day)] > 1:
                continue
            if key in V.KEY_LABS:
                if not V.key_lab_missable(e, bounds):
                    continue
                reason = f"rule: normal key lab ({key}) on a middle day of its visit"
                candidates.append((hash_unit(seed, "miss", eid), [eid], "key_lab", reason))
                continue
            if day == first_day.get(int(e["visit_idx"])):
                continue
            reason = f"rule: non-key lab ({key}) on a non-first day of its visit"
            candidates.append((hash_unit(seed, "miss", eid), [eid], "lab", reason))
        elif kind == "medication" and is_background_drug(e["label"]):
            group = (int(e["visit_idx"]), " ".join(str(e["label"]).lower().split()))
            med_groups.setdefault(group, []).append(eid)
    for (_, drug), ids in med_groups.items():
        ids = sorted(ids, key=_natural_key)
        reason = f"rule: background medication ({drug}), every order in its visit"
        candidates.append((hash_unit(seed, "miss", ids[0]), ids, "medication", reason))
    candidates.sort(key=lambda c: (c[0], c[1][0]))
    p = {"lab": P_MISS_LAB, "key_lab": P_MISS_KEY_LAB, "medication": P_MISS_MED}
    chosen = [c for c in candidates if c[0] < p[c[2]]]
    for c in candidates[:MIN_MISSED]:
        if c not in chosen:
            chosen.append(c)
    return {eid: reason for _, ids, _, reason in chosen for eid in ids}


# --- sentence builders ---------------------------------------------------------------------


def _lab_range(e: Mapping[str, Any], seed: int, key: tuple) -> str | None:
    lo, hi, unit = e.get("ref_low"), e.get("ref_high"), e["unit"]
    if V.present(lo) and V.present(hi):
        frame = _pick(RANGE_BOTH, seed, *key, "range")
        return frame.format(lo=V.fmt_number(lo), hi=V.fmt_number(hi), unit=unit)
    if V.present(hi):
        return RANGE_HIGH_ONLY[0].format(hi=V.fmt_number(hi), unit=unit)
    if V.present(lo):
        return RANGE_LOW_ONLY[0].format(lo=V.fmt_number(lo), unit=unit)
    return None


def _direction(e: Mapping[str, Any]) -> str | None:
    """``high``/``low`` against the event's own reference range; ``flagged`` when the lab
    marked it abnormal without a range that says which way; None when normal."""
    val, lo, hi = e.get("value"), e.get("ref_low"), e.get("ref_high")
    if V.present(val):
        if V.present(hi) and float(val) > float(hi):
            return "high"
        if V.present(lo) and float(val) < float(lo):
            return "low"
    return "flagged" if e.get("flag") == "abnormal" else None


def _lab_reaction(e: Mapping[str, Any], direction: str, seed: int, key: tuple) -> str:
    lk = lab_key(e) or ""
    rng = _lab_range(e, seed, key)
    if direction == "flagged" or rng is None:
        meanings = LAB_MEANING.get(lk, {}).get("high" if direction == "flagged" else direction)
        frame = _pick(FLAGGED_FRAMES, seed, *key, "frame")
    else:
        meanings = LAB_MEANING.get(lk, {}).get(direction)
        frame = _pick(HIGH_FRAMES if direction == "high" else LOW_FRAMES, seed, *key, "frame")
    meaning = _pick(meanings or MEANING_DEFAULT, seed, *key, "meaning")
    return frame.format(label=e["label"], value=e["value_text"], unit=e["unit"], range=rng,
                        meaning=meaning)  # fmt: skip


def _symptom_sentence(dx: Sequence[Mapping[str, Any]], seed: int, key: tuple) -> str:
    conds: list[str] = []
    for e in dx:
        c = condition_of(str(e["code"]))
        if c and c not in conds:
            conds.append(c)
    conds = conds[:2] or ["generic"]
    phrases = [_pick(SYMPTOMS[c], seed, *key, "symptom", c) for c in conds]
    lead = _pick(SYMPTOM_LEADS, seed, *key, "lead")
    return lead.format(s=" and ".join(phrases))


@dataclass
class _Turn:
    speaker: str
    sentences: list[tuple[str, list[str]]]

    def tagged(self) -> str:
        return " ".join(s + (" " + V.format_tag(ids) if ids else "") for s, ids in self.sentences)

    def plain(self) -> str:
        return " ".join(s for s, _ in self.sentences)

    def ids(self) -> list[str]:
        out: dict[str, None] = {}
        for _, ids in self.sentences:
            for i in ids:
                out.setdefault(i, None)
        return list(out)


def _visit_turns(
    sid: int,
    v: int,
    stated: Sequence[Mapping[str, Any]],
    diagnoses: Sequence[Mapping[str, Any]],
    seed: int,
    terse: bool = False,
) -> list[_Turn]:
    """Template turns of one visit: the patient opens with symptoms; the clinician states the
    admission, each day's labs (reacting to abnormal values), medications, procedures,
    diagnoses and the discharge, each answering a patient question. ``terse`` (a visit short
    of time, clinlib.dialogue.budget.TERSE_SHARE) leaves out the small talk: symptoms, greeting,
    worries and the closing."""
    key = (sid, v)
    by_kind: dict[str, list[Mapping[str, Any]]] = {k: [] for k in EVENT_KINDS}
    for e in stated:
        by_kind[e["kind"]].append(e)
    p = lambda opts, *k: _pick(opts, seed, *key, *k)  # noqa: E731
    opener = p(OPENERS_FIRST if v == 0 else OPENERS_LATER, "opener")
    symptoms = [] if terse else [(_symptom_sentence(diagnoses, seed, key), [])]
    turns = [_Turn("patient", [(opener, []), *symptoms])]

    greet = p(GREETINGS_FIRST, "greet") if v == 0 else p(GREETINGS_LATER, "greet")
    clinician = [(greet.format(ordinal=ordinal_word(v + 1)), [])]
    if terse and by_kind["admission"]:
        clinician = []
    for e in by_kind["admission"]:
        s = p(ADMISSION_FRAMES, "adm").format(date=V.fmt_date(e["time"]), code=e["code"])
        s = _sentence(s)
        clinician.append((s, [e["event_id"]]))
    turns.append(_Turn("clinician", clinician))

    worried = False
    reacted: set[tuple[str | None, str]] = set()  # react once per (lab, direction) a visit
    labs_by_day: dict[str, list[Mapping[str, Any]]] = {}
    for e in by_kind["lab"]:
        labs_by_day.setdefault(V.fmt_date(e["time"]), []).append(e)
    for d_i, day in enumerate(sorted(labs_by_day)):
        labs = sorted(labs_by_day[day], key=lambda e: (_PANEL_ORDER.get(lab_key(e), 99),
                                                       _natural_key(str(e["event_id"]))))  # fmt: skip
        ask = p(ASK_LABS_FIRST if d_i == 0 else ASK_LABS_LATER, "ask_labs", day)
        turns.append(_patient_turn(ask, worried, seed, key, day))
        sentences: list[tuple[str, list[str]]] = []
        n_abnormal = n_said = 0
        for c_i, chunk in enumerate(_chunks(labs, LAB_CHUNK)):
            frame, item = p(LAB_FRAMES if c_i == 0 else LAB_MORE_FRAMES, "lab", day, c_i)
            items = [item.format(label=e["label"], value=e["value_text"], unit=e["unit"])
                     for e in chunk]  # fmt: skip
            sentences.append((frame.format(date=day, items=_join(items)),
                              [e["event_id"] for e in chunk]))  # fmt: skip
            for e in chunk:
                direction = _direction(e)
                if not direction:
                    continue
                n_abnormal += 1
                if n_said >= MAX_REACTIONS:
                    continue
                n_said += 1
                eid, ekey = e["event_id"], (*key, e["event_id"])
                if (lab_key(e), direction) in reacted:
                    still = p(STILL_FRAMES, "still", eid)
                    s = still.format(label=e["label"], state=STILL_STATE[direction])
                else:
                    reacted.add((lab_key(e), direction))
                    s = _lab_reaction(e, direction, seed, ekey)
                sentences.append((s, [eid]))
        if n_abnormal == 0:
            sentences.append((p(ALL_NORMAL, "normal", day), []))
        elif n_abnormal > n_said:
            sentences.append((p(OTHERS_WATCH, "normal", day), []))
        elif n_abnormal < len(labs):
            sentences.append((p(SOME_NORMAL, "normal", day), []))
        worried = n_said > 0 and not terse
        turns.append(_Turn("clinician", sentences))

    if by_kind["medication"]:
        turns.append(_patient_turn(p(ASK_MEDS, "ask_meds"), worried, seed, key, "meds"))
        worried = False
        meds_by_day: dict[str, list[Mapping[str, Any]]] = {}
        for e in by_kind["medication"]:
            meds_by_day.setdefault(V.fmt_date(e["time"]), []).append(e)
        sentences = []
        for day in sorted(meds_by_day):
            meds = sorted(meds_by_day[day], key=lambda e: (str(e["label"]).lower(),
                                                           _natural_key(str(e["event_id"]))))  # fmt: skip
            for c_i, chunk in enumerate(_chunks(meds, MED_CHUNK)):
                items = [_med_item(e, p, day, c_i) for e in chunk]
                frame = p(MED_FRAMES, "med", day, c_i)
                sentences.append((frame.format(date=day, items=_join(items)),
                                  [e["event_id"] for e in chunk]))  # fmt: skip
        turns.append(_Turn("clinician", sentences))

    if by_kind["procedure"]:
        turns.append(_patient_turn(p(ASK_PROCEDURES, "ask_px"), worried, seed, key, "px"))
        worried = False
        pxs = sorted(by_kind["procedure"], key=lambda e: (e["time"], _natural_key(e["event_id"])))
        sentences = [
            (p(PROCEDURE_FRAMES, "px", e["event_id"]).format(
                date=V.fmt_date(e["time"]), title=e["label"], code=e["code"]), [e["event_id"]])
            for e in pxs
        ]  # fmt: skip
        turns.append(_Turn("clinician", sentences))

    if by_kind["diagnosis"]:
        turns.append(_patient_turn(p(ASK_DIAGNOSES, "ask_dx"), worried, seed, key, "dx"))
        worried = False
        dx_by_day: dict[str, list[Mapping[str, Any]]] = {}
        for e in by_kind["diagnosis"]:
            dx_by_day.setdefault(V.fmt_date(e["time"]), []).append(e)
        sentences = []
        for day in sorted(dx_by_day):
            dxs = sorted(dx_by_day[day], key=lambda e: _natural_key(str(e["event_id"])))
            for chunk in _chunks(dxs, DX_CHUNK):
                frames = DIAGNOSIS_MORE_FRAMES if sentences else DIAGNOSIS_FRAMES
                frame = p(frames, "dx", chunk[0]["event_id"])
                items = [f"{e['label']} ({e['code']})" for e in chunk]
                sentences.append((frame.format(date=day, items=_join(items, "; ")),
                                  [e["event_id"] for e in chunk]))  # fmt: skip
        turns.append(_Turn("clinician", sentences))

    died = False
    if by_kind["discharge"]:
        turns.append(_patient_turn(p(ASK_DISCHARGE, "ask_dis"), worried, seed, key, "dis"))
        worried = False
        sentences = []
        for e in by_kind["discharge"]:
            date = V.fmt_date(e["time"])
            loc = e.get("code")
            if not V.present(loc):
                s = p(DISCHARGE_NO_LOCATION, "dis").format(date=date)
            else:
                died = died or str(loc).strip().upper() in NEUTRAL_LOCATIONS
                frames = DISCHARGE_NEUTRAL_FRAMES if died else DISCHARGE_FRAMES
                s = _sentence(p(frames, "dis").format(date=date, code=loc))
            sentences.append((s, [e["event_id"]]))
        turns.append(_Turn("clinician", sentences))
    if len(turns) == 2 and not any(ids for _, ids in turns[1].sentences):
        turns[1].sentences.append((p(NO_FACTS, "nofacts"), []))
    if not died and not terse:
        turns.append(_patient_turn(p(CLOSINGS, "closing"), worried, seed, key, "closing"))
    return turns


def _patient_turn(text: str, worried: bool, seed: int, key: tuple, slot: str) -> _Turn:
    sentences = [(_pick(WORRY, seed, *key, "worry", slot), [])] if worried else []
    return _Turn("patient", [*sentences, (text, [])])


# --- rewriting -----------------------------------------------------------------------------

_LINE_RE = re.compile(r"^\s*(patient|clinician)\s*:\s*(.*)$", re.IGNORECASE)


def parse_visit_lines(text: str) -> list[tuple[str, str]]:
    """Parse ``Patient: ...`` / ``Clinician: ...`` lines into (speaker, text_tagged) pairs;
    other non-empty lines continue the previous turn.

    Raises:
        ValueError: text before the first speaker line, or no speaker line at all.
    """
    out: list[tuple[str, str]] = []
    for line in str(text).splitlines():
        if not line.strip():
            continue
        m = _LINE_RE.match(line)
        if m:
            out.append((m.group(1).lower(), m.group(2).strip()))
        elif out:
            out[-1] = (out[-1][0], f"{out[-1][1]} {line.strip()}")
        else:
            raise ValueError(f"text before the first speaker line: {line[:60]!r}")
    if not out:
        raise ValueError("no 'Patient:' or 'Clinician:' line")
    return out


def _try_rewrite(
    rewriter: Rewriter,
    turns: list[dict[str, Any]],
    v: int,
    events_by_id: Mapping[str, Mapping[str, Any]],
    missed: Sequence[str],
    drugs: V.DrugMatcher,
) -> tuple[list[dict[str, Any]] | None, str]:
    """Rewrite one visit; return (turn records, "") or (None, why the template is kept)."""
    draft = "\n".join(f"{SPEAKER_PREFIX[t['speaker']]}: {t['text_tagged']}" for t in turns)
    cited = [i for t in turns for i in t["event_ids"]]
    required = sorted({s for i in cited for s in V.required_fields(events_by_id[i]).values()})
    try:
        out = rewriter.rewrite(draft, list(required))
        lines = parse_visit_lines(out)
    except Exception as exc:  # noqa: BLE001 - any rewriter failure falls back to the template
        return None, f"rewriter failed: {type(exc).__name__}: {exc}"[:200]
    lost = [s for s in required if not V.contains_verbatim(out, s)]
    if lost:
        return None, f"required field(s) lost: {', '.join(repr(s) for s in lost[:3])}"
    recs = [
        dict(turn_idx=i, visit_idx=v, speaker=sp, text=V.strip_tags(tt), text_tagged=tt,
             event_ids=V.tag_ids(tt))
        for i, (sp, tt) in enumerate(lines)
    ]  # fmt: skip
    listed = {i for r in recs for i in r["event_ids"]}
    if listed != set(cited):
        extra, gone = sorted(listed - set(cited)), sorted(set(cited) - listed)
        return None, f"tags changed (added {extra[:3]}, dropped {gone[:3]})"
    first = {}
    for r in recs:
        for i in r["event_ids"]:
            first.setdefault(i, r["turn_idx"])
    problems = V.check_covered(recs, events_by_id, first)
    per_turn = V.check_turns(recs, events_by_id, drugs)
    problems += [p for ps in per_turn.values() for p in ps]
    problems += V.check_missed(recs, events_by_id, missed)
    if problems:
        return None, f"rewrite fails verification: {problems[0]}"
    return recs, ""


# --- the length budget (clinlib.dialogue.budget) ----------------------------------------------------

_EST_REACTION = 110  # characters a lab reaction sentence adds (estimate; fitting re-renders)
_EST_LAB_DAY = 100  # a new lab day: the patient's question, the frame, the closing remark
_MAX_FIT_ROUNDS = 8


@dataclass
class _Group:
    tier: int
    u: float
    ids: list[str]
    cost: int
    what: str
    rank: int = 0  # inside a tier: a lab's first abnormal value (0) before its later ones


def _visit_records(sid: int, v: int, vturns: list[_Turn]) -> list[dict[str, Any]]:
    return [
        dict(turn_idx=i, visit_idx=v, speaker=t.speaker, text=t.plain(),
             text_tagged=t.tagged(), event_ids=t.ids())
        for i, t in enumerate(vturns)
    ]  # fmt: skip


def _render_visit(
    sid: int, v: int, dx: list[Mapping[str, Any]], seed: int, stated: list, terse: bool
) -> list[dict[str, Any]]:
    return _visit_records(sid, v, _visit_turns(sid, v, stated, dx, seed, terse))


def _rendered_len(recs: list[dict[str, Any]], vdate: str | None) -> int:
    """Characters of a visit in render_dialogue(with_ids=False), with its blank-line gap."""
    head = VISIT_HEADER.format(number=1, date=vdate) if vdate else "Visit 1"
    lines = [len(f"{SPEAKER_PREFIX[r['speaker']]}: {r['text']}") for r in recs]
    return len(head) + sum(lines) + len(lines) + 2


def _event_cost(e: Mapping[str, Any]) -> int:
    # Only string fields are told (records hold None for a missing one).
    text = [v for c in ("label", "value_text", "unit", "code", "route")
            if isinstance(v := e.get(c), str)]  # fmt: skip
    extra = {"lab": 8 + (_EST_REACTION if _direction(e) else 0), "medication": 25,
             "diagnosis": 20, "procedure": 45}.get(e["kind"], 0)  # fmt: skip
    return sum(len(t) + 1 for t in text) + extra


def _budget_groups(
    stated: Sequence[Mapping[str, Any]],
    v: int,
    bounds: Mapping[int, tuple[str, str]],
    ends: set[str],
    news: Mapping[str, int],
    shared_days: set[tuple[str | None, str]],
    first_coded: Mapping[str, int],
    seed: int,
) -> tuple[list[Mapping[str, Any]], list[_Group]]:
    """A visit's stated events as (tier-0 events, droppable groups) — see clinlib.dialogue.budget."""
    keyed: dict[tuple, list[Mapping[str, Any]]] = {}
    for e in stated:
        kind = e["kind"]
        if kind == "lab":
            k: tuple = ("lab", lab_key(e), V.fmt_date(e["time"]))
        elif kind == "medication":
            k = ("medication", " ".join(str(e["label"]).lower().split()))
        elif kind in ("diagnosis", "procedure"):
            k = (kind, str(e["code"]).strip())
        else:
            k = (kind, str(e["event_id"]))
        keyed.setdefault(k, []).append(e)
    dx = sorted((e for e in stated if e["kind"] == "diagnosis"),
                key=lambda e: _natural_key(str(e["event_id"])))  # fmt: skip
    principal = str(dx[0]["event_id"]) if dx else None
    first, last = bounds.get(v, ("", ""))
    fixed: list[Mapping[str, Any]] = []
    groups: list[_Group] = []
    for k, evs in keyed.items():
        kind = k[0]
        ids = sorted((str(e["event_id"]) for e in evs), key=_natural_key)
        if kind == "lab":
            if (k[1], k[2]) in shared_days:  # a lab day two visits share stays whole
                fixed += evs
                continue
            tier = B.priority(
                "lab", key_lab=k[1] in V.KEY_LABS, abnormal=any(_direction(e) for e in evs),
                first_day=k[2] == first, last_day=k[2] == last,
                record_end=any(i in ends for i in ids),
                first_abnormal=any(i in news for i in ids),
                foreshadow=any(news.get(i) == -1 for i in ids),
            )  # fmt: skip
        elif kind == "medication":
            tier = B.priority("medication", disease=not is_background_drug(evs[0]["label"]))
        elif kind in ("diagnosis", "procedure"):
            cond = condition_of(k[1]) if kind == "diagnosis" else None
            tier = B.priority(kind, disease=cond is not None, principal=principal in ids,
                              new_condition=cond is not None and first_coded.get(cond) == v)  # fmt: skip
        else:
            tier = 0
        if tier == 0:
            fixed += evs
            continue
        cost = sum(_event_cost(e) for e in evs)
        u = hash_unit(seed, "budget", ids[0])
        rank = min((news[i] for i in ids if i in news), default=0)
        groups.append(_Group(tier, u, ids, cost, f"{kind} {k[1]}", rank))
    groups.sort(key=lambda g: (g.tier, g.rank, g.u, _natural_key(g.ids[0])))
    return fixed, groups


def _first_fit(groups: list[_Group], slack: float, chosen: frozenset[int]) -> frozenset[int]:
    """Groups (by index, in priority order) not yet chosen whose estimated costs fit ``slack``."""
    add = set()
    for i, g in enumerate(groups):
        if i not in chosen and g.cost <= slack:
            add.add(i)
            slack -= g.cost
    return frozenset(add)


def _trim(groups: list[_Group], chosen: frozenset[int], over: float) -> frozenset[int]:
    """Drop chosen groups from the lowest priority up until their estimates cover ``over``."""
    keep = set(chosen)
    for i in sorted(chosen, reverse=True):
        if over <= 0:
            break
        keep.discard(i)
        over -= groups[i].cost
    return frozenset(keep)


def _fit_visit(
    render: Callable[[list[Mapping[str, Any]], bool], list[dict[str, Any]]],
    fixed: list[Mapping[str, Any]],
    groups: list[_Group],
    by_id: Mapping[str, Mapping[str, Any]],
    allot: float,
    vdate: str | None,
) -> tuple[list[dict[str, Any]], list[_Group]]:
    """Render a visit within ``allot`` characters: tier-0 facts always, then groups in
    priority order while their estimated costs fit (first fit); the draft is rendered, trimmed
    from the lowest priority while over and topped up while under, at most
    :data:`_MAX_FIT_ROUNDS` renders. Returns (turn records, groups left out)."""
    bare = render(fixed, False)
    terse = _rendered_len(bare, vdate) > B.TERSE_SHARE * allot
    base = _rendered_len(render(fixed, True), vdate) if terse else _rendered_len(bare, vdate)
    chosen = _first_fit(groups, allot - base, frozenset())
    best: tuple[list[dict[str, Any]], frozenset[int]] | None = None
    for _ in range(_MAX_FIT_ROUNDS):
        used = chosen
        stated = [*fixed, *(by_id[i] for k in sorted(used) for i in groups[k].ids)]
        recs = render(stated, terse)
        n = _rendered_len(recs, vdate)
        if n <= allot or not chosen:
            best = (recs, chosen)
            more = _first_fit(groups, allot - n, chosen)
            if not more or n > allot:
                break
            chosen = chosen | more
        elif best is not None:
            break  # topping up overshot: keep the last draft that fitted
        else:
            chosen = _trim(groups, chosen, n - allot)
    if best is None:  # every round was over: the smallest draft tried last
        best = (recs, used)
    recs, chosen = best
    return recs, [g for k, g in enumerate(groups) if k not in chosen]


def _fit_budget(
    sid: int,
    visits: Sequence[int],
    usable_by_visit: Mapping[int, list[dict[str, Any]]],
    status: dict[str, dict[str, Any]],
    starts: Mapping[int, pd.Timestamp],
    seed: int,
) -> dict[int, list[dict[str, Any]]]:
    """Turn records of every visit within the patient's budget (clinlib.dialogue.budget); events left
    out get status ``missed`` with a ``budget:`` reason in ``status``. Visits are fitted in
    time order, each to its fair share plus what the visits before it left unused (or minus
    what they overran), so the record as a whole lands on its budget."""
    usable = [e for v in visits for e in usable_by_visit.get(v, [])]
    by_id = {str(e["event_id"]): e for e in usable}
    bounds = V.lab_day_bounds(usable)
    series: dict[str | None, list[Mapping[str, Any]]] = {}
    lab_visits: dict[tuple[str | None, str], set[int]] = {}
    for e in usable:
        if e["kind"] == "lab":
            series.setdefault(lab_key(e), []).append(e)
            day = (lab_key(e), V.fmt_date(e["time"]))
            lab_visits.setdefault(day, set()).add(int(e["visit_idx"]))
    first_coded: dict[str, int] = {}  # condition -> first visit with a diagnosis of it
    for e in usable:
        cond = condition_of(str(e["code"])) if e["kind"] == "diagnosis" else None
        if cond is not None:
            first_coded[cond] = min(first_coded.get(cond, 1 << 30), int(e["visit_idx"]))
    ends: set[str] = set()
    news: dict[str, int] = {}  # each lab's first abnormal values per direction -> rank
    heralds: dict[tuple[str | None, str | None], list[str]] = {}
    for key, evs in series.items():
        evs = sorted(evs, key=lambda e: (e["time"], _natural_key(str(e["event_id"]))))
        ends |= {str(evs[0]["event_id"]), str(evs[-1]["event_id"])}
        for d in ("high", "low", "flagged"):
            ids = [str(e["event_id"]) for e in evs if _direction(e) == d]
            news |= {i: r for r, i in enumerate(ids[: B.FIRST_ABNORMAL])}
        cond, way = FORESHADOWS.get(key or "", (None, None))
        before = first_coded.get(cond or "", -1)
        heralds.setdefault((cond, way), []).extend(
            str(e["event_id"]) for e in evs if _direction(e) == way and int(e["visit_idx"]) < before
        )
    # The few abnormal values (at most FIRST_ABNORMAL per condition and direction) that
    # foreshadowed a condition coded later are always told (tier 0); a long run is not news.
    for (cond, _), ids in heralds.items():
        if cond is not None and len(ids) <= B.FIRST_ABNORMAL:
            news |= {i: -1 for i in ids}
    shared = {d for d, vs in lab_visits.items() if len(vs) > 1}
    plans, need = {}, {}
    for v in visits:
        in_visit = usable_by_visit.get(v, [])
        stated = [e for e in in_visit if status[str(e["event_id"])]["status"] == "covered"]
        dx = sorted((e for e in in_visit if e["kind"] == "diagnosis"),
                    key=lambda e: _natural_key(str(e["event_id"])))  # fmt: skip
        render = functools.partial(_render_visit, sid, v, dx, seed)
        vdate = V.fmt_date(starts[v]) if v in starts else None
        full = render(stated, False)
        plans[v] = (render, stated, vdate, full)
        need[v] = _rendered_len(full, vdate)
    shares = B.fair_shares(need, B.budget_chars(len(visits)))
    out: dict[int, list[dict[str, Any]]] = {}
    carry = 0.0  # what earlier visits left of their shares (negative: what they overran)
    for v in visits:
        render, stated, vdate, full = plans[v]
        allot = shares[v] + carry
        if need[v] <= allot:
            out[v] = full
            carry = allot - need[v]
            continue
        fixed, groups = _budget_groups(stated, v, bounds, ends, news, shared, first_coded, seed)
        recs, dropped = _fit_visit(render, fixed, groups, by_id, allot, vdate)
        out[v] = recs
        carry = allot - _rendered_len(recs, vdate)
        for g in dropped:
            why = f"{B.BUDGET_REASON} ({B.TIER_NAMES[g.tier]}: {g.what})"
            for i in g.ids:
                status[i] |= dict(status="missed", reason=why)
    return out


# --- synthesis -----------------------------------------------------------------------------


def _synthesize_records(
    sid: int,
    events: list[dict[str, Any]],
    seed: int,
    rewriter: Rewriter | None,
    drugs: V.DrugMatcher | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """One patient's (turn records, coverage records, rewrite records)."""
    counts: dict[str, int] = {}
    for e in events:
        counts[str(e["event_id"])] = counts.get(str(e["event_id"]), 0) + 1
    status: dict[str, dict[str, Any]] = {}
    usable: list[dict[str, Any]] = []
    for e in events:
        eid = str(e["event_id"])
        if eid in status:
            continue
        reason = f"duplicate event_id ({counts[eid]} rows)" if counts[eid] > 1 else None
        reason = reason or event_problem(e)
        status[eid] = dict(
            subject_id=sid,
            event_id=eid,
            kind=e.get("kind") if V.present(e.get("kind")) else None,
            visit_idx=int(e["visit_idx"]) if V.present(e.get("visit_idx")) else None,
            status="unusable" if reason else "covered",
            reason=reason,
            turn_idx=None,
        )
        if not reason:
            usable.append(e)
    starts = V.visit_starts(events)
    for eid, why in missed_events(usable, seed, starts).items():
        status[eid] |= dict(status="missed", reason=why)

    visits = sorted({int(e["visit_idx"]) for e in events if V.present(e.get("visit_idx"))})
    events_by_id = {str(e["event_id"]): e for e in usable}
    if rewriter is not None and drugs is None:
        meds = [e["label"] for e in usable if e["kind"] == "medication"]
        drugs = V.DrugMatcher([*V.DRUG_LEXICON, *meds])
    turns: list[dict[str, Any]] = []
    rewrites: list[dict[str, Any]] = []
    usable_by_visit: dict[int, list[dict[str, Any]]] = {}
    for e in usable:
        usable_by_visit.setdefault(int(e["visit_idx"]), []).append(e)
    fitted = _fit_budget(sid, visits, usable_by_visit, status, starts, seed)
    for v in visits:
        in_visit = usable_by_visit.get(v, [])
        recs = fitted[v]
        if rewriter is not None:
            missed_v = [
                str(e["event_id"])
                for e in in_visit
                if status[str(e["event_id"])]["status"] == "missed"
            ]
            new, why = _try_rewrite(rewriter, recs, v, events_by_id, missed_v, drugs)
            rewrites.append(dict(subject_id=sid, visit_idx=v, accepted=new is not None,
                                 reason=why))  # fmt: skip
            recs = new or recs
        vdate = V.fmt_date(starts[v]) if v in starts else None
        for r in recs:
            r |= dict(subject_id=sid, turn_idx=len(turns), visit_date=vdate)
            turns.append(r)
    for t in turns:
        for eid in t["event_ids"]:
            row = status.get(eid)
            if row is not None and row["status"] == "covered" and row["turn_idx"] is None:
                row["turn_idx"] = t["turn_idx"]
    return turns, list(status.values()), rewrites


def synthesize_dialogue(
    events: pd.DataFrame, seed: int = 0, rewriter: Rewriter | None = None
) -> DialogueResult:
    """Turn one patient's events into a dialogue.

    Args:
        events: the patient's rows of the events table.
        seed: template and missed-event seed.
        rewriter: optional :class:`Rewriter` applied visit by visit (template text is kept
            for a visit whose rewrite loses or invents a fact).

    Returns:
        :class:`DialogueResult` with turns, coverage and the rewrite log.

    Raises:
        DialogueInputError: malformed table, or rows of more than one patient.
    """
    df = validate_events(events)
    sids = df["subject_id"].unique()
    if len(sids) != 1:
        raise DialogueInputError(
            f"synthesize_dialogue expects one patient's events, got subject_ids {sorted(sids)}"
        )
    sid = int(sids[0])
    turns, coverage, rewrites = _synthesize_records(sid, V.records(df), seed, rewriter)
    return DialogueResult(
        subject_id=sid,
        turns=_frame(turns, TURN_COLUMNS),
        coverage=_frame(coverage, _COVERAGE_BASE),
        rewrites=_frame(rewrites, REWRITE_COLUMNS),
    )


def synthesize_corpus(
    events: pd.DataFrame,
    cohort: pd.DataFrame | None = None,
    seed: int = 0,
    rewriter: Rewriter | None = None,
    source: str = "events",
    workers: int | None = None,
) -> dict[str, pd.DataFrame]:
    """Synthesise and verify every patient's dialogue (no file IO).

    Args:
        events: the events table.
        cohort: optional cohort table; restricts patients to it and reports cohort patients
            without events as dropped.
        seed: template and missed-event seed.
        rewriter: optional LLM rewriter.
        source: name of the events table for error messages.
        workers: processes (default: 2 for tables of at least :data:`PARALLEL_MIN_EVENTS`
            events, else 1; always 1 with a rewriter). Results do not depend on it.

    Returns:
        ``{"dialogues", "event_coverage", "dialogue_checks", "dialogue_summary",
        "dialogue_rewrites"}``; dialogues holds kept patients only.
    """
    df = validate_events(events, source)
    if cohort is not None:
        if "subject_id" not in cohort.columns:
            raise DialogueInputError("cohort: missing column 'subject_id'")
        wanted = set(cohort["subject_id"].astype("int64"))
        df = df[df["subject_id"].isin(wanted)]
    else:
        wanted = set(df["subject_id"])
    meds = sorted(set(df.loc[df["kind"] == "medication", "label"].dropna()))
    drug_names = [*V.DRUG_LEXICON, *meds]
    if workers is None:
        workers = min(2, os.cpu_count() or 1) if len(df) >= PARALLEL_MIN_EVENTS else 1
    parts = None
    if rewriter is None and workers > 1:
        try:
            parts = _parallel(df, seed, drug_names, workers)
        except (BrokenProcessPool, OSError, RuntimeError) as exc:
            # e.g. code run from stdin, whose __main__ the worker cannot re-import
            log.warning("parallel synthesis failed (%s); running in one process", exc)
    if parts is None:
        parts = [_synthesize_verify(df, seed, drug_names, rewriter)]
    turns_by: dict[int, list[dict[str, Any]]] = {}
    cov_by: dict[int, list[dict[str, Any]]] = {}
    rw_by: dict[int, list[dict[str, Any]]] = {}
    rows: list[dict[str, Any]] = []
    for part in parts:
        for sid, t, c, r, checks in part:
            turns_by[sid], cov_by[sid], rw_by[sid] = t, c, r
            rows += checks
    # The length fences need the whole corpus, so that row is added once all are synthesised.
    bounds = V.length_bounds_from(V.chars_per_visit(t) for t in turns_by.values() if t)
    rows += [V.length_row(sid, turns_by[sid], bounds) for sid in cov_by]
    rows.sort(key=lambda r: (r["subject_id"], V.CHECK_ORDER[r["check"]]))
    decisions = V.decide(rows)
    kept_ids = {sid for sid, d in decisions.items() if d["kept"]}
    kept_turns = [t for sid in sorted(kept_ids) for t in turns_by[sid]]
    coverage = [c | {"kept": sid in kept_ids} for sid in sorted(cov_by) for c in cov_by[sid]]
    return {
        "dialogues": _frame(kept_turns, TURN_COLUMNS),
        "event_coverage": _frame(coverage, COVERAGE_COLUMNS),
        "dialogue_checks": V.checks_frame(rows),
        "dialogue_summary": _summary(turns_by, cov_by, decisions, wanted),
        "dialogue_rewrites": _frame(
            [r for sid in sorted(rw_by) for r in rw_by[sid]], REWRITE_COLUMNS
        ),
    }


_Part = list[tuple[int, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]],
                   list[dict[str, Any]]]]  # fmt: skip


def _synthesize_verify(
    df: pd.DataFrame, seed: int, drug_names: list[str], rewriter: Rewriter | None = None
) -> _Part:
    """Synthesise and verify (all checks but length_outlier) every patient of ``df``."""
    drugs = V.DrugMatcher(drug_names)
    groups = V.group_records(df)
    out = []
    for sid in sorted(groups):
        turns, cov, rw = _synthesize_records(sid, groups[sid], seed, rewriter, drugs)
        checks = V.verify_records(
            sid, turns, groups[sid], cov, drugs=drugs, rewrites=rw, include_length=False
        )
        out.append((sid, turns, cov, rw, checks))
    return out


def _parallel(df: pd.DataFrame, seed: int, drug_names: list[str], workers: int) -> list[_Part]:
    """Split patients into ``workers`` bins of similar event counts and run them in
    separate processes (forkserver: no state inherited from a busy parent)."""
    sizes = df.groupby("subject_id").size().sort_values(ascending=False)
    bins: list[list[int]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for sid, n in sizes.items():
        k = loads.index(min(loads))
        bins[k].append(int(sid))
        loads[k] += int(n)
    chunks = [df[df["subject_id"].isin(b)] for b in bins if b]
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(len(chunks), mp_context=mp.get_context(method)) as pool:
        futures = [pool.submit(_synthesize_verify, c, seed, drug_names) for c in chunks]
        return [f.result() for f in futures]


def _summary(
    turns_by: Mapping[int, list[dict[str, Any]]],
    cov_by: Mapping[int, list[dict[str, Any]]],
    decisions: Mapping[int, Mapping[str, Any]],
    wanted: Iterable[int],
) -> pd.DataFrame:
    rows = []
    for sid in sorted(wanted):
        turns, cov = turns_by.get(sid, []), cov_by.get(sid, [])
        status = [c["status"] for c in cov]
        d = decisions.get(sid)
        if d is None:
            d = {"kept": False, "drop_reason": "no events for this cohort patient",
                 "n_soft_warnings": 0}  # fmt: skip
        rows.append(
            dict(
                subject_id=int(sid),
                kept=bool(d["kept"]),
                n_visits=len({t["visit_idx"] for t in turns}),
                n_turns=len(turns),
                n_chars=len(render_dialogue(turns, with_ids=False)) if turns else 0,
                n_events=len(cov),
                n_covered=status.count("covered"),
                n_missed=status.count("missed"),
                n_unusable=status.count("unusable"),
                n_soft_warnings=int(d["n_soft_warnings"]),
                drop_reason=str(d["drop_reason"]),
            )
        )
    return _frame(rows, SUMMARY_COLUMNS)


def build_dialogues(
    profile: str | None = None,
    seed: int | None = None,
    rewriter: Rewriter | None = None,
    allow_drops: bool = False,
) -> dict[str, pd.DataFrame]:
    """Read events (+ cohort) of a profile, synthesise and verify every dialogue, and write
    dialogues / event_coverage / dialogue_checks / dialogue_summary (.parquet) atomically
    under ``data/build/<profile>/`` (``dialogue_rewrites.parquet`` too with a rewriter).

    Args:
        profile: build profile (default: $CLINTRACE_PROFILE, else quick).
        seed: synthesis seed (default: the profile's seed, else 0).
        rewriter: optional LLM rewriter; the template path needs no network.
        allow_drops: accept dropping more than guards.MAX_DROP_SHARE of the patients
            (keeping none is always a StageError; issue 12 §3).

    Returns:
        The frames written, keyed by artifact name (see :func:`synthesize_corpus`).
    """
    name = resolve_profile(profile)
    if seed is None:
        seed = PROFILES[name].seed if name in PROFILES else 0
    hint = f"clintrace cohort --profile {name}"
    events_path = artifact_path("events.parquet", name)
    events = read_artifact(events_path, hint)
    check_artifact("events", name)
    cohort_path = artifact_path("cohort.parquet", name)
    cohort = read_artifact(cohort_path, hint) if cohort_path.exists() else None
    with stage_run("dialogues", name):
        out = synthesize_corpus(events, cohort, seed=seed, rewriter=rewriter,
                                source=str(events_path))  # fmt: skip
        summary = out["dialogue_summary"]
        dropped = summary.loc[~summary["kept"], "drop_reason"]
        check_kept("dialogues", "patients' dialogues", int(summary["kept"].sum()), len(summary),
                   group_reasons(dropped), allow_drops=allow_drops)  # fmt: skip
        _write_build(out, name, rewriter is not None)
    return out


def _write_build(out: Mapping[str, pd.DataFrame], name: str, rewritten: bool) -> None:
    names = ["dialogue_summary", "dialogue_checks", "event_coverage", "dialogues"]
    if rewritten:
        names.insert(1, "dialogue_rewrites")
    # All files are renamed into place together after every write succeeded; the summary,
    # entered first, is renamed last, so its presence marks a complete build.
    with ExitStack() as stack:
        tmps = {n: stack.enter_context(atomic_path(artifact_path(f"{n}.parquet", name)))
                for n in names}  # fmt: skip
        for n, tmp in tmps.items():
            out[n].to_parquet(tmp, index=False)


def build_report(out: Mapping[str, pd.DataFrame]) -> str:
    """One-paragraph text report of a build: kept/dropped counts and drop reasons by check."""
    summary, checks = out["dialogue_summary"], out["dialogue_checks"]
    kept = int(summary["kept"].sum())
    lines = [f"dialogues: {kept}/{len(summary)} kept, {len(summary) - kept} dropped"]
    failed = checks[(checks["severity"] == "hard") & ~checks["passed"]]
    for check, n in failed.groupby("check")["subject_id"].nunique().items():
        lines.append(f"  HARD {check}: {n} patient(s)")
    soft = checks[(checks["severity"] == "soft") & ~checks["passed"]]
    for check, n in soft.groupby("check")["subject_id"].nunique().items():
        lines.append(f"  soft {check}: {n} patient(s) warned")
    return "\n".join(lines)


# --- rendering -----------------------------------------------------------------------------


def _turn_records(turns: pd.DataFrame | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return sorted(V.records(turns), key=lambda r: int(r["turn_idx"]))


def _render(recs: list[dict[str, Any]], with_ids: bool, header: bool) -> str:
    lines = []
    if header and recs:
        number, date = int(recs[0]["visit_idx"]) + 1, recs[0].get("visit_date")
        head = VISIT_HEADER.format(number=number, date=date)
        lines.append(head if V.present(date) else head.split(" (")[0])
    for r in recs:
        text = r["text_tagged"] if with_ids else r["text"]
        lines.append(f"{SPEAKER_PREFIX.get(r['speaker'], str(r['speaker']))}: {text}")
    return "\n".join(lines)


def render_visit(
    turns: pd.DataFrame | Sequence[Mapping[str, Any]], with_ids: bool = True, header: bool = True
) -> str:
    """Render one visit's turns as text.

    Args:
        turns: the turns of exactly one visit (dialogues.parquet rows).
        with_ids: append the provenance tags (evaluation contexts; default).
        header: start with ``Visit N (YYYY-MM-DD)``.

    Returns:
        ``"Visit 2 (2150-04-01)\\nPatient: ...\\nClinician: ... [LAB-1]"``.
    """
    recs = _turn_records(turns)
    visits = {int(r["visit_idx"]) for r in recs}
    if len(visits) > 1:
        raise ValueError(f"render_visit expects one visit, got visits {sorted(visits)}")
    return _render(recs, with_ids, header)


def render_dialogue(
    turns: pd.DataFrame | Sequence[Mapping[str, Any]],
    with_ids: bool = True,
    visits: Iterable[int] | None = None,
) -> str:
    """Render a patient's dialogue (the evaluation context): visits in order, each with its
    header, separated by a blank line.

    Args:
        turns: one patient's turns.
        with_ids: append provenance tags (default True for evaluation contexts).
        visits: optional visit_idx values to include (e.g. the last visit only).

    Returns:
        The dialogue text.
    """
    recs = _turn_records(turns)
    if len({int(r["subject_id"]) for r in recs if "subject_id" in r}) > 1:
        raise ValueError("render_dialogue expects one patient's turns")
    keep = None if visits is None else {int(v) for v in visits}
    by_visit: dict[int, list[dict[str, Any]]] = {}
    for r in recs:
        v = int(r["visit_idx"])
        if keep is None or v in keep:
            by_visit.setdefault(v, []).append(r)
    return "\n\n".join(_render(by_visit[v], with_ids, True) for v in sorted(by_visit))


# --- corpus statistics ---------------------------------------------------------------------


def coverage_report(coverage: pd.DataFrame, kept_only: bool = True) -> pd.DataFrame:
    """Coverage by event kind: events, covered, missed, unusable and the share of must-cover
    events (everything not missed by rule) that is covered.

    Args:
        coverage: event_coverage rows.
        kept_only: restrict to kept patients when a ``kept`` column is present.
    """
    cov = coverage
    if kept_only and "kept" in cov.columns:
        cov = cov[cov["kept"]]
    tab = pd.crosstab(cov["kind"].fillna("?"), cov["status"])
    for col in ("covered", "missed", "unusable"):
        if col not in tab.columns:
            tab[col] = 0
    tab = tab[["covered", "missed", "unusable"]]
    tab.loc["all"] = tab.sum()
    tab.insert(0, "events", tab.sum(axis=1))
    must = tab["covered"] + tab["unusable"]
    tab["must_cover_coverage"] = (tab["covered"] / must.where(must > 0)).round(4)
    return tab.rename_axis("kind").reset_index()


def corpus_stats(summary: pd.DataFrame, turns: pd.DataFrame) -> pd.DataFrame:
    """Our corpus beside the paper's (Appendix C.1): visits per patient, characters per
    dialogue (thousands) and turns per visit, over kept patients.

    Returns:
        Rows per metric with ours_median/mean/max and paper_median/mean/max (NaN where the
        paper gives no number).
    """
    kept = summary[summary["kept"]]
    per_visit = turns.groupby(["subject_id", "visit_idx"]).size()
    ours = {
        "visits per patient": kept["n_visits"].astype(float),
        "characters per dialogue (k)": kept["n_chars"].astype(float) / 1000,
        "turns per visit": per_visit.astype(float),
    }
    rows = []
    for metric, s in ours.items():
        paper = PAPER_DIALOGUE_STATS.get(metric, {})
        rows.append(
            dict(
                metric=metric,
                n=len(s),
                ours_median=float(s.median()) if len(s) else float("nan"),
                ours_mean=float(s.mean()) if len(s) else float("nan"),
                ours_max=float(s.max()) if len(s) else float("nan"),
                paper_median=paper.get("median", float("nan")),
                paper_mean=paper.get("mean", float("nan")),
                paper_max=paper.get("max", float("nan")),
            )
        )
    return pd.DataFrame(rows).round(2)
