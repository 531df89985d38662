"""Questions on the seed's past-medical-history, medication-history and prior-conflicting trap
events (MedMemoryBench App. "Patient Profile Selection Principles" (b): "Extended profile
attributes, including past medical history, allergy history, and medication history, are
purposefully designed as trap events"; its sulfonamide example).

* EEM over the stated entity: the past illness, or the medicine a doctor elsewhere prescribes
  (string match on its name).
* MQ, multi-select (the seed's "Select all correct options ... B or B,D"): four options in a
  hash order per patient — the drug the fact makes unsafe, two alternatives the fact alone
  does not rule out, and "none of these" — scored as a set; the gold is the two alternatives.
  Risk: missed contraindication (a past illness), incorrect medication recommendation (a
  medicine taken elsewhere).
* MQ ``prior_conflict``, multi-select, for every patient who stated a sulfa allergy: a
  sulfonylurea (glimepiride) is considered. The seed's example tests "whether the system
  recalls the recorded allergy and evaluates its relevance to the specific medication, rather
  than treating an unspecified sulfonamide allergy as an automatic class-wide
  contraindication": the two correct statements say the allergy matters but does not rule the
  drug out; one wrong one over-applies the allergy (the medical prior the trap conflicts with),
  the other forgets it. Deviation: the seed's patient has diabetes on CSII; the kit asks every
  sulfa-allergic patient, as a hypothetical ("if this patient ever needed ..."), since its
  cohort is not all diabetic.
"""

from __future__ import annotations

from clinlib.tasks.traps.constraints import history_fact
from clinlib.tasks.traps.reference import reference
from clinlib.tasks.traps.rows import shuffled, trap_question

NONE_OPTION = "none of these"
HISTORY_RISK = {
    "history": "missed_contraindication",
    "medication": "incorrect_medication_recommendation",
}
EEM_WORDING = {
    "history": "What illness did the patient say they had in the past? Answer with its name only.",
    "medication": "Which medicine did the patient say a doctor outside this hospital "
    "prescribes them? Answer with its name only.",
}
MQ_SCOPE = {
    "history": "the patient's past medical history",
    "medication": "the medicines the patient said they take",
}
SULFA = "sulfa drugs"
PRIOR_DRUG = "glimepiride"
PRIOR_OPTIONS = (
    "The reported allergy is to sulfonamide antibiotics; cross-reactivity with a sulfonylurea "
    "is low, so glimepiride is not automatically ruled out",
    "The allergy still matters: if glimepiride is started, watch for a rash and stop it if "
    "one appears",
    "Glimepiride is ruled out: a sulfa allergy forbids every drug with a sulfonamide group",
    "The patient has reported no drug allergy, so nothing needs checking",
)
PRIOR_CORRECT = (0, 1)


def history_questions(sid: int, fact: dict, info: dict) -> list[dict]:
    """EEM and the multi-select MQ on one injected history fact (module docstring)."""
    h = history_fact(str(fact["value"]))
    kind, anchors, said = h.kind, fact["anchor_event_ids"], str(fact["statement"])
    why = f'In visit {fact["visit_idx"]} the patient said: "{said}"'
    eem = trap_question(
        "EEM",
        sid,
        anchors,
        EEM_WORDING[kind],
        h.name,
        [],
        HISTORY_RISK[kind],
        fact["trap_id"],
        {"kind": kind},
        info,
        sub=kind,
        ref=reference(why),
    )
    options, gold = shuffled([h.avoid, *h.safe, NONE_OPTION], (1, 2), "history", sid)
    mq = trap_question(
        "MQ",
        sid,
        anchors,
        f"The patient now needs {h.need}. Considering only {MQ_SCOPE[kind]}, which of these "
        "could be given? Select all that apply.",
        gold,
        options,
        HISTORY_RISK[kind],
        fact["trap_id"],
        {"kind": kind, "entity": h.name, "avoid": h.avoid},
        info,
        sub=kind,
        ref=reference(
            f"{why}; {h.why}, so {h.avoid} is not one to give; {h.safe[0]} and "
            f"{h.safe[1]} are not ruled out by it."
        ),
    )
    return [eem, mq]


def prior_conflict_question(sid: int, allergy: dict, info: dict) -> list[dict]:
    """The sulfonamide MQ for a patient who stated a sulfa allergy; [] for any other
    allergen (module docstring)."""
    if str(allergy["value"]) != SULFA:
        return []
    options, gold = shuffled(PRIOR_OPTIONS, PRIOR_CORRECT, "prior", sid)
    return [
        trap_question(
            "MQ",
            sid,
            allergy["anchor_event_ids"],
            f"If this patient ever needed a medicine to lower their blood sugar, a clinician "
            f"might consider {PRIOR_DRUG}, a sulfonylurea. Considering the allergies the "
            "patient has reported, which statements are correct? Select all that apply.",
            gold,
            options,
            "incorrect_medication_recommendation",
            allergy["trap_id"],
            {"kind": "prior_conflict", "allergen": SULFA, "drug": PRIOR_DRUG},
            info,
            sub="prior_conflict",
            ref=reference(
                f'In visit {allergy["visit_idx"]} the patient said: "{allergy["statement"]}". '
                "A sulfonamide-antibiotic allergy is not an automatic class-wide "
                "contraindication to a sulfonylurea, but it is relevant and calls for caution."
            ),
        )
    ]
