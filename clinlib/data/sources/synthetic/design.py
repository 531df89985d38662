"""Population design of the SYNTHETIC hosp generator: modes, id ranges, categories, lab groups,
drug and code lists (paper §3 "Cohort"; Appendix C.1 cohort statistics).

Every constant the table families share lives here, so each family module reads one source.
"""

from __future__ import annotations

import numpy as np

from clinlib.data.sources import synthetic_vocab as sv
from clinlib.data.vocab import INDEX_DISEASES

FORMATS: tuple[str, ...] = ("csv.gz", "parquet")
MANIFEST_NAME = "synthetic_manifest.parquet"


class SyntheticConfigError(ValueError):
    """An argument of the synthetic generator is out of range or of the wrong kind."""


MODES: tuple[str, ...] = (
    "index",
    "single_admission",
    "no_admission",
    "readmission",
    "few_labs",
    "few_rx",
    "one_index_code",
    "no_index_code",
)
MODE_SHARES: tuple[float, ...] = (0.36, 0.22, 0.08, 0.06, 0.06, 0.06, 0.08, 0.08)

# The cohort rules each mode fails by construction (every other rule it passes).
COHORT_RULES: tuple[str, ...] = ("admissions", "panel_labs", "prescriptions", "index_codes")
MODE_FAILS: dict[str, frozenset[str]] = {
    "index": frozenset(),
    "single_admission": frozenset({"admissions"}),
    "no_admission": frozenset({"admissions", "prescriptions", "index_codes"}),
    "readmission": frozenset({"admissions"}),
    "few_labs": frozenset({"panel_labs"}),
    "few_rx": frozenset({"prescriptions"}),
    "one_index_code": frozenset({"index_codes"}),
    "no_index_code": frozenset({"index_codes"}),
}

(INDEX, SINGLE, NO_ADM, READMIT, FEW_LABS, FEW_RX, ONE_CODE, NO_CODE) = range(len(MODES))
DM, HTN, CKD, CAD = (INDEX_DISEASES.index(d) for d in ("diabetes", "hypertension", "ckd", "cad"))

# Comorbidity given the designated disease (rows/cols: diabetes, hypertension, CKD, CAD).
COMORBIDITY_P = np.array(
    [
        [1.00, 0.70, 0.25, 0.30],
        [0.30, 1.00, 0.20, 0.30],
        [0.45, 0.85, 1.00, 0.30],
        [0.35, 0.75, 0.20, 1.00],
    ]
)
BACKGROUND_P = np.array([0.15, 0.35, 0.06, 0.10])

# Chronic non-index comorbidities: (name, base prevalence, extra if CAD or diabetes).
COMORBIDITIES: tuple[tuple[str, float, float], ...] = (
    ("hyperlipidemia", 0.25, 0.45),
    ("afib", 0.10, 0.06),
    ("gerd", 0.20, 0.0),
    ("depression", 0.15, 0.0),
    ("tobacco", 0.12, 0.04),
    ("tobacco_history", 0.18, 0.06),
    ("hypothyroidism", 0.10, 0.0),
    ("osa", 0.07, 0.04),
    ("copd", 0.09, 0.03),
    ("obesity", 0.18, 0.12),
)

# Id ranges: each chunk owns [first_patient * budget, (first_patient + chunk) * budget).
SUBJECT_ID_BASE = 10_000_000
HADM_ID_BASE = 20_000_000
HADM_PER_PATIENT = 100  # > MAX_ADMISSIONS, so hadm ranges can never collide
LABEVENTS_PER_PATIENT = 4_000
SPECIMENS_PER_PATIENT = 1_500
RX_PER_PATIENT = 1_000
MAX_ADMISSIONS = 93  # the paper's cohort maximum (Appendix C.1)
MAX_PATIENTS = 500_000  # keeps every id inside INTEGER (int32)

DAY_S = 86_400
HOUR_S = 3_600
YEAR_DAYS = 365.25
T_BASE = int(np.datetime64("2100-01-01T00:00:00", "s").astype(np.int64))

ADMISSION_TYPES: tuple[str, ...] = (
    "EW EMER.",
    "EU OBSERVATION",
    "OBSERVATION ADMIT",
    "URGENT",
    "DIRECT EMER.",
    "DIRECT OBSERVATION",
    "ELECTIVE",
    "SURGICAL SAME DAY ADMISSION",
    "AMBULATORY OBSERVATION",
)
# Admission-type probabilities by admission class: elective cath, ACS/sepsis, other acute, none.
ADMISSION_TYPE_P = np.array(
    [
        [0, 0, 0, 0, 0, 0, 0.6, 0.4, 0],
        [0.8, 0, 0, 0.1, 0.1, 0, 0, 0, 0],
        [0.6, 0.15, 0.1, 0.1, 0.05, 0, 0, 0, 0],
        [0.35, 0.1, 0.1, 0.1, 0.05, 0.05, 0.15, 0.05, 0.05],
    ]
)
ED_TYPES = np.array([True, True, True, False, False, False, False, False, False])
# admission_location by admission type (MIMIC-IV values).
ADMISSION_LOCATIONS: tuple[str, ...] = (
    "EMERGENCY ROOM",
    "PHYSICIAN REFERRAL",
    "TRANSFER FROM HOSPITAL",
    "CLINIC REFERRAL",
    "WALK-IN/SELF REFERRAL",
    "PROCEDURE SITE",
)
ADMISSION_LOCATION_P = np.array(
    [
        [1, 0, 0, 0, 0, 0],
        [1, 0, 0, 0, 0, 0],
        [0.9, 0, 0, 0, 0.1, 0],
        [0, 0.3, 0.6, 0.1, 0, 0],
        [0, 0.6, 0, 0.3, 0.1, 0],
        [0, 0.6, 0, 0.4, 0, 0],
        [0, 0.9, 0, 0.1, 0, 0],
        [0, 0.8, 0, 0, 0, 0.2],
        [0, 0.3, 0, 0.2, 0, 0.5],
    ]
)
DISCHARGE_LOCATIONS: tuple[str, ...] = (
    "HOME",
    "HOME HEALTH CARE",
    "SKILLED NURSING FACILITY",
    "REHAB",
    "CHRONIC/LONG TERM ACUTE CARE",
    "AGAINST ADVICE",
    "DIED",
)
DISCHARGE_LOCATION_P = np.array([0.52, 0.26, 0.12, 0.05, 0.02, 0.01, 0.0])
INSURANCES: tuple[str, ...] = ("Medicare", "Medicaid", "Private", "Other", "No charge")
LANGUAGES: tuple[str, ...] = (
    "English",
    "Spanish",
    "Russian",
    "Chinese",
    "Portuguese",
    "Haitian",
    "Other",
)
LANGUAGE_P = np.array([0.88, 0.045, 0.02, 0.02, 0.01, 0.01, 0.015])
MARITAL: tuple[str, ...] = ("MARRIED", "SINGLE", "WIDOWED", "DIVORCED")
MARITAL_P = np.array([0.45, 0.3, 0.13, 0.08, 0.04])  # last = NULL
RACES: tuple[str, ...] = (
    "WHITE",
    "BLACK/AFRICAN AMERICAN",
    "WHITE - OTHER EUROPEAN",
    "HISPANIC/LATINO - PUERTO RICAN",
    "HISPANIC OR LATINO",
    "ASIAN",
    "ASIAN - CHINESE",
    "WHITE - RUSSIAN",
    "BLACK/CAPE VERDEAN",
    "OTHER",
    "UNKNOWN",
)
RACE_P = np.array([0.6, 0.14, 0.03, 0.03, 0.03, 0.02, 0.02, 0.02, 0.01, 0.04, 0.06])
ANCHOR_YEAR_GROUPS: tuple[str, ...] = (
    "2008 - 2010",
    "2011 - 2013",
    "2014 - 2016",
    "2017 - 2019",
    "2020 - 2022",
)
PRIORITIES: tuple[str, ...] = ("ROUTINE", "STAT")

# Lab comments: rare, and written with commas and double quotes so CSV quoting is exercised.
LAB_COMMENTS: tuple[str, ...] = (
    "VERIFIED BY REPLICATE ANALYSIS.",
    'HEMOLYSIS FALSELY ELEVATES THIS RESULT, "MODERATE HEMOLYSIS" NOTED.',
    "NOTIFIED ___ AT 0642, READ BACK.",
    '"CRITICAL VALUE" CALLED TO ___, CONFIRMED BY READ BACK.',
)

# Specimen groups: items always reported, then optional items with their inclusion groups.
GROUPS: tuple[str, ...] = ("chem", "cbc", "coag", "a1c", "lipid", "trop", "bnp", "lactate", "mini")
(G_CHEM, G_CBC, G_COAG, G_A1C, G_LIPID, G_TROP, G_BNP, G_LACT, G_MINI) = range(len(GROUPS))
GROUP_ITEMS: dict[int, tuple[str, ...]] = {
    G_CHEM: (
        "sodium",
        "potassium",
        "chloride",
        "bicarbonate",
        "bun",
        "creatinine",
        "glucose",
        "anion_gap",
        "calcium",
        "magnesium",
        "phosphate",
        "albumin",
        "alt",
        "ast",
        "alk_phos",
        "bilirubin",
    ),
    G_CBC: (
        "wbc",
        "rbc",
        "hemoglobin",
        "hematocrit",
        "mcv",
        "mch",
        "mchc",
        "rdw",
        "platelets",
    ),
    G_COAG: ("pt", "inr", "ptt"),
    G_A1C: ("hba1c",),
    G_LIPID: ("total_cholesterol", "hdl", "triglycerides", "ldl_calc", "ldl_measured"),
    G_TROP: ("troponin_t",),
    G_BNP: ("ntprobnp",),
    G_LACT: ("lactate",),
    G_MINI: ("creatinine", "potassium", "sodium", "glucose"),
}
# Draw kinds.
K_DAY0, K_DAILY, K_SERIAL, K_ED, K_OUTPT, K_MINI, K_COAG = range(7)
ITEM_KEYS: tuple[str, ...] = tuple(sv.LAB_ITEMS)
ITEM_CODE: dict[str, int] = {k: i for i, k in enumerate(ITEM_KEYS)}

# Chronic drugs (started once, continued at later admissions) and their effect time constants.
CHRONIC_DRUGS: tuple[str, ...] = (
    "metformin",
    "glipizide",
    "insulin_glargine",
    "lisinopril",
    "hydrochlorothiazide",
    "amlodipine",
    "atorvastatin",
    "aspirin",
    "clopidogrel",
    "metoprolol",
    "furosemide",
    "sodium_bicarbonate",
    "epoetin",
)
EFFECT_TAU_DAYS: dict[str, float] = {
    "metformin": 30.0,
    "glipizide": 30.0,
    "insulin_glargine": 21.0,
    "lisinopril": 7.0,
    "hydrochlorothiazide": 10.0,
    "furosemide": 5.0,
    "sodium_bicarbonate": 10.0,
    "epoetin": 40.0,
    "atorvastatin": 30.0,
}
# Per-admission background medications and their probabilities.
BACKGROUND_DRUGS: tuple[tuple[str, float], ...] = (
    ("acetaminophen", 0.72),
    ("heparin_sc", 0.6),
    ("pantoprazole", 0.42),
    ("docusate", 0.42),
    ("senna", 0.33),
    ("flush", 0.45),
    ("ondansetron", 0.18),
)
DRUG_CODE: dict[str, int] = {k: i for i, k in enumerate(sv.DRUG_KEYS)}
DX_KEYS: tuple[str, ...] = tuple(sv.DX_PAIRS)
DX_CODE: dict[str, int] = {k: i for i, k in enumerate(DX_KEYS)}
PX_KEYS: tuple[str, ...] = tuple(sv.PX_GROUPS)
PX_CODE: dict[str, int] = {k: i for i, k in enumerate(PX_KEYS)}
