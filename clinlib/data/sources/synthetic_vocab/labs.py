"""Lab items of the SYNTHETIC hosp generator: MIMIC-IV ``d_labitems`` itemids with label, fluid
and category, units, reference ranges and reported decimals (paper §3 "Cohort"; Fig. 2 stage 2;
docs/real-data.md). The 18-lab panel's units and ranges come from
:data:`clinlib.data.vocab.LAB_PANEL` (hemoglobin and hematocrit sex-specific); the non-panel
ranges are typical adult ranges.
"""

from __future__ import annotations

from dataclasses import dataclass

from clinlib.data.vocab import LAB_BY_KEY


@dataclass(frozen=True)
class LabItem:
    """One ``d_labitems`` row plus what the generator needs to report a result.

    Attributes:
        itemid: MIMIC-IV itemid.
        label / fluid / category: MIMIC-IV d_labitems columns.
        unit: labevents.valueuom (None for unitless results such as INR).
        ref_low / ref_high: reference range (None = one-sided); for sex-specific analytes the
            male range, see :data:`SEX_SPECIFIC_REF`.
        decimals: decimals of the reported value.
    """

    itemid: int
    label: str
    fluid: str
    category: str
    unit: str | None
    ref_low: float | None
    ref_high: float | None
    decimals: int


def _panel(key: str, itemid: int, label: str, category: str = "Chemistry") -> LabItem:
    lab = LAB_BY_KEY[key]
    return LabItem(
        itemid, label, "Blood", category, lab.unit, lab.ref_low, lab.ref_high, lab.decimals
    )


# Keyed by the generator's analyte name. Panel entries take unit / range / decimals from
# clinlib.data.vocab so there is one source of truth; both LDL itemids are present.
LAB_ITEMS: dict[str, LabItem] = {
    "sodium": _panel("sodium", 50983, "Sodium"),
    "potassium": _panel("potassium", 50971, "Potassium"),
    "chloride": _panel("chloride", 50902, "Chloride"),
    "bicarbonate": _panel("bicarbonate", 50882, "Bicarbonate"),
    "bun": _panel("bun", 51006, "Urea Nitrogen"),
    "creatinine": _panel("creatinine", 50912, "Creatinine"),
    "glucose": _panel("glucose", 50931, "Glucose"),
    "anion_gap": _panel("anion_gap", 50868, "Anion Gap"),
    "calcium": _panel("calcium", 50893, "Calcium, Total"),
    "wbc": _panel("wbc", 51301, "White Blood Cells", "Hematology"),
    "hemoglobin": _panel("hemoglobin", 51222, "Hemoglobin", "Hematology"),
    "hematocrit": _panel("hematocrit", 51221, "Hematocrit", "Hematology"),
    "platelets": _panel("platelets", 51265, "Platelet Count", "Hematology"),
    "hba1c": _panel("hba1c", 50852, "% Hemoglobin A1c"),
    "ldl_calc": _panel("ldl", 50905, "Cholesterol, LDL, Calculated"),
    "ldl_measured": _panel("ldl", 50906, "Cholesterol, LDL, Measured"),
    "total_cholesterol": _panel("total_cholesterol", 50907, "Cholesterol, Total"),
    "triglycerides": _panel("triglycerides", 51000, "Triglycerides"),
    "troponin_t": _panel("troponin_t", 51003, "Troponin T"),
    # Non-panel labs: present in real panels (CBC indices, Mg/Phos, LFTs, coagulation) so the
    # panel filter and the itemid de-duplication have real work to do.
    "magnesium": LabItem(50960, "Magnesium", "Blood", "Chemistry", "mg/dL", 1.6, 2.6, 1),
    "phosphate": LabItem(50970, "Phosphate", "Blood", "Chemistry", "mg/dL", 2.7, 4.5, 1),
    "albumin": LabItem(50862, "Albumin", "Blood", "Chemistry", "g/dL", 3.5, 5.2, 1),
    "ntprobnp": LabItem(50963, "NTproBNP", "Blood", "Chemistry", "pg/mL", None, 177.0, 0),
    "lactate": LabItem(50813, "Lactate", "Blood", "Blood Gas", "mmol/L", 0.5, 2.0, 1),
    "hdl": LabItem(50904, "Cholesterol, HDL", "Blood", "Chemistry", "mg/dL", 40.0, None, 0),
    "alt": LabItem(
        50861, "Alanine Aminotransferase (ALT)", "Blood", "Chemistry", "IU/L", 0.0, 40.0, 0
    ),
    # MIMIC-IV's own label carries the misspelling "Asparate".
    "ast": LabItem(
        50878, "Asparate Aminotransferase (AST)", "Blood", "Chemistry", "IU/L", 0.0, 40.0, 0
    ),
    "alk_phos": LabItem(
        50863, "Alkaline Phosphatase", "Blood", "Chemistry", "IU/L", 35.0, 105.0, 0
    ),
    "bilirubin": LabItem(50885, "Bilirubin, Total", "Blood", "Chemistry", "mg/dL", 0.0, 1.5, 1),
    "rbc": LabItem(51279, "Red Blood Cells", "Blood", "Hematology", "m/uL", 4.6, 6.1, 2),
    "mcv": LabItem(51250, "MCV", "Blood", "Hematology", "fL", 82.0, 98.0, 0),
    "mch": LabItem(51248, "MCH", "Blood", "Hematology", "pg", 26.0, 32.0, 1),
    "mchc": LabItem(51249, "MCHC", "Blood", "Hematology", "g/dL", 31.0, 37.0, 1),
    "rdw": LabItem(51277, "RDW", "Blood", "Hematology", "%", 10.5, 15.5, 1),
    "inr": LabItem(51237, "INR(PT)", "Blood", "Hematology", None, 0.9, 1.1, 1),
    "pt": LabItem(51274, "PT", "Blood", "Hematology", "sec", 9.4, 12.5, 1),
    "ptt": LabItem(51275, "PTT", "Blood", "Hematology", "sec", 25.0, 36.5, 1),
}

# Female reference ranges where they differ from the male ones above (reference doc).
SEX_SPECIFIC_REF: dict[str, tuple[float, float]] = {
    "hemoglobin": (11.2, 15.7),
    "hematocrit": (34.0, 45.0),
    "rbc": (3.9, 5.2),
}
MALE_REF: dict[str, tuple[float, float]] = {
    "hemoglobin": (13.7, 17.5),
    "hematocrit": (40.0, 51.0),
    "rbc": (4.6, 6.1),
}
