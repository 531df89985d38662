"""Clinical vocabulary shared by every stage: the 18-lab panel, the index-disease ICD code
sets and the event kinds (paper §3 "Cohort", Fig. 2 stages 1–2; docs/real-data.md).

The itemids, units and ICD prefixes are MIMIC-IV's own, so the same constants select events
from the synthetic dataset and from a real MIMIC-IV hosp directory.
"""

from __future__ import annotations

from dataclasses import dataclass

INDEX_DISEASES: tuple[str, ...] = ("diabetes", "hypertension", "ckd", "cad")

# ICD prefixes per index disease and ICD version (sources: mimic-code charlson.sql / Quan 2005,
# Quan Elixhauser, AHRQ Elixhauser ICD-10-CM; see docs/real-data.md).
# Hypertensive CKD (ICD-9 403/404, ICD-10 I12/I13) counts for both hypertension and CKD, as in
# Charlson's renal set; the cohort assigns each patient one primary disease.
INDEX_DISEASE_ICD: dict[str, dict[int, tuple[str, ...]]] = {
    "diabetes": {9: ("249", "250"), 10: ("E08", "E09", "E10", "E11", "E13")},
    "hypertension": {
        9: ("401", "402", "403", "404", "405"),
        10: ("I10", "I11", "I12", "I13", "I15", "I16"),
    },
    "ckd": {9: ("585", "586", "403", "404"), 10: ("N18", "N19", "I12", "I13")},
    "cad": {9: ("410", "411", "412", "413", "414"), 10: ("I20", "I21", "I22", "I23", "I24", "I25")},
}


def index_diseases_for(icd_code: str, icd_version: int) -> list[str]:
    """Index diseases whose code set contains ``icd_code`` (prefix match, codes read as text)."""
    code = str(icd_code).strip().upper()
    return [
        d
        for d, by_version in INDEX_DISEASE_ICD.items()
        if any(code.startswith(p) for p in by_version.get(int(icd_version), ()))
    ]


@dataclass(frozen=True)
class Lab:
    """One entry of the fixed lab panel.

    Attributes:
        key: short canonical name used in events and questions.
        label: display name (MIMIC d_labitems label of the preferred itemid).
        itemids: MIMIC-IV itemids, in clinical priority order (first = preferred source).
        unit: canonical unit (labevents.valueuom).
        ref_low / ref_high: typical reference range (None = one-sided).
        decimals: decimals used when the value is verbalised.
    """

    key: str
    label: str
    itemids: tuple[int, ...]
    unit: str
    ref_low: float | None
    ref_high: float | None
    decimals: int


# The fixed 18-lab panel: the basic metabolic panel, CBC core, glycaemic, lipid and cardiac
# markers that the four index diseases move. LDL takes the directly measured itemid over the
# calculated one when both exist (clinical-priority de-duplication, see clinlib.data.events).
LAB_PANEL: tuple[Lab, ...] = (
    Lab("creatinine", "Creatinine", (50912,), "mg/dL", 0.5, 1.2, 1),
    Lab("potassium", "Potassium", (50971,), "mEq/L", 3.3, 5.1, 1),
    Lab("sodium", "Sodium", (50983,), "mEq/L", 133.0, 145.0, 0),
    Lab("glucose", "Glucose", (50931,), "mg/dL", 70.0, 100.0, 0),
    Lab("bun", "Urea Nitrogen", (51006,), "mg/dL", 6.0, 20.0, 0),
    Lab("bicarbonate", "Bicarbonate", (50882,), "mEq/L", 22.0, 32.0, 0),
    Lab("chloride", "Chloride", (50902,), "mEq/L", 96.0, 108.0, 0),
    Lab("anion_gap", "Anion Gap", (50868,), "mEq/L", 8.0, 20.0, 0),
    Lab("calcium", "Calcium, Total", (50893,), "mg/dL", 8.4, 10.3, 1),
    Lab("hemoglobin", "Hemoglobin", (51222,), "g/dL", 11.2, 17.5, 1),
    Lab("hematocrit", "Hematocrit", (51221,), "%", 34.0, 51.0, 1),
    Lab("platelets", "Platelet Count", (51265,), "K/uL", 150.0, 400.0, 0),
    Lab("wbc", "White Blood Cells", (51301,), "K/uL", 4.0, 10.0, 1),
    Lab("hba1c", "% Hemoglobin A1c", (50852,), "%", 4.8, 5.9, 1),
    Lab("ldl", "Cholesterol, LDL, Measured", (50906, 50905), "mg/dL", None, 130.0, 0),
    Lab("total_cholesterol", "Cholesterol, Total", (50907,), "mg/dL", None, 200.0, 0),
    Lab("triglycerides", "Triglycerides", (51000,), "mg/dL", None, 150.0, 0),
    Lab("troponin_t", "Troponin T", (51003,), "ng/mL", None, 0.01, 2),
)

LAB_BY_KEY: dict[str, Lab] = {lab.key: lab for lab in LAB_PANEL}
PANEL_ITEMIDS: dict[int, tuple[str, int]] = {
    itemid: (lab.key, rank) for lab in LAB_PANEL for rank, itemid in enumerate(lab.itemids)
}
"""itemid -> (panel key, priority rank within the entry; 0 is preferred)."""

# Event kinds in the events table (docs/design.md artifact contract).
EVENT_KINDS: tuple[str, ...] = (
    "admission",
    "discharge",
    "lab",
    "medication",
    "diagnosis",
    "procedure",
)

# Event-id prefixes: the id is built from the source record's natural key, never from row
# order, so the same record gets the same id on every run (see clinlib.data.events).
EVENT_ID_PREFIX: dict[str, str] = {
    "admission": "ADM",
    "discharge": "DIS",
    "lab": "LAB",
    "medication": "RX",
    "diagnosis": "DX",
    "procedure": "PX",
}
# Provenance prefix of noise turns (MedMemoryBench §4 "Noise Augmentation"): ``NOISE-GH-<topic>-<n>``
# and ``NOISE-PROXY-<relation>-<n>`` tag sentences of inserted sessions; no event has this prefix.
NOISE_ID_PREFIX = "NOISE"
# Codebook ids (PopMedQA Fig. 8: "#1", "#2", ...): one prefix for the dialogue strategy
# (clinlib.strategies.codebook) and the population renderings (clinlib.tasks.population.render).
CODEBOOK_ID_PREFIX = "#"
# Id prefixes of the injected patient statements (clinlib.tasks.traps.constraints:
# ``TRAPALG-<subject>`` ...): tags in the same format, recognised by the tag grammar; no record
# event has them.
TRAP_STATEMENT_PREFIX: dict[str, str] = {
    "allergy": "TRAPALG",
    "cost": "TRAPCOST",
    "preference": "TRAPPREF",
    "history": "TRAPPMH",
    "medication": "TRAPMED",
}
