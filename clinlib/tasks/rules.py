"""Gold-answer rules shared by the generators and the independent L2 recomputation
(paper §3 "Task suite", Appendix A L2, Appendix B).

Only constants and the canonical answer vocabularies live here; the generators
(:mod:`clinlib.tasks.generate`) and the recomputation (:mod:`clinlib.tasks.recompute`) each
implement the arithmetic separately, so that L2 compares two implementations of this spec.

T2 trend (2–5 visits, one value per visit = the visit's earliest measurement of the lab):
    r = (last - first) / |first|; |r| < STABLE_REL -> "stable;none"; otherwise the direction
    (increased / decreased) and the magnitude bin of |r|: weak < MODERATE_REL <= moderate <
    STRONG_REL <= strong.
T6 cross-patient (A vs B): a) distinct diagnosis codes, b) max lab value, c) |last - first| of
    a lab; "similar" when |a - b| <= SIMILAR_REL * max(|a|, |b|) (for counts: equal).
T8 post-treatment change: before = the latest value of the target lab at or before the
    treatment start (at most T8_MAX_BEFORE_DAYS earlier), after = the first value at least
    T8_MIN_AFTER_DAYS after the start (at most T8_MAX_AFTER_DAYS); r as in T2; |r| < STABLE_REL
    -> "similar" (bin "0"), else increased/decreased with bins S/M/L at the T2 thresholds.
T4 retrospective evidence: a family of T4_EVIDENCE first coded (any diagnosis row matching its
    ICD prefixes) at visit v >= 1; the evidence is every lab event of the family's labs in
    visits < v that is flagged abnormal AND lies on the family's side of its reference range
    (T4_DIRECTION: "high" -> value > ref_high, "low" -> value < ref_low; the event's own range,
    else the panel's) — a low potassium is not evidence of hyperkalemia. Questions need
    T4_MIN_EVIDENCE..T4_MAX_EVIDENCE such events; gold = their event ids sorted, joined by ";".
"""

from __future__ import annotations

from clinlib.tasks.registry import specs

STABLE_REL = 0.05
MODERATE_REL = 0.15
STRONG_REL = 0.30
SIMILAR_REL = 0.05

T2_MIN_VISITS = 2
T2_MAX_VISITS = 5

T8_MAX_BEFORE_DAYS = 180
T8_MIN_AFTER_DAYS = 7
T8_MAX_AFTER_DAYS = 365

TREND_DIRECTIONS = ("increased", "decreased", "stable")
TREND_MAGNITUDES = ("none", "weak", "moderate", "strong")
T6_ANSWERS = ("A", "B", "similar")
T8_DIRECTIONS = ("increased", "decreased", "similar")
T8_BINS = ("L-", "M-", "S-", "0", "S+", "M+", "L+")
YES_NO = ("yes", "no")
OPTION_LETTERS = ("A", "B", "C", "D")

# Treatments whose target lab T8 follows: a phrase found as whole words in a drug's normalised
# name (clinlib.data.drugnames.drug_key; the longest wins) -> lab keys.
T8_TREATMENT_TARGETS: dict[str, tuple[str, ...]] = {
    "metformin": ("hba1c", "glucose"),
    "glipizide": ("hba1c", "glucose"),
    "insulin glargine": ("hba1c", "glucose"),
    "glargine": ("hba1c", "glucose"),  # MIMIC-IV's own spelling of insulin glargine
    "atorvastatin": ("ldl", "total_cholesterol"),
    "simvastatin": ("ldl", "total_cholesterol"),
    "lisinopril": ("potassium", "creatinine"),
    "losartan": ("potassium", "creatinine"),
    "hydrochlorothiazide": ("sodium", "potassium"),
    "furosemide": ("potassium", "bun"),
    "sodium bicarbonate": ("bicarbonate",),
    "epoetin": ("hemoglobin",),
    "potassium chloride": ("potassium",),
}

# T4: a later diagnosis family and the earlier abnormal findings that constitute its evidence.
T4_EVIDENCE: dict[str, tuple[str, ...]] = {
    "diabetes": ("hba1c", "glucose"),
    "ckd": ("creatinine", "bun"),
    "cad": ("troponin_t", "ldl"),
    "hyperkalemia": ("potassium",),
    "anemia": ("hemoglobin", "hematocrit"),
    "hyponatremia": ("sodium",),
}

# The paper's evaluation-set sizes (§3) and a small profile that still covers every subtype.
PAPER_COUNTS: dict[str, int] = {
    "T1": 1500,
    "T2": 889,
    "T3": 600,
    "T4": 53,
    "T5": 495,
    "T6": 700,
    "T7": 400,
    "T8": 134,
    "T9": 1500,
}

# T4 diagnosis families beyond the index diseases (ICD prefixes by version); index diseases use
# clinlib.data.vocab.INDEX_DISEASE_ICD.
T4_EXTRA_FAMILIES: dict[str, dict[int, tuple[str, ...]]] = {
    "hyperkalemia": {9: ("2767",), 10: ("E875",)},
    "anemia": {9: ("285",), 10: ("D63", "D64")},
    "hyponatremia": {9: ("2761",), 10: ("E871",)},
}
# Which side of the reference range counts as evidence for each T4 family.
T4_DIRECTION: dict[str, str] = {
    "diabetes": "high",
    "ckd": "high",
    "cad": "high",
    "hyperkalemia": "high",
    "anemia": "low",
    "hyponatremia": "low",
}
T4_MIN_EVIDENCE = 1
T4_MAX_EVIDENCE = 4

# --------------------------------------------------------------------------- extended set
# T10 temporal ordering (LongMedBench "Temporal reasoning", Table 3; docs/design.md "T10").
# Visit cloze: T10_CLOZE_MIN..T10_CLOZE_MAX intervention events (medication / procedure) of one
# visit, each at a distinct minute, are removed and listed shuffled with their timestamps.
# Visit sorting / joint sorting: T10_WINDOW consecutive visits (joint: 2 x T10_WINDOW clips).
# Gold: the item letters in time order (cloze: event time; sorting: admission time; joint:
# admission time, then the admission half before the discharge half).
# Visit sorting over notes (a labelled variant beside visit sorting): the same windows, each
# visit as its SYNTHETIC discharge note (clinlib.data.sources.notes) with the dates removed,
# as the seed sorts "visit summaries N" from its note memory.
T10_SUBTYPES = ("visit_cloze", "visit_sorting", "joint_sorting", "visit_sorting_notes")
T10_INTERVENTION_KINDS = ("medication", "procedure")
T10_CLOZE_MIN = 3
T10_CLOZE_MAX = 6
T10_WINDOW = 5
T10_MAX_VISIT_EVENTS = 150  # cloze visits longer than this are skipped (prompt size)
T10_HALVES = ("admission", "discharge")

# Extended tasks' counts on the paper-sized profiles are declared in each task's spec
# (``TaskSpec.counts["paper"]``: 300 per T10 subtype; T1R 300 events asked both ways; T11 300
# per subtype; T1F 300 rejections; T7R 200 drugs asked both ways); never part of PAPER_COUNTS,
# so the paper's 6,271-question set is unaffected. EXTENDED_COUNTS is their view.


def __getattr__(name: str):
    if name == "EXTENDED_COUNTS":
        return {s.name: s.counts["paper"] for s in specs("extended")}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# T11 decisions (LongMedBench "Task 3" long-horizon decisions, T3-N / T3-A / T3-D;
# docs/design.md "T11"; the spec is clinlib.tasks.generators.t11's docstring). A visit's event
# stream is cut at a sampled ground-truth action; the working context is the visit before the
# cut, the memory the visits before the current one. Next action / argument are scored with
# the time decay of clinlib.tasks.answers.decision: an option matching an action at the cut's
# minute scores 1, one matching an action T11_HORIZON_MIN later at most scores
# 1 - delta / T11_HORIZON_MIN (linear, 0 beyond the horizon; the seed's "E_24h").
T11_SUBTYPES = ("next_action", "argument", "discharge")
T11_ACTION_KINDS = ("lab", "medication", "procedure")
T11_CUT_KINDS = ("lab", "medication")  # minute-resolution times (procedures: a date only)
T11_HORIZON_MIN = 24 * 60
T11_DISCHARGE_MIN = 6 * 60
T11_ARGUMENT_OPTIONS = 4
T11_MIN_CONTEXT_EVENTS = 3  # the working context holds at least this many events
T11_DECAY_DECIMALS = 4
