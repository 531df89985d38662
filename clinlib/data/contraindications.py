"""Record-derived contraindication traps (MedMemoryBench's introduction: "allergy
histories, medication contraindications, and economic constraints ... embedded ... as
high-priority signals").

A derived trap is a drug order placed while a lab state that contraindicates its class was the
patient's CURRENT state: the latest measurement of the rule's lab at or before the order's start
(no older than the rule's ``max_age_days``) meets the rule's condition. Both facts come from the
hosp tables (labevents, prescriptions) through events.parquet; nothing is invented, so a rule
fires only where the record supports it. One trap per (patient, rule): the first such order.
The synthetic generator plants each rule's shape at a low rate
(:mod:`clinlib.data.sources.synthetic.hazards`) and the dialogue always states a conflict's two
events (:func:`conflict_event_ids`), so every rule can become a question.

The rules live in the data layer so the dialogue (which decides what is told) and the trap tasks
(:mod:`clinlib.tasks.traps.rules`, which re-exports them) read one definition.

The rule set (small and cited; thresholds are the cited ones, the drug lists are whole-word
phrases of :func:`clinlib.data.drugnames.drug_key`):

* ``metformin_low_egfr`` — metformin with eGFR < 30 mL/min/1.73 m² (FDA Drug Safety
  Communication, 8 April 2016: "contraindicated in patients with an eGFR below 30"); eGFR by the
  race-free CKD-EPI 2021 creatinine equation (Inker et al., N Engl J Med 2021;385:1737–49) from
  creatinine, sex and age at the draw (``anchor_age + year - anchor_year``).
* ``potassium_hyperkalaemia`` — a potassium supplement with potassium above the draw's upper
  reference limit (potassium chloride labels: "contraindicated in patients with
  hyperkalemia"); 5.1 mEq/L where the row has no limit (docs: reference ranges).
* ``anticoagulant_thrombocytopenia`` — a therapeutic anticoagulant (heparin flushes excluded)
  with platelets < 50 K/uL (ISTH SSC guidance, Samuelson Bannow et al., J Thromb Haemost
  2018;16:1246–9: full-dose anticoagulation needs platelets >= 50 x 10^9/L).
* ``nephrotoxin_aki`` — a nephrotoxic drug (vancomycin, aminoglycosides, NSAIDs, amphotericin)
  during acute kidney injury by the KDIGO 2012 creatinine criteria (Kidney Int Suppl 2012;2:1–138,
  §2.1.1: a rise >= 0.3 mg/dL within 48 h, or >= 1.5 x the lowest value of the prior 7 days;
  §3.1: avoid nephrotoxic agents).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from clinlib.data.drugnames import drug_key, has_phrase

EGFR_LIMIT = 30.0  # mL/min/1.73 m², FDA 2016 metformin communication
PLATELET_LIMIT = 50.0  # K/uL, ISTH SSC 2018
POTASSIUM_DEFAULT_HIGH = 5.1  # mEq/L, the panel's reference upper limit
KDIGO_ABS_RISE = 0.3  # mg/dL within 48 h
KDIGO_ABS_HOURS = 48
KDIGO_REL_RISE = 1.5  # x the lowest value within 7 days
KDIGO_REL_DAYS = 7


def ckd_epi_2021(creatinine: float, age: float, female: bool) -> float:
    """eGFR (mL/min/1.73 m²) by the race-free CKD-EPI 2021 creatinine equation:
    142 · min(Scr/κ, 1)^α · max(Scr/κ, 1)^-1.200 · 0.9938^age · (1.012 if female),
    κ = 0.7 / 0.9 and α = -0.241 / -0.302 for female / male (Inker et al. 2021)."""
    if not (creatinine > 0) or not math.isfinite(creatinine):
        raise ValueError(f"creatinine must be a positive number, got {creatinine!r}")
    kappa, alpha = (0.7, -0.241) if female else (0.9, -0.302)
    ratio = creatinine / kappa
    egfr = 142.0 * min(ratio, 1.0) ** alpha * max(ratio, 1.0) ** -1.200 * 0.9938**age
    return egfr * (1.012 if female else 1.0)


def kdigo_aki(times: Sequence[pd.Timestamp], values: Sequence[float]) -> list[bool]:
    """Per creatinine value (series in time order): True when it meets the KDIGO 2012
    creatinine criterion against the EARLIER values (rise >= 0.3 mg/dL over the lowest value
    of the prior 48 h, or >= 1.5 x the lowest value of the prior 7 days)."""
    t = np.asarray(pd.to_datetime(pd.Series(list(times))), dtype="datetime64[ns]")
    v = np.asarray(values, dtype=float)
    first_same = np.searchsorted(t, t, side="left")  # values at the same instant are not prior
    lo48 = np.searchsorted(t, t - np.timedelta64(KDIGO_ABS_HOURS, "h"), side="left")
    lo7 = np.searchsorted(t, t - np.timedelta64(KDIGO_REL_DAYS, "D"), side="left")
    out = []
    for i in range(len(v)):
        hi = first_same[i]
        aki = lo48[i] < hi and v[i] - v[lo48[i] : hi].min() >= KDIGO_ABS_RISE - 1e-9
        aki = aki or (lo7[i] < hi and v[i] >= KDIGO_REL_RISE * v[lo7[i] : hi].min() - 1e-9)
        out.append(bool(aki))
    return out


@dataclass(frozen=True)
class Rule:
    """One contraindication rule: a drug class against a lab state.

    Attributes:
        key: rule id.
        drug_class: the class as the dialogue and questions name it.
        phrases: whole-word phrases of :func:`drug_key` that put a drug in the class.
        exclude: phrases that take a drug out again (heparin flush).
        lab: the panel lab label (events.parquet ``label``).
        state: the lab state in words ("eGFR below 30 mL/min/1.73 m²").
        max_age_days: how old the latest measurement may be and still be the current state.
        risk_category: MedMemoryBench's risk category (Appendix, Table 14) the trap probes.
        source: the citation of the threshold.
    """

    key: str
    drug_class: str
    phrases: tuple[str, ...]
    exclude: tuple[str, ...]
    lab: str
    state: str
    max_age_days: float
    risk_category: str
    source: str

    def matches(self, drug: str) -> bool:
        """Whether a recorded drug name falls in the rule's class."""
        key = drug_key(drug)
        if any(has_phrase(key, p) for p in self.exclude):
            return False
        return any(has_phrase(key, p) for p in self.phrases)


RULES: tuple[Rule, ...] = (
    Rule(
        "metformin_low_egfr",
        "metformin",
        ("metformin",),
        (),
        "Creatinine",
        "eGFR below 30 mL/min/1.73 m²",
        90.0,
        "missed_contraindication",
        "FDA Drug Safety Communication 2016-04-08; CKD-EPI 2021 (Inker et al.)",
    ),
    Rule(
        "potassium_hyperkalaemia",
        "potassium supplement",
        ("potassium chloride", "potassium phosphate", "potassium citrate", "k phos"),
        (),
        "Potassium",
        "potassium above the reference range",
        2.0,
        "incorrect_medication_recommendation",
        "potassium chloride labeling: hyperkalemia",
    ),
    Rule(
        "anticoagulant_thrombocytopenia",
        "anticoagulant",
        (
            "heparin",
            "enoxaparin",
            "dalteparin",
            "fondaparinux",
            "warfarin",
            "apixaban",
            "rivaroxaban",
            "dabigatran",
            "argatroban",
            "bivalirudin",
        ),
        ("flush", "lock"),
        "Platelet Count",
        "platelets below 50 K/uL",
        2.0,
        "improper_dosage_adjustment",
        "ISTH SSC 2018 (Samuelson Bannow et al.)",
    ),
    Rule(
        "nephrotoxin_aki",
        "nephrotoxic drug",
        (
            "vancomycin",
            "gentamicin",
            "tobramycin",
            "amikacin",
            "ibuprofen",
            "ketorolac",
            "naproxen",
            "amphotericin",
        ),
        (),
        "Creatinine",
        "acute kidney injury (KDIGO creatinine rise)",
        2.0,
        "missed_contraindication",
        "KDIGO 2012 AKI guideline §2.1.1, §3.1",
    ),
)
RULE_BY_KEY: dict[str, Rule] = {r.key: r for r in RULES}


def _state_checker(rule: Rule, labs: pd.DataFrame, patient: dict | None) -> Callable[[int], bool]:
    """``i -> bool``: whether the i-th measurement (position in ``labs``) is in the state."""
    values = labs["value"].astype(float).tolist()
    if rule.key == "metformin_low_egfr":
        if patient is None:
            return lambda i: False  # no sex / age: eGFR unknown, the rule cannot fire
        female = str(patient["gender"]).upper().startswith("F")
        ages = [
            float(patient["anchor_age"]) + t.year - float(patient["anchor_year"])
            for t in labs["time"]
        ]
        return lambda i: ckd_epi_2021(values[i], ages[i], female) < EGFR_LIMIT
    if rule.key == "potassium_hyperkalaemia":
        highs = [POTASSIUM_DEFAULT_HIGH if pd.isna(h) else float(h) for h in labs["ref_high"]]
        return lambda i: values[i] > highs[i]
    if rule.key == "anticoagulant_thrombocytopenia":
        return lambda i: values[i] < PLATELET_LIMIT
    if rule.key == "nephrotoxin_aki":
        aki = kdigo_aki(list(labs["time"]), values)
        return lambda i: aki[i]
    raise ValueError(f"unknown rule {rule.key!r}")


def derive_traps(
    events: pd.DataFrame,
    patients: pd.DataFrame,
    stated: Callable[[int, str], bool] | None = None,
) -> pd.DataFrame:
    """Every derived trap of the record (module docstring).

    Args:
        events: events.parquet rows (event_id, subject_id, visit_idx, time, kind, label, value,
            ref_high, ...).
        patients: subject_id, gender, anchor_age, anchor_year (hosp ``patients``).
        stated: ``(subject_id, event_id) -> bool``, whether the dialogue states an event; when
            given, a trap is the first conflict whose lab AND order are both stated.

    Returns:
        One row per (patient, rule): subject_id, rule, drug_class, risk_category, lab,
        lab_event_id, lab_value, lab_time, lab_visit_idx, order_event_id, order_drug,
        order_time, order_visit_idx, state, source.
    """
    pts = {int(r["subject_id"]): r for r in patients.to_dict("records")}
    rows = []
    meds = events[events["kind"] == "medication"].sort_values(["subject_id", "time", "event_id"])
    member = {(lab, r.key): r.matches(str(lab)) for lab in meds["label"].unique() for r in RULES}
    labs_all = events[(events["kind"] == "lab") & events["value"].notna()]
    for sid, sub_meds in meds.groupby("subject_id", sort=True):
        sub_labs = labs_all[labs_all["subject_id"] == sid]
        for rule in RULES:
            orders = sub_meds[[member[(lab, rule.key)] for lab in sub_meds["label"]]]
            labs = sub_labs[sub_labs["label"] == rule.lab].sort_values(["time", "event_id"])
            if orders.empty or labs.empty:
                continue
            labs = labs.reset_index(drop=True)
            in_state = _state_checker(rule, labs, pts.get(int(sid)))
            ok = (
                (lambda r: True)
                if stated is None
                else (
                    lambda r, s=int(sid): (
                        stated(s, r["lab_event_id"]) and stated(s, r["order_event_id"])
                    )
                )
            )
            row = next((r for r in _conflicts(rule, orders, labs, in_state) if ok(r)), None)
            if row is not None:
                rows.append({"subject_id": int(sid), **row})
    return pd.DataFrame(rows, columns=TRAP_RULE_COLUMNS)


TRAP_RULE_COLUMNS = [
    "subject_id",
    "rule",
    "drug_class",
    "risk_category",
    "lab",
    "lab_event_id",
    "lab_value",
    "lab_time",
    "lab_visit_idx",
    "order_event_id",
    "order_drug",
    "order_time",
    "order_visit_idx",
    "state",
    "source",
]


def _conflicts(rule: Rule, orders: pd.DataFrame, labs: pd.DataFrame, in_state):
    """Every order of the class placed while the rule's state was current, in time order."""
    times = list(labs["time"])
    stamps = np.asarray(labs["time"], dtype="datetime64[ns]")
    for o in orders.to_dict("records"):
        # the latest measurement at or before the order: the current state
        i = int(np.searchsorted(stamps, np.datetime64(o["time"], "ns"), side="right")) - 1
        if i < 0:
            continue
        if o["time"] - times[i] > pd.Timedelta(days=rule.max_age_days) or not in_state(i):
            continue
        lab = labs.iloc[i]
        yield {
            "rule": rule.key,
            "drug_class": rule.drug_class,
            "risk_category": rule.risk_category,
            "lab": rule.lab,
            "lab_event_id": str(lab["event_id"]),
            "lab_value": float(lab["value"]),
            "lab_time": lab["time"],
            "lab_visit_idx": int(lab["visit_idx"]),
            "order_event_id": str(o["event_id"]),
            "order_drug": str(o["label"]),
            "order_time": o["time"],
            "order_visit_idx": int(o["visit_idx"]),
            "state": rule.state,
            "source": rule.source,
        }


# The rules a dialogue can decide from the record alone (metformin's eGFR needs sex and age).
RECORD_RULES: tuple[Rule, ...] = tuple(r for r in RULES if r.key != "metformin_low_egfr")
_EVENT_COLUMNS = ("event_id", "visit_idx", "time", "kind", "label", "value", "ref_high")


def conflict_event_ids(events: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The lab and order event ids of each record-decidable rule's first conflict
    (:data:`RECORD_RULES`; :func:`derive_traps` without a ``stated`` filter) in ONE patient's
    events — what a clinician's summary must not leave out: a drug given while a lab state
    contraindicated it, and that lab."""
    meds = {str(e.get("label")) for e in events if e.get("kind") == "medication"}
    if not any(r.matches(m) for m in meds for r in RECORD_RULES):
        return frozenset()
    frame = pd.DataFrame([{c: e.get(c) for c in _EVENT_COLUMNS} for e in events])
    frame["subject_id"] = 0
    frame["time"] = pd.to_datetime(frame["time"])
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    frame["ref_high"] = pd.to_numeric(frame["ref_high"], errors="coerce")
    frame = frame[frame["time"].notna() & frame["visit_idx"].notna()]
    none = pd.DataFrame(columns=["subject_id", "gender", "anchor_age", "anchor_year"])
    found = derive_traps(frame, none)
    found = found[found["rule"].isin([r.key for r in RECORD_RULES])]
    return frozenset(map(str, [*found["lab_event_id"], *found["order_event_id"]]))
