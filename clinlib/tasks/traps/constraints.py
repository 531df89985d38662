"""Patient-stated constraints injected as trap facts (MedMemoryBench §4 "Disease Progression Event Generation": "At the
initial stage of the graph, we explicitly inject trap events ... allergy history, contraindications, economic
constraints, and personal preferences").

A share :data:`INJECTED_SHARE` of the dialogue patients (picked by a stable hash of the patient
id, so the same patients on every run) states up to five constraints, each in one of the first
:data:`EARLY_VISITS` visits (hash-picked): an allergy, an economic constraint, a preference, a
past illness and a medicine taken elsewhere (:data:`HISTORY_FACTS`: the seed's past medical
history and medication history, App. "Patient Profile Selection Principles" (b)).
Each is a controlled injection like T3/T5's (:mod:`clinlib.tasks.injections`, kind ``trap``):
a patient turn holding the statement verbatim, tagged with its own event id
(``TRAPALG-<subject>``, ``TRAPCOST-<subject>``, ``TRAPPREF-<subject>``, ``TRAPPMH-<subject>``,
``TRAPMED-<subject>``: the kit's id
grammar ``[A-Z]+-[0-9-]+``, so every context renderer and evidence matcher reads them as tags), followed by a
clinician acknowledgement that states no fact, inserted after the visit's first clinician turn
(so turns still alternate). The allergen is drawn only from classes the patient's record never
orders, a history fact only when the record orders none of its drugs (an injected fact must
not contradict the record). These facts are INJECTED, not
MIMIC-IV or synthetic record facts; nothing in the record-derived tasks T1–T11 reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from clinlib.data.drugnames import drug_key, has_phrase
from clinlib.data.vocab import TRAP_STATEMENT_PREFIX
from clinlib.tasks.generators.common import stable_hash
from clinlib.tasks.injections import Injection

INJECTED_SHARE = 0.5  # patients with injected constraints (stable hash of the patient id)
EARLY_VISITS = 3  # an injected constraint sits in one of the patient's first three visits
ACK_SUFFIX = "~ack"


@dataclass(frozen=True)
class Allergen:
    """An allergy an injected patient may state: the class as said, the drugs it covers
    (whole-word :func:`drug_key` phrases: a recorded order of one excludes the allergen) and
    the example drug a later question proposes."""

    name: str
    phrases: tuple[str, ...]
    example: str
    reaction: str


ALLERGENS: tuple[Allergen, ...] = (
    Allergen(
        "penicillin",
        (
            "penicillin",
            "amoxicillin",
            "ampicillin",
            "piperacillin",
            "nafcillin",
            "oxacillin",
            "dicloxacillin",
        ),
        "amoxicillin",
        "hives",
    ),
    Allergen(
        "sulfa drugs",
        ("sulfamethoxazole", "sulfasalazine", "sulfadiazine", "bactrim"),
        "sulfamethoxazole-trimethoprim",
        "a widespread rash",
    ),
    Allergen("codeine", ("codeine",), "codeine", "severe vomiting"),
    Allergen(
        "ibuprofen", ("ibuprofen", "naproxen", "ketorolac"), "ibuprofen", "swelling of the lips"
    ),
    Allergen(
        "iodinated contrast",
        ("iohexol", "iodixanol", "iopamidol"),
        "a contrast CT scan",
        "trouble breathing",
    ),
)

COSTS: tuple[tuple[str, str], ...] = (
    (
        "generic_only",
        "I pay for my medicines myself, so I can only afford generic drugs, never brand-name ones.",
    ),
    (
        "monthly_cap",
        "Money is tight: I cannot spend more than 20 dollars a month on prescriptions.",
    ),
    (
        "no_new_tests",
        "My insurance stopped covering outpatient imaging, so I cannot pay for "
        "scans unless it is an emergency.",
    ),
)
PREFERENCES: tuple[tuple[str, str], ...] = (
    ("no_injections", "I would rather not take any injections at home; tablets are fine."),
    ("once_daily", "I forget doses easily, so I want medicines I take only once a day."),
    ("no_drowsy", "I drive a bus for work, so I cannot take anything that makes me drowsy."),
)


@dataclass(frozen=True)
class HistoryFact:
    """A past illness or a medicine taken elsewhere that an injected patient may state (the
    seed's "past medical history" and "medication history" trap events, MedMemoryBench
    App. "Patient Profile Selection Principles" (b)): the entity as an EEM answer, the
    statement, the drug a later question proposes that it rules out or makes unsafe and why,
    two alternatives this fact alone does not rule out, what the drug is for, and the
    whole-word drug phrases whose order in the record excludes the fact (an injected history
    must not contradict the record)."""

    kind: str
    name: str
    statement: str
    avoid: str
    why: str
    safe: tuple[str, str]
    need: str
    phrases: tuple[str, ...]


HISTORY_FACTS: tuple[HistoryFact, ...] = (
    HistoryFact(
        "history",
        "bleeding stomach ulcer",
        "Years ago I was in hospital with a bleeding stomach ulcer.",
        "naproxen",
        "an NSAID raises the risk of another ulcer bleed",
        ("acetaminophen", "a lidocaine patch"),
        "pain relief",
        ("naproxen", "lidocaine"),
    ),
    HistoryFact(
        "history",
        "asthma",
        "I have had asthma since I was a child and still carry an inhaler.",
        "propranolol",
        "a non-selective beta blocker can set off bronchospasm in asthma",
        ("amlodipine", "hydrochlorothiazide"),
        "blood pressure",
        ("propranolol", "amlodipine", "hydrochlorothiazide"),
    ),
    HistoryFact(
        "history",
        "epilepsy",
        "I was told I have epilepsy after seizures as a teenager.",
        "bupropion",
        "bupropion lowers the seizure threshold",
        ("sertraline", "talking therapy"),
        "low mood",
        ("bupropion", "sertraline"),
    ),
    HistoryFact(
        "medication",
        "warfarin",
        "My heart doctor at another clinic has me on warfarin every evening.",
        "aspirin",
        "aspirin on top of warfarin raises the bleeding risk",
        ("acetaminophen", "a cold pack"),
        "pain relief",
        ("warfarin", "aspirin"),
    ),
    HistoryFact(
        "medication",
        "sildenafil",
        "A doctor at another clinic prescribes me sildenafil, which I take now and then.",
        "nitroglycerin",
        "a nitrate with sildenafil can drop the blood pressure dangerously",
        ("metoprolol", "amlodipine"),
        "chest pain",
        ("sildenafil", "nitroglycerin", "metoprolol", "amlodipine"),
    ),
    HistoryFact(
        "medication",
        "lithium",
        "A psychiatrist outside this hospital has kept me on lithium for many years.",
        "hydrochlorothiazide",
        "a thiazide raises the lithium level",
        ("amlodipine", "metoprolol"),
        "blood pressure",
        ("lithium", "hydrochlorothiazide", "amlodipine", "metoprolol"),
    ),
)
HISTORY_KINDS = ("history", "medication")
ALLERGY_TEXT = "Before we go on, I should tell you I am allergic to {name}; it gave me {reaction}."
ACK_TEXT = "Thank you, I have written that down in your record."


def has_constraints(subject_id: int, share: float = INJECTED_SHARE) -> bool:
    """Whether a patient is in the injected share (stable across runs)."""
    return stable_hash("trap-share", int(subject_id)) % 10_000 < round(share * 10_000)


def trap_id(kind: str, subject_id: int) -> str:
    """The event id of an injected constraint, e.g. ``TRAPALG-10000003``."""
    return f"{TRAP_STATEMENT_PREFIX[kind]}-{int(subject_id)}"


def _allowed_allergens(drugs: list[str]) -> list[Allergen]:
    keys = [drug_key(d) for d in drugs]
    return [a for a in ALLERGENS if not any(has_phrase(k, p) for k in keys for p in a.phrases)]


def _allowed_history(kind: str, drugs: list[str]) -> list[HistoryFact]:
    keys = [drug_key(d) for d in drugs]
    return [
        h
        for h in HISTORY_FACTS
        if h.kind == kind and not any(has_phrase(k, p) for k in keys for p in h.phrases)
    ]


def history_fact(name: str) -> HistoryFact:
    """The :data:`HISTORY_FACTS` entry of an entity name."""
    return next(h for h in HISTORY_FACTS if h.name == name)


def _anchor_turn(turns: pd.DataFrame, visit: int) -> int | None:
    v = turns[(turns["visit_idx"] == visit) & (turns["speaker"] == "clinician")]
    return None if v.empty else int(v["turn_idx"].min())


def injected_constraints(
    turns: pd.DataFrame, events: pd.DataFrame, share: float = INJECTED_SHARE
) -> pd.DataFrame:
    """The injected constraints of every dialogue patient in the share.

    Args:
        turns: dialogues.parquet rows.
        events: events.parquet rows (the patient's recorded drugs exclude allergens).
        share: share of patients with constraints.

    Returns:
        One row per constraint: trap_id, subject_id, kind, value, statement, visit_idx,
        after_turn_idx, example (the drug a question proposes, allergies only).
    """
    meds = events[events["kind"] == "medication"].groupby("subject_id")["label"].agg(list)
    rows = []
    for sid, sub in turns.groupby("subject_id", sort=True):
        sid = int(sid)
        if not has_constraints(sid, share):
            continue
        visits = sorted(int(v) for v in sub["visit_idx"].unique())[:EARLY_VISITS]
        allergens = _allowed_allergens([str(d) for d in meds.get(sid, [])])
        picks = {
            "cost": COSTS[stable_hash("cost", sid) % len(COSTS)],
            "preference": PREFERENCES[stable_hash("pref", sid) % len(PREFERENCES)],
        }
        if allergens:
            a = allergens[stable_hash("allergy", sid) % len(allergens)]
            picks["allergy"] = (a.name, ALLERGY_TEXT.format(name=a.name, reaction=a.reaction))
        for kind in HISTORY_KINDS:
            facts = _allowed_history(kind, [str(d) for d in meds.get(sid, [])])
            if facts:
                h = facts[stable_hash(kind, sid) % len(facts)]
                picks[kind] = (h.name, h.statement)
        for kind in ("allergy", "cost", "preference", *HISTORY_KINDS):
            if kind not in picks:
                continue
            visit = visits[stable_hash(kind, "visit", sid) % len(visits)]
            anchor = _anchor_turn(sub, visit)
            if anchor is None:
                continue
            value, text = picks[kind]
            example = next((a.example for a in ALLERGENS if a.name == value), "")
            if kind in HISTORY_KINDS:
                example = history_fact(value).avoid
            rows.append(
                {
                    "trap_id": trap_id(kind, sid),
                    "subject_id": sid,
                    "kind": kind,
                    "value": value,
                    "statement": text,
                    "visit_idx": visit,
                    "after_turn_idx": anchor,
                    "example": example,
                }
            )
    return pd.DataFrame(rows, columns=CONSTRAINT_COLUMNS)


CONSTRAINT_COLUMNS = [
    "trap_id",
    "subject_id",
    "kind",
    "value",
    "statement",
    "visit_idx",
    "after_turn_idx",
    "example",
]


def constraint_injections(constraints: pd.DataFrame) -> list[Injection]:
    """Each constraint as two injections: the patient's statement (qid = its trap id) and the
    clinician's acknowledgement (qid = trap id + ``~ack``, so it sorts right after)."""
    out = []
    for c in constraints.to_dict("records"):
        common = dict(
            kind="trap",
            subject_id=int(c["subject_id"]),
            visit_idx=int(c["visit_idx"]),
            after_turn_idx=int(c["after_turn_idx"]),
        )
        out.append(
            Injection(**common, speaker="patient", text=str(c["statement"]), qid=str(c["trap_id"]))
        )
        out.append(
            Injection(
                **common, speaker="clinician", text=ACK_TEXT, qid=str(c["trap_id"]) + ACK_SUFFIX
            )
        )
    return out
