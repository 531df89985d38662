"""SYNTHETIC, MIMIC-IV-shaped hosp tables so the kit runs offline end to end (paper §3
"Cohort", Fig. 2 stage 1 "MIMIC-IV 364,627 -> 400"; Appendix C.1 cohort statistics).

This is NOT MIMIC-IV data and contains no record of any real person. It reproduces the shape
of the MIMIC-IV hosp module — table and column names, types and order
(:data:`clinlib.data.schema.HOSP_TABLES`), itemids, ICD-9/ICD-10 codes with their real long titles,
drug names, and the quirks real MIMIC files have — so that the same cohort, event and dialogue
code runs on it and on a credentialed MIMIC-IV directory.

Layout: ``<out_dir>/hosp/<table>.csv.gz`` (PhysioNet's layout; timestamps
``YYYY-MM-DD HH:MM:SS``, dates ``YYYY-MM-DD``, NULL as an empty field, minimal quoting with
doubled quotes) or ``<out_dir>/hosp/<table>.parquet``, plus ``<out_dir>/synthetic_manifest.parquet``
(one row per patient: the generator's design, for tests and attrition checks; never read as data).

Population. Every patient gets one *mode*; the shares are exact within each chunk so the cohort
funnel removes countable numbers (:data:`MODE_SHARES`, :data:`MODE_FAILS`):

=================  =====  ==========================================================
mode               share  design (rule it fails)
=================  =====  ==========================================================
index              0.36   designated index disease (balanced over the four) with
                          realistic comorbidity; heavy-tailed multi-year history (passes all)
single_admission   0.22   one admission, two codes of one index disease (admissions)
no_admission       0.08   outpatient labs only (admissions, prescriptions, codes)
readmission        0.06   exactly two admissions < 7 days apart (admissions)
few_labs           0.06   like index but <= 4 panel lab rows in total (panel labs)
few_rx             0.06   like index but 0 or 1 prescription rows, untreated (prescriptions)
one_index_code     0.08   exactly one index-disease diagnosis row (>= 2 codes)
no_index_code      0.08   no index-disease diagnosis at all (>= 1 code)
=================  =====  ==========================================================

Trajectories. A latent state per patient evolves in continuous time and drives every lab:
HbA1c drifts up 0.2–0.5 %/yr in diabetes (glucose = 28.7 x A1c - 46.7, ADAG), metformin ->
glipizide -> insulin glargine start at the first admission after A1c crosses 7 / 8 / 8.5 and
lower it by 0.8–1.5 / 0.6–1.2 / 1.0–2.0 points (time constant 30 days, ~3 months to full effect);
eGFR declines 1.5–6.5 mL/min/yr in CKD and creatinine follows from the CKD-EPI 2021 equation,
with BUN, potassium and phosphate up, bicarbonate and hemoglobin down; furosemide, sodium
bicarbonate and epoetin start at threshold crossings, hemodialysis below eGFR 10; CAD carries
high LDL until atorvastatin (-35–50 %), ACS admissions with a troponin T curve peaking at
0.05–2 ng/mL, catheterisation / PCI codes and aspirin + clopidogrel + metoprolol; lisinopril
raises potassium (+0.2–0.4) and creatinine (~10 %), hydrochlorothiazide lowers sodium (2–4)
and potassium (0.3–0.5). Every medication effect is zero until the documented starttime of the
drug's first prescription row. Intercurrent infection, AKI and sepsis perturb the relevant labs
within an admission; diagnoses that follow from labs (hyperkalemia, anemia in CKD, ...) are
coded from the reported values. Values are rounded as a lab reports them and flagged
``abnormal`` exactly when outside the row's reference range.

Calendar and quirks. Dates are shifted into 2110-2200 as in MIMIC; each patient has a hidden
real start year (which sets ``anchor_year_group``), and stays before the patient's shifted
1 October 2015 are coded in ICD-9, later ones in ICD-10. About a quarter of labevents rows have
no hadm_id (outpatient and emergency-department draws, and ~1.5 % of draws inside a stay);
a few values are masked as ``___`` with a valid valuenum; troponin T below the assay limit reads
``<0.01`` with no valuenum; rare comments carry commas and double quotes; ``dose_val_rx`` has
ranges such as ``1-2``; ``ndc`` is ``0`` for sliding-scale insulin and flushes. Real MIMIC-IV
prescription and emar shapes — MAIN / BASE / ADDITIVE rows sharing a ``pharmacy_id``, missing
doses and hadm_ids, results only in ``comments``, qualified drug names, an ``emar`` table —
come from :mod:`clinlib.data.sources.synthetic_shapes` on a separate random stream, with their
real-world shares documented there.

Engineering. Chunks of ``chunk_patients`` patients are generated with vectorised numpy from
``np.random.default_rng([seed, chunk_idx])`` and disjoint per-chunk id ranges, so a chunk never
depends on the ones before it, and appended to the outputs (parquet row groups; one gzip stream
per CSV with ``mtime=0`` and no file name), so memory is bounded at any size and the same
(n_patients, seed, chunk_patients) gives byte-identical files. The hosp folder is written into a
temporary sibling and renamed into place at the end.
"""

from __future__ import annotations

import gzip
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from clinlib.core.config import profile_sizes, raw_hosp_dir, resolve_profile
from clinlib.core.io import atomic_path
from clinlib.data.schema import HOSP_TABLES, OPTIONAL_HOSP_TABLES
from clinlib.data.sources import synthetic_shapes as shp
from clinlib.data.sources import synthetic_vocab as sv
from clinlib.data.vocab import INDEX_DISEASES

log = logging.getLogger(__name__)

FORMATS: tuple[str, ...] = ("csv.gz", "parquet")
MANIFEST_NAME = "synthetic_manifest.parquet"

# --------------------------------------------------------------------------- errors, types


class SyntheticConfigError(ValueError):
    """An argument of the synthetic generator is out of range or of the wrong kind."""


ARROW_TYPES: dict[str, pa.DataType] = {
    "INTEGER": pa.int32(),
    "SMALLINT": pa.int16(),
    "VARCHAR": pa.string(),
    "DOUBLE": pa.float64(),
    "REAL": pa.float32(),
    "TIMESTAMP": pa.timestamp("us"),
    "DATE": pa.date32(),
}


# Tables the generator writes: the kit's hosp tables plus emar (read only by the MEDS fixture).
WRITTEN_TABLES: dict[str, dict[str, str]] = {**HOSP_TABLES, **OPTIONAL_HOSP_TABLES}


def arrow_schema(table: str) -> pa.Schema:
    """The arrow schema of a hosp table (column order and types of ``HOSP_TABLES``).

    Args:
        table: hosp table name, e.g. ``"labevents"``.

    Returns:
        A ``pyarrow.Schema``.
    """
    if table not in WRITTEN_TABLES:
        raise SyntheticConfigError(
            f"unknown hosp table {table!r}; known: {', '.join(WRITTEN_TABLES)}"
        )
    return pa.schema([(c, ARROW_TYPES[t]) for c, t in WRITTEN_TABLES[table].items()])


# --------------------------------------------------------------------------- population design

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

_DAY = 86_400
_HOUR = 3_600
_YEAR_DAYS = 365.25
_T_BASE = int(np.datetime64("2100-01-01T00:00:00", "s").astype(np.int64))

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

# --------------------------------------------------------------------------- small helpers


def _exact_labels(rng: np.random.Generator, n: int, shares) -> np.ndarray:
    """``n`` labels whose counts follow ``shares`` exactly (largest remainder), shuffled."""
    shares = np.asarray(shares, dtype=float)
    raw = shares / shares.sum() * n
    counts = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: n - counts.sum()]] += 1
    return rng.permutation(np.repeat(np.arange(len(shares)), counts))


def _choose(rng: np.random.Generator, probs, size: int) -> np.ndarray:
    """Categorical draws from one probability vector."""
    cum = np.cumsum(np.asarray(probs, dtype=float))
    return np.minimum(np.searchsorted(cum / cum[-1], rng.random(size), side="right"), len(cum) - 1)


def _choose_by(rng: np.random.Generator, table: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Categorical draws where row ``cls[i]`` of ``table`` gives draw i's probabilities."""
    cum = np.cumsum(table, axis=1)
    cum = cum / cum[:, -1:]
    u = rng.random(cls.size)
    return np.minimum((u[:, None] >= cum[cls]).sum(axis=1), table.shape[1] - 1)


def _uniform(rng: np.random.Generator, lo, hi, size: int) -> np.ndarray:
    return lo + (np.asarray(hi) - lo) * rng.random(size)


def _lognoise(rng: np.random.Generator, sigma: float, size: int) -> np.ndarray:
    return np.exp(sigma * rng.standard_normal(size))


def _minute(t: np.ndarray) -> np.ndarray:
    """Seconds truncated to the whole minute (MIMIC times have minute resolution)."""
    return (np.asarray(t, dtype=np.int64) // 60) * 60


def _rank_in_sorted_groups(groups: np.ndarray) -> np.ndarray:
    """0-based position of each element within its run of equal values (input sorted)."""
    if groups.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.r_[0, np.flatnonzero(np.diff(groups) != 0) + 1]
    lengths = np.diff(np.r_[starts, groups.size])
    return np.arange(groups.size) - np.repeat(starts, lengths)


def _year_start_s(years: np.ndarray) -> np.ndarray:
    """Epoch seconds of 1 January of each (shifted) year."""
    return (
        (np.asarray(years) - 1970).astype("datetime64[Y]").astype("datetime64[s]").astype(np.int64)
    )


def _month_start_s(years: np.ndarray, month: int) -> np.ndarray:
    """Epoch seconds of the first day of ``month`` (1-12) in each year."""
    months = (np.asarray(years, dtype=np.int64) - 1970) * 12 + (month - 1)
    return months.astype("datetime64[M]").astype("datetime64[s]").astype(np.int64)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def _masked(value, mask: np.ndarray) -> np.ndarray:
    """``value[mask]`` for a per-row array, or the scalar repeated, as int64."""
    if np.ndim(value):
        return np.asarray(value, dtype=np.int64)[mask]
    return np.full(int(mask.sum()), value, dtype=np.int64)


def _cat(parts: list[np.ndarray], dtype) -> np.ndarray:
    """Concatenate (an empty list gives an empty array of ``dtype``)."""
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


@lru_cache(maxsize=1)
def _providers() -> np.ndarray:
    """A fixed pool of MIMIC-style provider ids (``P`` + 5 characters)."""
    rng = np.random.default_rng(20_240_601)
    alphabet = np.array(list("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    chars = alphabet[rng.integers(0, alphabet.size, size=(4000, 5))]
    return np.unique(np.array(["P" + "".join(row) for row in chars]))


def _creatinine_from_egfr(egfr: np.ndarray, female: np.ndarray, age: np.ndarray) -> np.ndarray:
    """Serum creatinine (mg/dL) that gives ``egfr`` under the CKD-EPI 2021 equation.

    eGFR = 142 * min(Scr/k, 1)^a * max(Scr/k, 1)^-1.200 * 0.9938^age * 1.012 [female],
    with k = 0.7 / 0.9 and a = -0.241 / -0.302 (female / male), solved for Scr.
    """
    kappa = np.where(female, 0.7, 0.9)
    alpha = np.where(female, -0.241, -0.302)
    base = 142.0 * 0.9938 ** np.clip(age, 18, 100) * np.where(female, 1.012, 1.0)
    ratio = egfr / base
    above = ratio <= 1.0  # Scr >= kappa
    return np.where(above, kappa * ratio ** (-1 / 1.2), kappa * ratio ** (1 / alpha))


# --------------------------------------------------------------------------- chunk: patients


def _population(rng: np.random.Generator, n: int) -> SimpleNamespace:
    """Patient-level design: mode, diseases, demographics, timeline and latent parameters."""
    p = SimpleNamespace(n=n)
    p.mode = _exact_labels(rng, n, MODE_SHARES).astype(np.int8)
    p.female = rng.random(n) < 0.46

    # Designated disease: balanced within each mode that has one.
    des = np.full(n, -1, dtype=np.int8)
    for m in (INDEX, FEW_LABS, FEW_RX, READMIT, ONE_CODE):
        idx = np.flatnonzero(p.mode == m)
        des[idx] = _exact_labels(rng, idx.size, (1, 1, 1, 1))
    idx = np.flatnonzero(p.mode == SINGLE)
    # One admission can carry two codes of diabetes, CKD or CAD, not of hypertension alone.
    des[idx] = np.array([DM, CKD, CAD])[_exact_labels(rng, idx.size, (1, 1, 1))]
    p.designated = des
    has = des >= 0
    flags = np.zeros((n, 4), dtype=bool)
    flags[np.flatnonzero(has), des[has]] = True
    comorbid = rng.random((n, 4)) < COMORBIDITY_P[np.maximum(des, 0)]
    flags |= comorbid & (has & (p.mode != ONE_CODE))[:, None]
    bg = rng.random((n, 4)) < BACKGROUND_P
    flags[p.mode == NO_ADM] = bg[p.mode == NO_ADM]
    flags[(p.mode == SINGLE) & (des == CKD), HTN] = True  # coded as hypertensive CKD + N18
    p.flags = flags
    p.dm, p.htn, p.ckd, p.cad = flags[:, DM], flags[:, HTN], flags[:, CKD], flags[:, CAD]
    p.hf = rng.random(n) < np.where(p.cad, 0.25, np.where(p.htn, 0.15, 0.03))
    p.neuro = p.dm & (rng.random(n) < 0.25)
    p.retino = p.dm & (rng.random(n) < 0.15)
    single_dm = (p.mode == SINGLE) & (des == DM)
    p.neuro |= single_dm
    p.retino |= single_dm
    risk = p.cad | p.dm
    p.comorb = np.column_stack(
        [rng.random(n) < base + extra * risk for _, base, extra in COMORBIDITIES]
    )

    # Demographics.
    age = np.where(has, rng.normal(66, 11, n), rng.normal(55, 18, n))
    age = np.clip(np.rint(age), 18, 95).astype(np.int64)
    p.anchor_age = np.where(age > 89, 91, age)  # MIMIC top-codes ages over 89 as 91
    p.age0 = age.astype(float)
    p.insurance = _choose_by(
        rng,
        np.array([[0.2, 0.25, 0.42, 0.1, 0.03], [0.78, 0.08, 0.1, 0.04, 0.0]]),
        (age >= 65).astype(np.int64),
    )
    p.language = _choose(rng, LANGUAGE_P, n)
    p.marital = _choose(rng, MARITAL_P, n)
    p.race = _choose(rng, RACE_P, n)

    # Admissions and span.
    n_adm = np.zeros(n, dtype=np.int64)
    m = p.mode
    idx = np.flatnonzero(m == INDEX)
    # Heavy tail: median 10, mean ~16, max 93 as in the paper's cohort (Appendix C.1); the
    # lognormal is truncated (redrawn above the maximum) rather than clipped, so no pile-up.
    draws = rng.lognormal(np.log(10.2), 1.15, idx.size)
    while (over := draws >= MAX_ADMISSIONS + 0.5).any():
        draws[over] = rng.lognormal(np.log(10.2), 1.15, int(over.sum()))
    n_adm[idx] = np.maximum(np.rint(draws), 2)
    idx = np.flatnonzero(np.isin(m, (FEW_LABS, FEW_RX, ONE_CODE, NO_CODE)))
    n_adm[idx] = np.minimum(1 + rng.geometric(0.45, idx.size), 8)
    n_adm[m == SINGLE] = 1
    n_adm[m == READMIT] = 2
    p.n_adm = n_adm
    span_years = np.where(
        m == INDEX,
        np.clip(rng.lognormal(np.log(1.0 + 0.45 * n_adm**0.8), 0.5), 0.25, 13.0),
        np.clip(rng.lognormal(np.log(1.5), 0.7), 0.1, 8.0),
    )
    p.span_days = span_years * _YEAR_DAYS

    # Shifted calendar: anchor_year in 2110-2190; the real start year (hidden, as in MIMIC)
    # fixes anchor_year_group and where the ICD-9 -> ICD-10 switch (1 Oct 2015) falls.
    room = np.maximum(np.floor(2022 - 2008 - span_years), 0) + 1
    real_start = 2008 + np.floor(rng.random(n) * room).astype(np.int64)
    p.anchor_year = rng.integers(2110, 2191, n)
    p.anchor_group = np.minimum((real_start - 2008) // 3, len(ANCHOR_YEAR_GROUPS) - 1)
    shift = p.anchor_year - real_start
    p.icd10_from = _month_start_s(2015 + shift, 10)
    p.year0 = _year_start_s(p.anchor_year)
    p.t0 = _minute(p.year0 + rng.random(n) * 365 * _DAY)

    # Latent clinical parameters.

    def u(lo: float, hi: float) -> np.ndarray:
        return _uniform(rng, lo, hi, n)

    pre = rng.random(n) < 0.15
    p.a1c0 = np.where(p.dm, u(6.3, 8.6), np.where(pre, u(5.7, 6.3), u(4.8, 5.6)))
    p.a1c_drift = np.where(p.dm, u(0.2, 0.5), u(0.0, 0.04))  # % per year
    p.e_met, p.e_gli, p.e_ins = u(0.8, 1.5), u(0.6, 1.2), u(1.0, 2.0)
    healthy = np.clip(108 - 0.75 * (p.age0 - 30) + rng.normal(0, 10, n), 55, 125)
    p.egfr0 = np.where(p.ckd, u(22, 75), healthy)
    p.egfr_rate = np.where(p.ckd, u(1.5, 6.5), u(0.3, 1.2) + 0.8 * p.dm)  # mL/min/yr
    p.bun_ratio = u(11, 18)
    p.k0 = rng.normal(4.1, 0.2, n)
    p.na0 = rng.normal(139.5, 1.5, n)
    p.hco3_0 = rng.normal(25.5, 1.1, n)
    p.ag0 = rng.normal(12.0, 1.2, n)
    p.ca0 = rng.normal(9.3, 0.25, n)
    p.alb0 = rng.normal(4.0, 0.3, n)
    p.hb0 = np.where(p.female, rng.normal(13.3, 0.9, n), rng.normal(14.8, 0.9, n))
    p.mchc0 = rng.normal(33.3, 0.7, n)
    p.mcv0 = rng.normal(90, 4, n)
    p.rdw0 = rng.normal(13.4, 0.8, n) + 0.8 * p.ckd
    p.plt0 = np.clip(rng.normal(250, 55, n), 130, 450)
    p.wbc0 = np.clip(rng.normal(7.2, 1.5, n), 3.8, 11.5)
    p.ldl0 = np.where(p.cad, u(125, 195), np.where(p.dm, u(95, 165), u(70, 160)))
    p.hdl0 = np.clip(np.where(p.female, rng.normal(55, 11, n), rng.normal(44, 9, n)), 25, 95)
    p.tg0 = np.where(p.dm, u(120, 320), u(70, 210))
    p.bnp0 = np.where(p.hf, np.exp(u(np.log(600), np.log(4000))), u(20, 200) * (1 + p.age0 / 100))
    p.alt0, p.ast0 = rng.lognormal(np.log(22), 0.3, n), rng.lognormal(np.log(24), 0.3, n)
    p.alp0, p.bili0 = rng.normal(75, 18, n), rng.lognormal(np.log(0.6), 0.3, n)
    p.pt0 = rng.normal(11.6, 0.6, n)
    p.e_lis_k, p.e_lis_cr = u(0.2, 0.4), u(0.08, 0.12)
    p.e_hctz_na, p.e_hctz_k = u(2.0, 4.0), u(0.3, 0.5)
    p.e_fur_k, p.e_bic, p.e_epo, p.e_stat = u(0.3, 0.5), u(2.0, 4.0), u(1.0, 2.0), u(0.35, 0.5)
    p.mini_k = rng.integers(0, 5, n)  # few_labs: panel items in the single small draw
    return p


# --------------------------------------------------------------------------- chunk: admissions


def _admissions(rng: np.random.Generator, p: SimpleNamespace) -> SimpleNamespace:
    """Admission timeline, acute events, types, deaths (one row per admission)."""
    a = SimpleNamespace()
    n_adm = p.n_adm
    A = int(n_adm.sum())
    a.n = A
    a.pat = np.repeat(np.arange(p.n), n_adm)
    a.first = np.zeros(p.n, dtype=np.int64)
    a.first[1:] = np.cumsum(n_adm)[:-1]
    a.k = np.arange(A) - a.first[a.pat]
    mode = p.mode[a.pat]

    los = np.clip(rng.gamma(1.5, 1.8, A) + 0.6, 1.0, 10.0)
    los = np.where(mode == READMIT, _uniform(rng, 1.0, 3.0, A), los)
    gap_med = p.span_days / np.maximum(n_adm - 1, 1)
    gap = gap_med[a.pat] * _lognoise(rng, 0.6, A)
    gap = np.where((a.k >= 2) & (rng.random(A) < 0.08), _uniform(rng, 0.5, 6.0, A), gap)
    gap = np.where(a.k == 1, np.maximum(gap, 8.0), gap)  # rule 1 holds for multi-admission modes
    gap = np.where((a.k == 1) & (mode == READMIT), _uniform(rng, 0.3, 3.0, A), gap)
    prev_los = np.r_[0.0, los[:-1]]
    step = np.where(a.k == 0, 0.0, prev_los + gap)
    offset = np.cumsum(step)
    offset -= offset[a.first[a.pat]] if A else 0
    admit = p.t0[a.pat] + np.rint(offset * _DAY).astype(np.int64)

    # Acute events.
    allow_cad = p.cad[a.pat] & ~np.isin(mode, (ONE_CODE, NO_CODE))
    a.acs = allow_cad & (rng.random(A) < np.where(a.k == 0, 0.35, 0.07))
    a.infection = rng.random(A) < 0.12
    a.pneumonia = a.infection & (rng.random(A) < 0.5)
    a.sepsis = a.infection & (rng.random(A) < 0.2)
    a.aki = rng.random(A) < np.where(p.ckd[a.pat], 0.12, 0.05)
    a.hf_exac = p.hf[a.pat] & (rng.random(A) < 0.3)
    a.elective_cath = allow_cad & ~a.acs & (rng.random(A) < 0.08)
    a.pci = (a.acs & (rng.random(A) < 0.7)) | (a.elective_cath & (rng.random(A) < 0.45))
    a.chest_obs = p.cad[a.pat] & ~a.acs & ~a.elective_cath & (rng.random(A) < 0.1)
    acute = a.infection | a.aki | a.hf_exac | a.chest_obs
    cls = np.where(a.elective_cath, 0, np.where(a.acs | a.sepsis, 1, np.where(acute, 2, 3)))
    a.type = _choose_by(rng, ADMISSION_TYPE_P, cls)
    a.ed = ED_TYPES[a.type]
    a.location = _choose_by(rng, ADMISSION_LOCATION_P, a.type)
    # Planned admissions start in the morning: moved earlier by less than a day, which cannot
    # touch the previous stay (gap >= 2 days) nor the next one; not applied to the readmission
    # mode, whose two admissions must stay < 7 days apart.
    planned = np.isin(a.type, (6, 7)) & ((a.k == 0) | (gap >= 2.0)) & (mode != READMIT)
    hour = np.rint(_uniform(rng, 6.5, 10.5, A) * _HOUR).astype(np.int64)
    morning = (admit // _DAY) * _DAY + hour
    morning = np.where(morning > admit, morning - _DAY, morning)
    admit = np.where(planned, morning, admit)
    a.admit = _minute(admit)
    a.disch = _minute(a.admit + np.rint(los * _DAY).astype(np.int64))
    a.los = (a.disch - a.admit) / _DAY
    a.edreg = _minute(a.admit - np.rint(_uniform(rng, 2.0, 9.0, A) * _HOUR).astype(np.int64))
    a.edout = _minute(a.admit + np.rint(_uniform(rng, 0.1, 1.5, A) * _HOUR).astype(np.int64))
    a.day = (a.admit - p.t0[a.pat]) / _DAY
    a.icd10 = a.admit >= p.icd10_from[a.pat]
    a.provider = rng.integers(0, _providers().size, A)
    a.inf_mag = np.where(a.infection, _uniform(rng, 4.0, 10.0, A), 0.0)
    a.aki_mag = np.where(a.aki, _uniform(rng, 0.5, 1.5, A), 0.0)
    a.acs_peak = np.where(a.acs, np.exp(_uniform(rng, np.log(0.05), np.log(2.0), A)), 0.0)

    # Deaths: in hospital on the last admission, or within a year after it (patients.dod).
    last = (a.k == n_adm[a.pat] - 1) & (A > 0)
    died = last & (rng.random(A) < 0.02 + 0.06 * a.sepsis)
    a.died = died
    a.discharge = np.where(
        died, len(DISCHARGE_LOCATIONS) - 1, _choose(rng, DISCHARGE_LOCATION_P, A)
    )
    p.death_s = np.full(p.n, np.iinfo(np.int64).max)
    p.death_s[a.pat[died]] = a.disch[died]
    last_disch = np.full(p.n, -1, dtype=np.int64)
    if A:
        last_disch[a.pat[last]] = a.disch[last]
    p.last_disch = last_disch
    later = (p.n_adm > 0) & (p.death_s == np.iinfo(np.int64).max) & (rng.random(p.n) < 0.06)
    later_dod = last_disch + np.rint(_uniform(rng, 7, 365, p.n) * _DAY).astype(np.int64)
    p.death_s = np.where(later, later_dod, p.death_s)
    a.key = a.pat * 1e6 + a.day  # sorted: patient-major, time within patient
    return a


def _first_adm_from(a: SimpleNamespace, pats: np.ndarray, x_days: np.ndarray) -> np.ndarray:
    """Index of each patient's first admission on or after day ``x_days`` (-1 if none)."""
    finite = np.isfinite(x_days)
    q = pats * 1e6 + np.clip(np.where(finite, x_days, 0.0), 0.0, 9e5)
    idx = np.searchsorted(a.key, q, side="left")
    safe = np.minimum(idx, max(a.n - 1, 0))
    ok = finite & (idx < a.n) & (a.pat[safe] == pats) if a.n else np.zeros(pats.size, bool)
    return np.where(ok, idx, -1)


def _first_flagged(a: SimpleNamespace, flag: np.ndarray, n: int) -> np.ndarray:
    """Each patient's first admission with ``flag`` set (-1 if none)."""
    out = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(out, a.pat[flag], np.flatnonzero(flag))
    return np.where(out == np.iinfo(np.int64).max, -1, out)


def _kth(a: SimpleNamespace, p: SimpleNamespace, k: np.ndarray) -> np.ndarray:
    """Index of each patient's k-th admission (-1 if it has fewer)."""
    k = np.asarray(k)
    return np.where((k >= 0) & (k < p.n_adm), a.first + k, -1)


def _earliest(*candidates: np.ndarray) -> np.ndarray:
    stacked = np.stack([np.where(c >= 0, c, np.iinfo(np.int64).max) for c in candidates])
    best = stacked.min(axis=0)
    return np.where(best == np.iinfo(np.int64).max, -1, best)


# --------------------------------------------------------------------------- chunk: treatment


def _plan(rng: np.random.Generator, p: SimpleNamespace, a: SimpleNamespace) -> SimpleNamespace:
    """When each chronic drug starts (admission index and exact documented starttime)."""
    n = p.n
    pats = np.arange(n)
    treat = ~np.isin(p.mode, (FEW_RX, NO_ADM)) & (p.n_adm > 0)
    plan = SimpleNamespace(adm={}, start_s={}, ts_days={})
    first_acs = _first_flagged(a, a.acs, n)
    first_pci = _first_flagged(a, a.pci, n)
    first_hf = _first_flagged(a, a.hf_exac, n)
    first = _kth(a, p, np.zeros(n, dtype=np.int64))

    def per_year(years: np.ndarray) -> np.ndarray:
        return years * _YEAR_DAYS

    def start(name: str, adm: np.ndarray) -> None:
        adm = np.where(treat, adm, -1)
        ok = adm >= 0
        safe = np.maximum(adm, 0)
        # Documented starttime: hours after admission, after the admission-day labs
        # (drawn 15-75 min after admittime) and before discharge.
        hi = np.minimum(20.0, a.los[safe] * 24 - 1.0) if a.n else np.zeros(n)
        hours = _uniform(rng, 1.5, np.maximum(hi, 1.6), n)
        start_s = _minute(a.admit[safe] + np.rint(hours * _HOUR).astype(np.int64)) if a.n else 0
        plan.adm[name] = adm
        plan.start_s[name] = np.where(ok, start_s, -1)
        plan.ts_days[name] = np.where(ok, (start_s - p.t0) / _DAY, np.inf)

    # Diabetes: metformin when latent A1c crosses 7, glipizide at 8, insulin glargine at 8.5,
    # each at the first admission after the crossing (and >= 90 days after the previous step).
    drift = np.maximum(p.a1c_drift, 1e-6)
    x_met = np.where(p.dm, per_year((7.0 - p.a1c0) / drift), np.inf)
    start("metformin", _first_adm_from(a, pats, x_met))
    x_gli = np.maximum(plan.ts_days["metformin"] + 90, per_year((8.0 - p.a1c0 + p.e_met) / drift))
    start("glipizide", _first_adm_from(a, pats, np.where(p.dm, x_gli, np.inf)))
    x_ins = np.maximum(
        plan.ts_days["glipizide"] + 90, per_year((8.5 - p.a1c0 + p.e_met + p.e_gli) / drift)
    )
    start("insulin_glargine", _first_adm_from(a, pats, np.where(p.dm, x_ins, np.inf)))

    # Hypertension (and diabetic CKD): ACE inhibitor first, thiazide / amlodipine later.
    lis_k = np.where(rng.random(n) < 0.65, 0, 1)
    start("lisinopril", np.where(p.htn | (p.dm & p.ckd), _kth(a, p, lis_k), -1))
    room = p.n_adm - lis_k - 1
    hctz_k = lis_k + 1 + np.floor(rng.random(n) * np.maximum(room, 1)).astype(np.int64)
    hctz_ok = p.htn & (rng.random(n) < 0.4) & (p.egfr0 > 35) & (room > 0)
    start("hydrochlorothiazide", np.where(hctz_ok, _kth(a, p, hctz_k), -1))
    amlo_k = np.floor(rng.random(n) * np.maximum(p.n_adm, 1)).astype(np.int64)
    start("amlodipine", np.where(p.htn & (rng.random(n) < 0.45), _kth(a, p, amlo_k), -1))

    # CAD: statin at the first admission (most) or the first ACS; antiplatelets, beta-blocker.
    hld = p.comorb[:, 0]
    statin = _earliest(
        np.where(p.cad & (rng.random(n) < 0.75), first, -1),
        first_acs,
        np.where(p.dm & (p.age0 > 40) & (rng.random(n) < 0.5), first, -1),
        np.where(hld & (rng.random(n) < 0.5), first, -1),
    )
    start("atorvastatin", statin)
    start("aspirin", _earliest(np.where(p.cad & (rng.random(n) < 0.85), first, -1), first_acs))
    start("clopidogrel", _earliest(first_acs, first_pci))
    start(
        "metoprolol",
        _earliest(
            np.where(p.cad & (rng.random(n) < 0.6), first, -1), first_acs, np.where(p.hf, first, -1)
        ),
    )

    # CKD: thresholds on the latent trajectory eGFR(t) = eGFR0 - rate * t.
    def crossing(threshold: np.ndarray) -> np.ndarray:
        years = (p.egfr0 - threshold) / p.egfr_rate
        return np.where(p.ckd & (threshold > 5), per_year(np.maximum(years, 0.0)), np.inf)

    start(
        "furosemide",
        _earliest(
            _first_adm_from(a, pats, crossing(np.full(n, 35.0))), np.where(p.hf, first_hf, -1)
        ),
    )
    # Bicarbonate falls 0.15 mEq/L per mL/min below eGFR 45: below 22 -> sodium bicarbonate.
    start("sodium_bicarbonate", _first_adm_from(a, pats, crossing(45 - (p.hco3_0 - 22) / 0.15)))
    # Hemoglobin falls 0.07 g/dL per mL/min below eGFR 60: below 10 -> epoetin.
    start("epoetin", _first_adm_from(a, pats, crossing(60 - (p.hb0 - 10) / 0.07)))
    dial = np.where(treat, _first_adm_from(a, pats, crossing(np.full(n, 10.0))), -1)
    plan.dialysis_from = dial
    return plan


# --------------------------------------------------------------------------- chunk: lab values


def _effect(plan: SimpleNamespace, name: str, pat: np.ndarray, td: np.ndarray) -> np.ndarray:
    """Fraction (0..1) of a drug's full effect at day ``td``; exactly 0 until its starttime."""
    dt = np.clip(td - plan.ts_days[name][pat], 0.0, None)
    return 1.0 - np.exp(-dt / EFFECT_TAU_DAYS[name])


def _latent(p: SimpleNamespace, plan: SimpleNamespace, pat: np.ndarray, t: np.ndarray) -> dict:
    """Chronic (noise-free) state of each patient at time ``t`` (epoch seconds)."""
    td = (t - p.t0[pat]) / _DAY
    ty = td / _YEAR_DAYS
    a1c = (
        p.a1c0[pat]
        + p.a1c_drift[pat] * ty
        - p.e_met[pat] * _effect(plan, "metformin", pat, td)
        - p.e_gli[pat] * _effect(plan, "glipizide", pat, td)
        - p.e_ins[pat] * _effect(plan, "insulin_glargine", pat, td)
    )
    egfr = np.clip(p.egfr0[pat] - p.egfr_rate[pat] * ty, 5.0, 140.0)
    age = p.age0[pat] + (t - p.year0[pat]) / (_YEAR_DAYS * _DAY)
    return {
        "td": td,
        "a1c": np.clip(a1c, 4.2, 15.0),
        "egfr": egfr,
        "creat": _creatinine_from_egfr(egfr, p.female[pat], age),
    }


def _acute(a: SimpleNamespace, adm: np.ndarray, t: np.ndarray) -> dict:
    """Acute, admission-bound perturbations (decaying from admission), zero outside stays."""
    has = adm >= 0
    j = np.maximum(adm, 0)
    h = np.where(has, np.maximum((t - a.admit[j]) / _HOUR, 0.0), 0.0) if a.n else np.zeros(t.size)

    def on(x: np.ndarray) -> np.ndarray:
        return np.where(has, x[j], 0) if a.n else np.zeros(t.size)

    inf = on(a.infection.astype(float)) * np.exp(-h / 72)
    hh = np.maximum(h, 0.5)
    return {
        "h": h,
        "inf": inf,
        "wbc_bump": on(a.inf_mag) * np.exp(-h / 72),
        "sepsis": on(a.sepsis.astype(float)) * np.exp(-h / 24),
        "aki": on(a.aki_mag) * np.exp(-h / 60),
        "acs": on(a.acs.astype(float)) * np.exp(-h / 24),
        "trop": on(a.acs_peak) * (hh / 12.0) * np.exp(1.0 - hh / 12.0),
        "hf": on(a.hf_exac.astype(float)) * np.exp(-h / 72),
    }


def _group_values(
    rng: np.random.Generator,
    group: int,
    p: SimpleNamespace,
    a: SimpleNamespace,
    plan: SimpleNamespace,
    d: SimpleNamespace,
    di: np.ndarray,
) -> dict[str, np.ndarray]:
    """Reported (rounded) values of every item of ``group`` at draws ``di``.

    NaN means "not reported" (optional items, LDL calculated when TG > 400, ...). The values of
    one specimen are computed together so derived results agree: anion gap = Na - Cl - HCO3,
    calculated LDL = TC - HDL - TG/5 (Friedewald), MCHC = Hgb / Hct.
    """
    pat, t, kind = d.pat[di], d.t[di], d.kind[di]
    m = di.size
    lat = _latent(p, plan, pat, t)
    ac = _acute(a, d.adm[di], t)
    egfr, td = lat["egfr"], lat["td"]

    def eff(name: str) -> np.ndarray:
        return _effect(plan, name, pat, td)

    def norm(sd: float) -> np.ndarray:
        return rng.normal(0.0, sd, m)

    r = np.round
    out: dict[str, np.ndarray] = {}
    if group in (G_CHEM, G_MINI):
        g_lis, g_fur, g_hctz = eff("lisinopril"), eff("furosemide"), eff("hydrochlorothiazide")
        creat = (
            lat["creat"]
            * (1 + p.e_lis_cr[pat] * g_lis)
            * (1 + ac["aki"] + 0.25 * ac["sepsis"])
            * _lognoise(rng, 0.05, m)
        )
        creat = np.maximum(r(creat, 1), 0.2)
        k = (
            p.k0[pat]
            + 0.025 * _relu(60 - egfr)
            + p.e_lis_k[pat] * g_lis
            - p.e_fur_k[pat] * g_fur
            - p.e_hctz_k[pat] * g_hctz
            + 0.3 * ac["aki"]
            + norm(0.22)
        )
        na = r(p.na0[pat] - p.e_hctz_na[pat] * g_hctz - 2.0 * ac["hf"] + norm(1.6), 0)
        fasting = np.where(kind == K_OUTPT, 0.92, 1.0)
        glucose = (28.7 * lat["a1c"] - 46.7) * fasting * _lognoise(rng, 0.15, m)
        glucose = np.maximum(r(glucose + 30 * ac["inf"] + 25 * ac["acs"], 0), 40)
        out.update(
            creatinine=creat, potassium=np.clip(r(k, 1), 2.5, 7.5), sodium=na, glucose=glucose
        )
        if group == G_MINI:
            keep = np.arange(4)[None, :] < p.mini_k[pat][:, None]
            for j, key in enumerate(GROUP_ITEMS[G_MINI]):
                out[key] = np.where(keep[:, j], out[key], np.nan)
            return out
        hco3 = (
            p.hco3_0[pat]
            - 0.15 * _relu(45 - egfr)
            + p.e_bic[pat] * eff("sodium_bicarbonate")
            + 1.0 * g_fur
            - 4.0 * ac["sepsis"]
            - 1.5 * ac["aki"]
            + norm(1.2)
        )
        hco3 = np.clip(r(hco3, 0), 10, 40)
        gap = p.ag0[pat] + 0.1 * _relu(30 - egfr) + 3.0 * ac["sepsis"] + norm(1.0)
        cl = r(na - hco3 - gap + norm(0.8), 0)
        bun = p.bun_ratio[pat] * creat**0.8 * (1 + 0.25 * g_fur) * _lognoise(rng, 0.12, m)
        ca = p.ca0[pat] - 0.02 * _relu(30 - egfr) - 0.3 * ac["sepsis"] - 0.15 * ac["inf"]
        mg = 2.0 + 0.012 * _relu(30 - egfr) - 0.12 * g_fur + norm(0.15)
        phos = 3.4 + 0.07 * _relu(30 - egfr) + norm(0.35)
        alb = p.alb0[pat] - 0.5 * ac["inf"] - 0.012 * _relu(30 - egfr) + norm(0.2)
        outpt, daily = kind == K_OUTPT, kind == K_DAILY

        def opt(p_in: float, p_daily: float, p_out: float) -> np.ndarray:
            return rng.random(m) < np.where(outpt, p_out, np.where(daily, p_daily, p_in))

        with_ca, with_mg = opt(0.85, 0.85, 0.9), opt(0.55, 0.35, 0.15)
        with_phos, with_alb, with_lft = (
            opt(0.45, 0.25, 0.1),
            opt(0.15, 0.08, 0.2),
            opt(0.12, 0.05, 0.15),
        )
        nan = np.nan
        out.update(
            bicarbonate=hco3,
            chloride=cl,
            anion_gap=na - cl - hco3,
            bun=np.maximum(r(bun, 0), 2),
            calcium=np.where(with_ca, r(ca + norm(0.2), 1), nan),
            magnesium=np.where(with_mg, np.maximum(r(mg, 1), 0.8), nan),
            phosphate=np.where(with_phos, np.maximum(r(phos, 1), 0.8), nan),
            albumin=np.where(with_alb, np.clip(r(alb, 1), 1.5, 5.5), nan),
            alt=np.where(with_lft, r(p.alt0[pat] * _lognoise(rng, 0.25, m), 0), nan),
            ast=np.where(with_lft, r(p.ast0[pat] * _lognoise(rng, 0.25, m), 0), nan),
            alk_phos=np.where(with_lft, r(p.alp0[pat] * _lognoise(rng, 0.15, m), 0), nan),
            bilirubin=np.where(
                with_lft, np.maximum(r(p.bili0[pat] * _lognoise(rng, 0.25, m), 1), 0.1), nan
            ),
        )
    elif group == G_CBC:
        stay_days = ac["h"] / 24.0
        hgb = (
            p.hb0[pat]
            - 0.07 * _relu(60 - egfr)
            + p.e_epo[pat] * eff("epoetin")
            - 0.7 * ac["inf"]
            - np.minimum(0.15 * stay_days, 1.0)
            + norm(0.35)
        )
        hgb = np.clip(r(hgb, 1), 5.5, 19.5)
        hct = r(hgb * 100.0 / p.mchc0[pat] + norm(0.6), 1)
        mcv = r(p.mcv0[pat] + norm(1.0), 0)
        rbc = r(hct / mcv * 10.0, 2)
        wbc = p.wbc0[pat] * _lognoise(rng, 0.12, m) + ac["wbc_bump"] + 2.0 * ac["acs"]
        plt = p.plt0[pat] * _lognoise(rng, 0.08, m) * (1 + 0.25 * ac["inf"])
        out.update(
            wbc=r(wbc, 1),
            rbc=rbc,
            hemoglobin=hgb,
            hematocrit=hct,
            mcv=mcv,
            mch=r(hgb / rbc * 10.0, 1),
            mchc=r(hgb / hct * 100.0, 1),
            rdw=r(p.rdw0[pat] + norm(0.3), 1),
            platelets=np.maximum(r(plt, 0), 5),
        )
    elif group == G_COAG:
        pt = r(p.pt0[pat] * _lognoise(rng, 0.05, m) + 1.5 * ac["sepsis"], 1)
        out.update(pt=pt, inr=r(pt / 11.4, 1), ptt=r(30.0 * _lognoise(rng, 0.08, m), 1))
    elif group == G_A1C:
        out["hba1c"] = np.maximum(r(lat["a1c"] + norm(0.12), 1), 4.0)
    elif group == G_LIPID:
        g_stat = eff("atorvastatin")
        ldl = p.ldl0[pat] * (1 - p.e_stat[pat] * g_stat) * _lognoise(rng, 0.06, m)
        hdl = r(p.hdl0[pat] * _lognoise(rng, 0.05, m), 0)
        tg = p.tg0[pat] * (1 + 0.12 * _relu(lat["a1c"] - 6)) * (1 - 0.2 * g_stat)
        tg = r(tg * _lognoise(rng, 0.18, m), 0)
        tc = r(ldl + hdl + tg / 5.0, 0)
        measured = (tg > 400) | (rng.random(m) < 0.08)
        out.update(
            total_cholesterol=tc,
            hdl=hdl,
            triglycerides=tg,
            ldl_calc=np.where(tg <= 400, tc - hdl - r(tg / 5.0, 0), np.nan),
            ldl_measured=np.where(measured, r(ldl * _lognoise(rng, 0.03, m), 0), np.nan),
        )
    elif group == G_TROP:
        base = (0.004 + 0.0016 * _relu(60 - egfr)) * _lognoise(rng, 0.25, m)
        trop = (base + ac["trop"]) * _lognoise(rng, 0.08, m)
        out["troponin_t"] = r(trop, 2)  # < 0.01 is reported as "<0.01" with no valuenum
    elif group == G_BNP:
        bnp = p.bnp0[pat] * np.exp(0.04 * _relu(60 - egfr)) * (1 + 2.0 * ac["hf"])
        out["ntprobnp"] = np.maximum(r(bnp * _lognoise(rng, 0.3, m), 0), 5)
    elif group == G_LACT:
        lact = 1.1 * _lognoise(rng, 0.25, m) + 2.5 * ac["sepsis"] + 0.6 * ac["inf"]
        out["lactate"] = r(lact, 1)
    return out


# --------------------------------------------------------------------------- chunk: lab draws


def _draws(
    rng: np.random.Generator, p: SimpleNamespace, a: SimpleNamespace, plan
) -> SimpleNamespace:
    """Blood-draw times: admission days, serial troponins, ED, outpatient, few-labs draws."""
    parts = []

    def add(pat, adm, hadm_adm, t, kind, forced=None):
        parts.append(
            (
                np.asarray(pat, np.int64),
                np.asarray(adm, np.int64),
                np.asarray(hadm_adm, np.int64),
                _minute(t),
                np.full(len(pat), kind, np.int8),
                np.zeros(len(pat), bool) if forced is None else np.asarray(forced, bool),
            )
        )

    regular = p.mode[a.pat] != FEW_LABS
    # (a) inpatient: admission-day draw 15-75 min after admittime, then early-morning draws.
    n_days = np.where(regular, np.ceil(a.los).astype(np.int64), 0)
    da = np.repeat(np.arange(a.n), n_days)
    dd = _rank_in_sorted_groups(da)
    midnight = (a.admit[da] // _DAY) * _DAY
    t = np.where(
        dd == 0,
        a.admit[da] + np.rint(_uniform(rng, 0.25, 1.25, da.size) * _HOUR).astype(np.int64),
        midnight + dd * _DAY + np.rint(_uniform(rng, 4.0, 7.0, da.size) * _HOUR).astype(np.int64),
    )
    keep = (dd == 0) | ((t < a.disch[da] - _HOUR // 2) & (rng.random(da.size) < 0.72))
    da, dd, t = da[keep], dd[keep], t[keep]
    add(a.pat[da], da, da, t, K_DAY0)
    parts[-1][4][dd > 0] = K_DAILY
    # (b) serial troponins 6 and 12 hours into an ACS admission.
    acs = np.flatnonzero(a.acs & regular)
    for hours in (6.0, 12.0):
        ts = a.admit[acs] + np.rint((hours + _uniform(rng, -0.5, 0.5, acs.size)) * _HOUR).astype(
            np.int64
        )
        ok = ts < a.disch[acs]
        add(a.pat[acs][ok], acs[ok], acs[ok], ts[ok], K_SERIAL)
    # (c) emergency-department draws before admission: no hadm_id (as in MIMIC).
    ed = np.flatnonzero(a.ed & regular & (rng.random(a.n) < 0.5))
    ts = a.edreg[ed] + np.rint(_uniform(rng, 0.3, 1.0, ed.size) * _HOUR).astype(np.int64)
    add(a.pat[ed], ed, np.full(ed.size, -1), ts, K_ED)
    # (d) outpatient draws across the history, moved out of any stay they fall into.
    lam = np.where(p.mode == INDEX, 0.5 * p.n_adm + 1.0, 0.4 * p.n_adm + 1.0)
    n_out = np.where(p.mode == FEW_LABS, 0, rng.poisson(lam))
    n_out = np.where(p.mode == NO_ADM, 1 + rng.poisson(3.0, p.n), n_out)
    op = np.repeat(np.arange(p.n), n_out)
    has_adm = p.n_adm[op] > 0
    lo = np.where(has_adm, p.t0[op] - 180 * _DAY, p.t0[op])
    span = np.where(
        has_adm,
        (p.last_disch[op] - p.t0[op]) + 545 * _DAY,
        np.rint(_uniform(rng, 0.5, 5.0, op.size) * _YEAR_DAYS * _DAY),
    )
    day = (lo + np.floor(rng.random(op.size) * span).astype(np.int64)) // _DAY
    ts = day * _DAY + np.rint(_uniform(rng, 8.0, 16.5, op.size) * _HOUR).astype(np.int64)
    if a.n and op.size:
        j = np.searchsorted(a.key, op * 1e6 + (ts - p.t0[op]) / _DAY, side="right") - 1
        js = np.maximum(j, 0)
        inside = (j >= 0) & (a.pat[js] == op) & (ts < a.disch[js] + _DAY)
        push = np.ceil((a.disch[js] - ts) / _DAY + _uniform(rng, 2.0, 20.0, op.size)) * _DAY
        ts = np.where(inside, ts + push.astype(np.int64), ts)
    alive = ts < p.death_s[op] - _DAY
    # no_admission patients always keep their first draw (it carries a forced chemistry).
    first_out = _rank_in_sorted_groups(op) == 0
    alive |= first_out & (p.mode[op] == NO_ADM)
    forced = first_out[alive] & (p.mode[op[alive]] == NO_ADM)
    none = np.full(int(alive.sum()), -1)
    add(op[alive], none, none, ts[alive], K_OUTPT, forced)
    # (e) few_labs patients: one small chemistry (0-4 panel items) and coagulation per stay.
    fl = np.flatnonzero(p.mode[a.pat] == FEW_LABS)
    t_fl = a.admit[fl] + np.rint(_uniform(rng, 0.25, 1.25, fl.size) * _HOUR).astype(np.int64)
    first_fl = fl[a.k[fl] == 0]
    add(a.pat[first_fl], first_fl, first_fl, t_fl[a.k[fl] == 0] + 60, K_MINI)
    add(a.pat[fl], fl, fl, t_fl, K_COAG)

    d = SimpleNamespace()
    d.pat, d.adm, d.hadm_adm, d.t, d.kind, d.forced_chem = (
        np.concatenate(c) for c in zip(*parts, strict=True)
    )
    d.n = d.pat.size
    return d


def _specimens(
    rng: np.random.Generator, p: SimpleNamespace, a: SimpleNamespace, plan, d: SimpleNamespace
) -> tuple[np.ndarray, np.ndarray]:
    """Which specimen groups each draw carries: returns (draw index, group) per specimen."""
    kind, pat = d.kind, d.pat
    j = np.maximum(d.adm, 0)

    def at(x: np.ndarray) -> np.ndarray:
        """Admission flag of each draw's admission (False for outpatient draws)."""
        return np.where(d.adm >= 0, x[j], False) if a.n else np.zeros(d.n, bool)

    def u() -> np.ndarray:
        return rng.random(d.n)

    dm, cad, hf = p.dm[pat], p.cad[pat], p.hf[pat]
    acs, ed_type = at(a.acs), at(a.ed)
    day0, daily, serial, edk, outpt = (
        kind == k for k in (K_DAY0, K_DAILY, K_SERIAL, K_ED, K_OUTPT)
    )
    # The admission whose day-0 draw must carry A1c / lipids: a drug starts at that admission.

    def starts_at(name: str) -> np.ndarray:
        return at(np.isin(np.arange(a.n), plan.adm[name][plan.adm[name] >= 0]))

    a1c_start = starts_at("metformin") | starts_at("glipizide") | starts_at("insulin_glargine")
    statin_start = starts_at("atorvastatin")
    sel = {
        G_CHEM: (day0 | edk | d.forced_chem) | (daily & (u() < 0.93)) | (outpt & (u() < 0.9)),
        G_CBC: ((day0 | edk) & (u() < 0.96)) | (daily & (u() < 0.5)) | (outpt & (u() < 0.6)),
        G_COAG: (kind == K_COAG)
        | (day0 & (u() < 0.4))
        | (edk & (u() < 0.4))
        | (daily & (u() < 0.1))
        | (outpt & (u() < 0.04)),
        G_A1C: (day0 & ((u() < np.where(dm, 0.45, 0.06)) | a1c_start))
        | (outpt & (u() < np.where(dm, 0.5, 0.06))),
        G_LIPID: (day0 & ((u() < np.where(cad, 0.3, np.where(dm, 0.2, 0.05))) | statin_start | acs))
        | (outpt & (u() < np.where(cad, 0.4, np.where(dm, 0.35, 0.1)))),
        G_TROP: (
            (day0 | edk) & (acs | at(a.chest_obs) | (u() < np.where(cad & ed_type, 0.6, 0.12)))
        )
        | serial
        | (daily & acs & (u() < 0.7)),
        G_BNP: (day0 | edk) & (u() < np.where(at(a.hf_exac), 0.7, np.where(hf, 0.2, 0.04))),
        G_LACT: (day0 | edk)
        & (u() < np.where(at(a.sepsis), 0.9, np.where(at(a.infection), 0.4, 0.04))),
        G_MINI: kind == K_MINI,
    }
    # Serial / coagulation-only / mini draws carry only their own group.
    only = {K_SERIAL: G_TROP, K_COAG: G_COAG, K_MINI: G_MINI}
    for k, g in only.items():
        for other in sel:
            if other != g:
                sel[other] = sel[other] & (kind != k)
    draw_idx = np.concatenate([np.flatnonzero(sel[g]) for g in range(len(GROUPS))])
    group = np.concatenate([np.full(int(sel[g].sum()), g, np.int8) for g in range(len(GROUPS))])
    return draw_idx, group


# --------------------------------------------------------------------------- chunk: assembly


@dataclass
class _ChunkIds:
    """Id bases of one chunk (disjoint ranges; see the module docstring)."""

    first_patient: int
    chunk_patients: int
    subject: int = field(init=False)
    hadm: int = field(init=False)
    labevent: int = field(init=False)
    specimen: int = field(init=False)
    pharmacy: int = field(init=False)

    def __post_init__(self) -> None:
        f = self.first_patient
        self.subject = SUBJECT_ID_BASE + f
        self.hadm = HADM_ID_BASE + f * HADM_PER_PATIENT
        self.labevent = 1 + f * LABEVENTS_PER_PATIENT
        self.specimen = 1 + f * SPECIMENS_PER_PATIENT
        self.pharmacy = 1 + f * RX_PER_PATIENT

    def check(self, what: str, base: int, used: int, per_patient: int) -> None:
        """Raise if ``used`` ids from ``base`` leave the chunk's range or INTEGER (int32)."""
        if used > self.chunk_patients * per_patient or base + used > np.iinfo(np.int32).max:
            raise SyntheticConfigError(
                f"chunk starting at patient {self.first_patient} needs {used} {what} ids, more "
                f"than its range of {self.chunk_patients * per_patient}; use a larger "
                "chunk_patients"
            )


def _str_table(values) -> pa.Array:
    return pa.array(list(values), type=pa.string())


def _take(values, idx: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    """Strings ``values[idx]`` as an arrow array (NULL where ``null``)."""
    table = values if isinstance(values, pa.Array) else _str_table(values)
    return table.take(pa.array(np.asarray(idx, dtype=np.int32), mask=null))


def _ts(seconds: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    return pa.array(np.asarray(seconds, np.int64) * 1_000_000, type=pa.timestamp("us"), mask=null)


def _date(seconds: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    days = (np.asarray(seconds, np.int64) // _DAY).astype(np.int32)
    return pa.array(days, type=pa.date32(), mask=null)


def _int(values: np.ndarray, typ: pa.DataType, null: np.ndarray | None = None) -> pa.Array:
    return pa.array(np.asarray(values), type=typ, mask=null)


def _item_table(attr: str) -> np.ndarray:
    """Per-item constant from synthetic_vocab.LAB_ITEMS (None -> NaN), in ITEM_KEYS order."""
    values = [getattr(sv.LAB_ITEMS[k], attr) for k in ITEM_KEYS]
    return np.array([np.nan if v is None else v for v in values], dtype=float)


ITEM_IDS = np.array([sv.LAB_ITEMS[k].itemid for k in ITEM_KEYS], dtype=np.int32)
ITEM_DECIMALS = _item_table("decimals").astype(np.int64)
ITEM_UNITS: tuple[str | None, ...] = tuple(sv.LAB_ITEMS[k].unit for k in ITEM_KEYS)


def _ref_table(attr: str, by_sex: int) -> np.ndarray:
    """Reference limits per item for one sex (0 = male, 1 = female)."""
    table = _item_table(attr)
    ranges = sv.SEX_SPECIFIC_REF if by_sex else sv.MALE_REF
    for key, (lo, hi) in ranges.items():
        table[ITEM_CODE[key]] = lo if attr == "ref_low" else hi
    return table


# Row index = item code * 2 + female.
REF_LOW = np.column_stack([_ref_table("ref_low", 0), _ref_table("ref_low", 1)]).ravel()
REF_HIGH = np.column_stack([_ref_table("ref_high", 0), _ref_table("ref_high", 1)]).ravel()


def format_fixed(
    values: np.ndarray,
    decimals,
    override: np.ndarray | None = None,
    override_texts: tuple[str, ...] = (),
) -> pa.Array:
    """Format numbers with a fixed number of decimals (0-3), as a lab reports them.

    Each distinct (value, decimals) is formatted once and the result gathered, so 10M values
    cost one pass.

    Args:
        values: numbers (NaN -> NULL).
        decimals: decimals per value (0..3), or one int for all.
        override: optional per-value index into ``override_texts`` (-1 = format the number).
        override_texts: replacement texts such as ``"___"``.

    Returns:
        A string array: 1.3 with 1 decimal -> "1.3", 140 with 0 -> "140", 0.5 with 2 -> "0.50"
        (halves round to even, as ``numpy.rint``).
    """
    values = np.asarray(values, dtype=float)
    decimals = np.broadcast_to(np.asarray(decimals, dtype=np.int64), values.shape)
    if values.size and not 0 <= decimals.min() <= decimals.max() <= 3:
        raise SyntheticConfigError("format_fixed supports 0 to 3 decimals")
    null = np.isnan(values)
    scaled = np.rint(np.where(null, 0.0, values) * 10.0**decimals).astype(np.int64)
    key = scaled * 4 + decimals  # decimals 0..3 are recovered as key % 4
    if key.size == 0:
        return pa.array([], pa.string())
    # Override text i gets key floor + i, below every numeric key.
    n_over = len(override_texts)
    floor = int(key.min()) - n_over
    if override is not None and n_over:
        key = np.where(override >= 0, floor + np.asarray(override, np.int64), key)
    lo = int(key.min())
    width = int(key.max()) - lo + 1
    if width <= 4 * key.size + 1_000_000:  # dense lookup: O(n), no sort
        present = np.zeros(width, dtype=bool)
        present[key - lo] = True
        uniq = np.flatnonzero(present) + lo
        inverse = (np.cumsum(present) - 1)[key - lo]
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
    texts = []
    for k in uniq.tolist():
        if k < floor + n_over:
            texts.append(override_texts[k - floor])
            continue
        dec = k % 4
        number = (k - dec) // 4
        whole, frac = divmod(abs(number), 10**dec)
        sign = "-" if number < 0 else ""
        texts.append(f"{sign}{whole}.{frac:0{dec}d}" if dec else f"{sign}{whole}")
    return _str_table(texts).take(pa.array(inverse.astype(np.int32), mask=null))


def _labevents(rng, srng, p, a, plan, ids: _ChunkIds) -> tuple[pa.Table, SimpleNamespace]:
    """labevents rows of a chunk plus per-admission lab extremes used for coding (``srng``:
    the shape stream, for results reported only in ``comments``)."""
    d = _draws(rng, p, a, plan)
    spec_draw, spec_group = _specimens(rng, p, a, plan, d)
    # Specimen order and ids: patient, time, group.
    skey = (d.pat[spec_draw] << 42) | ((d.t[spec_draw] - _T_BASE) << 4) | spec_group
    order = np.argsort(skey, kind="stable")
    spec_draw, spec_group = spec_draw[order], spec_group[order]
    del skey, order
    S = spec_draw.size
    ids.check("specimen", ids.specimen, S, SPECIMENS_PER_PATIENT)

    # Values one group at a time. Rows follow specimen order, then the group's item order:
    # the natural key (patient, charttime, specimen, item) without sorting 10M rows.
    per_group = []
    n_rep = np.zeros(S, dtype=np.int64)
    for g in range(len(GROUPS)):
        si = np.flatnonzero(spec_group == g)
        if si.size:
            values = _group_values(rng, g, p, a, plan, d, spec_draw[si])
            matrix = np.column_stack([values[k] for k in GROUP_ITEMS[g]])
            reported = ~np.isnan(matrix)
            n_rep[si] = reported.sum(axis=1)
            per_group.append((g, si, matrix, reported))
    R = int(n_rep.sum())
    ids.check("labevent", ids.labevent, R, LABEVENTS_PER_PATIENT)
    row_start = np.cumsum(n_rep) - n_rep
    r_val = np.empty(R)
    r_item = np.empty(R, dtype=np.int16)
    for g, si, matrix, reported in per_group:
        pos = (row_start[si][:, None] + np.cumsum(reported, axis=1) - 1)[reported]
        r_val[pos] = matrix[reported]
        codes = np.array([ITEM_CODE[k] for k in GROUP_ITEMS[g]], dtype=np.int16)
        r_item[pos] = np.broadcast_to(codes, matrix.shape)[reported]
    del per_group, row_start

    # Specimen-level attributes, repeated onto their rows.
    s_pat = d.pat[spec_draw]
    s_time = d.t[spec_draw]
    s_kind = d.kind[spec_draw]
    s_adm = d.hadm_adm[spec_draw]
    # ~1.5% of inpatient specimens lack hadm_id although drawn inside the stay (MIMIC quirk).
    s_hadm = np.where(rng.random(S) < 0.015, -1, s_adm)
    s_priority = np.where(
        np.isin(s_kind, (K_DAY0, K_ED, K_SERIAL)), np.where(rng.random(S) < 0.7, 1, 0), 0
    )
    s_priority_null = rng.random(S) < 0.08
    lag_min = np.select(
        [spec_group == G_A1C, spec_group == G_LIPID, spec_group == G_CBC],
        [_uniform(rng, 900, 2800, S), _uniform(rng, 120, 480, S), _uniform(rng, 20, 60, S)],
        _uniform(rng, 35, 120, S),
    )
    s_store = _minute(s_time + np.rint(lag_min * 60).astype(np.int64))
    s_provider = rng.integers(0, _providers().size, S)
    s_provider_null = ~((s_kind == K_OUTPT) | (rng.random(S) < 0.3))

    def rows(x: np.ndarray) -> np.ndarray:
        return np.repeat(x, n_rep)

    # Per-admission extremes of inpatient results (lab-driven diagnoses and orders).
    ext = SimpleNamespace()
    r_adm = rows(s_adm)
    for name, key, fn, init in (
        ("k_max", "potassium", np.maximum, -np.inf),
        ("k_min", "potassium", np.minimum, np.inf),
        ("na_min", "sodium", np.minimum, np.inf),
        ("hco3_min", "bicarbonate", np.minimum, np.inf),
        ("hgb_min", "hemoglobin", np.minimum, np.inf),
    ):
        arr = np.full(a.n, init)
        sel = np.flatnonzero(r_item == ITEM_CODE[key])
        sel = sel[r_adm[sel] >= 0]
        fn.at(arr, r_adm[sel], r_val[sel])
        setattr(ext, name, arr)
    # Time of the first potassium below 3.4 in each stay (potassium replacement order).
    low_k = np.flatnonzero((r_item == ITEM_CODE["potassium"]) & (r_val < 3.4))
    low_k = low_k[r_adm[low_k] >= 0]
    ext.low_k_time = np.full(a.n, np.iinfo(np.int64).max)
    np.minimum.at(ext.low_k_time, r_adm[low_k], rows(s_time)[low_k])
    del r_adm

    # Arrow columns are built one at a time and each numpy input dropped after its last use,
    # which keeps the peak of a 10M-row chunk near the size of the finished table.
    col: dict[str, pa.Array] = {}
    r_pat = rows(s_pat)
    col["labevent_id"] = _int(ids.labevent + np.arange(R), pa.int32())
    col["subject_id"] = _int(ids.subject + r_pat, pa.int32())
    hadm_adm = rows(s_hadm)
    col["hadm_id"] = _int(ids.hadm + np.maximum(hadm_adm, 0), pa.int32(), hadm_adm < 0)
    del hadm_adm
    col["specimen_id"] = _int(rows(ids.specimen + np.arange(S)), pa.int32())
    col["itemid"] = _int(ITEM_IDS[r_item], pa.int32())
    col["order_provider_id"] = _take(_providers(), rows(s_provider), rows(s_provider_null))
    col["charttime"] = _ts(rows(s_time))
    col["storetime"] = _ts(rows(s_store))

    ref_idx = r_item.astype(np.int64) * 2 + p.female[r_pat]
    del r_pat
    ref_lo, ref_hi = REF_LOW[ref_idx], REF_HIGH[ref_idx]
    del ref_idx
    # Troponin T below the assay limit is reported as "<0.01" with no valuenum (as in MIMIC).
    below_detect = (r_item == ITEM_CODE["troponin_t"]) & (r_val < 0.01)
    # De-identification mask '___' in value while valuenum stays valid (MIMIC quirk).
    masked = rng.random(R) < 0.003
    override = np.where(below_detect, 1, np.where(masked, 0, -1))
    del masked
    value = format_fixed(r_val, ITEM_DECIMALS[r_item], override, ("___", "<0.01"))
    # Result only in comments: value, valuenum and flag NULL (synthetic_shapes).
    in_comment = shp.comment_only(srng, R) & ~below_detect
    comment_text = pc.binary_join_element_wise(shp.COMMENT_ONLY[0], value, shp.COMMENT_ONLY[1], "")
    col["value"] = pc.if_else(pa.array(in_comment), pa.nulls(R, pa.string()), value)
    del override
    valuenum = np.where(below_detect | in_comment, np.nan, r_val)
    del below_detect, r_val
    col["valuenum"] = pa.array(valuenum, type=pa.float64(), from_pandas=True)
    unit_null = np.array([u is None for u in ITEM_UNITS])[r_item]
    col["valueuom"] = _take([u or "" for u in ITEM_UNITS], r_item, unit_null)
    del unit_null
    col["ref_range_lower"] = pa.array(ref_lo, type=pa.float64(), from_pandas=True)
    col["ref_range_upper"] = pa.array(ref_hi, type=pa.float64(), from_pandas=True)
    with np.errstate(invalid="ignore"):
        normal = ~((valuenum < ref_lo) | (valuenum > ref_hi))
    del valuenum, ref_lo, ref_hi
    col["flag"] = _take(["abnormal"], np.zeros(R, np.int32), normal)
    del normal
    col["priority"] = _take(PRIORITIES, rows(s_priority), rows(s_priority_null))
    has_comment = rng.random(R) < 0.005
    comment_idx = np.zeros(R, dtype=np.int64)
    comment_idx[has_comment] = _choose(rng, [1] * len(LAB_COMMENTS), int(has_comment.sum()))
    comments = _take(LAB_COMMENTS, comment_idx, ~has_comment)
    col["comments"] = pc.if_else(pa.array(in_comment), comment_text, comments)
    table = pa.Table.from_arrays(list(col.values()), schema=arrow_schema("labevents"))
    assert table.column_names == list(col)
    return table, ext


def _prescriptions(rng, srng, p, a, plan, ext, ids: _ChunkIds) -> tuple[pa.Table, pa.Table]:
    """prescriptions and emar rows: chronic drugs from their start on, acute and background
    orders (``srng``: the shape stream of :mod:`clinlib.data.sources.synthetic_shapes`)."""
    A = a.n
    adm_list, drug_list, start_list, stop_list = [], [], [], []
    idx_a = np.arange(A)

    def add(adm, drug_key, start=None, stop=None):
        adm = np.asarray(adm, dtype=np.int64)
        if start is None:
            hi = np.minimum(20.0, a.los[adm] * 24 - 1.0)
            hours = _uniform(rng, 1.5, np.maximum(hi, 1.6), adm.size)
            start = _minute(a.admit[adm] + np.rint(hours * _HOUR).astype(np.int64))
        if stop is None:
            stop = _minute(
                a.disch[adm] - np.rint(_uniform(rng, 0, 2, adm.size) * _HOUR).astype(np.int64)
            )
        adm_list.append(adm)
        drug_list.append(np.full(adm.size, DRUG_CODE[drug_key], np.int16))
        start_list.append(np.asarray(start, np.int64))
        stop_list.append(
            np.maximum(np.asarray(stop, np.int64), np.asarray(start, np.int64) + _HOUR)
        )

    for name in CHRONIC_DRUGS:
        s = plan.adm[name][a.pat]
        on = (s >= 0) & (idx_a >= s)
        initiation = on & (idx_a == s)
        cont = on & ~initiation & (rng.random(A) < 0.92)
        init_adm = idx_a[initiation]
        add(init_adm, name, start=plan.start_s[name][a.pat[init_adm]])
        add(idx_a[cont], name)
    # Acute orders.
    dm = p.dm[a.pat]
    add(idx_a[dm & (rng.random(A) < 0.8)], "insulin_sliding")
    add(idx_a[a.acs | a.chest_obs], "nitroglycerin")
    inf = idx_a[a.infection]
    abx_days = _uniform(rng, 3, 7, inf.size)
    first_abx = np.where(rng.random(inf.size) < 0.6, "ceftriaxone", "levofloxacin")
    for drug in ("ceftriaxone", "levofloxacin"):
        sel = inf[first_abx == drug]
        hrs = _uniform(rng, 1.0, 6.0, sel.size)
        st = _minute(a.admit[sel] + np.rint(hrs * _HOUR).astype(np.int64))
        stop = np.minimum(
            st + np.rint(abx_days[first_abx == drug] * _DAY).astype(np.int64), a.disch[sel]
        )
        add(sel, drug, start=st, stop=_minute(stop))
    # Potassium replacement one hour after the first potassium below 3.4 of a stay.
    low = np.flatnonzero(ext.low_k_time < np.iinfo(np.int64).max)
    st = _minute(ext.low_k_time[low] + _HOUR)
    ok = st < a.disch[low]
    add(low[ok], "potassium_chloride", start=st[ok], stop=_minute(st[ok] + 2 * _HOUR))
    for name, prob in BACKGROUND_DRUGS:
        add(idx_a[rng.random(A) < prob], name)

    r_adm = np.concatenate(adm_list)
    r_drug = np.concatenate(drug_list)
    r_start = np.concatenate(start_list)
    r_stop = np.concatenate(stop_list)
    # Every stay has at least one order (two for single-admission patients): heparin SC.
    count = np.bincount(r_adm, minlength=A)
    need = np.where(p.mode[a.pat] == SINGLE, 2, 1) - count
    extra = np.repeat(idx_a, np.maximum(need, 0))
    extra_drug = np.where(
        _rank_in_sorted_groups(extra) == 0, DRUG_CODE["heparin_sc"], DRUG_CODE["acetaminophen"]
    )
    hours = _uniform(rng, 1.5, 3.0, extra.size)
    extra_start = _minute(a.admit[extra] + np.rint(hours * _HOUR).astype(np.int64))
    r_adm = np.r_[r_adm, extra]
    r_drug = np.r_[r_drug, extra_drug.astype(np.int16)]
    r_start = np.r_[r_start, extra_start]
    r_stop = np.r_[r_stop, np.maximum(a.disch[extra], extra_start + _HOUR)]
    # few_rx patients: at most one order in total; no_admission patients have no stays.
    few = p.mode[a.pat[r_adm]] == FEW_RX
    keep = ~few
    few_first = few & (a.k[r_adm] == 0) & (r_drug == DRUG_CODE["acetaminophen"])
    if few_first.any():
        first_of = np.flatnonzero(few_first)
        pats = a.pat[r_adm[first_of]]
        _, uniq = np.unique(pats, return_index=True)
        chosen = first_of[uniq]
        chosen = chosen[rng.random(chosen.size) < 0.5]
        keep[chosen] = True
    r_adm, r_drug, r_start, r_stop = r_adm[keep], r_drug[keep], r_start[keep], r_stop[keep]

    r_pat = a.pat[r_adm]
    order = np.argsort(
        (r_pat << 42) | ((r_start - _T_BASE) << 8) | r_drug.astype(np.int64), kind="stable"
    )
    r_adm, r_drug, r_start, r_stop, r_pat = (
        x[order] for x in (r_adm, r_drug, r_start, r_stop, r_pat)
    )
    R = r_adm.size

    # Base draws first, in their original order, so the base random stream is unchanged.
    drugs = [sv.DRUGS[k] for k in sv.DRUG_KEYS]
    n_doses = np.array([len(dr.doses) for dr in drugs])
    # Dose: mostly the drug's usual dose, per patient so chronic orders repeat it.
    pat_pref = rng.random((p.n, len(drugs)))
    pref = np.minimum(np.floor(pat_pref[r_pat, r_drug] ** 2 * n_doses[r_drug]), n_doses[r_drug] - 1)
    dose_idx = shp.DOSE_OFFSET[r_drug] + pref.astype(np.int64)
    route_first = np.array([shp.ROUTE_POS[dr.routes[0]] for dr in drugs])
    route_second = np.array([shp.ROUTE_POS[dr.routes[-1]] for dr in drugs])
    route_idx = np.where(rng.random(R) < 0.8, route_first[r_drug], route_second[r_drug])
    provider = rng.integers(0, _providers().size, R)
    return _order_tables(srng, p, a, ids, ext.k_max, r_adm, r_drug, r_start, r_stop, dose_idx, route_idx,
                         provider)  # fmt: skip


def _order_tables(srng, p, a, ids, k_max, r_adm, r_drug, r_start, r_stop, dose, route, provider):
    """prescriptions and emar tables from the base orders plus the real-data shapes of
    :mod:`clinlib.data.sources.synthetic_shapes` (IV orders, BASE / ADDITIVE rows sharing the
    order's pharmacy_id, missing doses and hadm_ids, one emar row per administration)."""
    iv = shp.extra_orders(srng, a, allowed=p.mode[a.pat] != FEW_RX, k_max=k_max)
    n_iv = iv["adm"].size
    r_adm = np.r_[r_adm, iv["adm"]]
    r_drug = np.r_[r_drug.astype(np.int64), iv["drug"]]
    r_start, r_stop = np.r_[r_start, iv["start"]], np.r_[r_stop, iv["stop"]]
    dose = np.r_[dose, shp.pick_dose(srng, iv["drug"])]
    route = np.r_[route, iv["route"]]
    provider = np.r_[provider, srng.integers(0, _providers().size, n_iv)]
    r_pat = a.pat[r_adm]
    order = np.argsort((r_pat << 42) | ((r_start - _T_BASE) << 8) | r_drug, kind="stable")
    r_adm, r_drug, r_start, r_stop, r_pat, dose, route, provider = (
        x[order] for x in (r_adm, r_drug, r_start, r_stop, r_pat, dose, route, provider)
    )
    r_drug = shp.name_variants(srng, r_drug)
    n_orders = r_adm.size
    ids.check("pharmacy", ids.pharmacy, n_orders, RX_PER_PATIENT)
    rows = shp.order_rows(srng, r_drug, route)
    o, drug = rows.order, rows.drug
    main = rows.drug_type == shp.MAIN
    row_dose = np.where(main, dose[o], 0)
    row_dose[~main] = shp.pick_dose(srng, drug[~main])
    row_route = np.where(main, route[o], shp.ROUTE_POS["IV"])
    no_dose = shp.dose_missing(srng, rows.drug_type)
    no_hadm = rows.no_hadm[o]
    subject = ids.subject + r_pat
    poe_seq = _rank_in_sorted_groups(r_pat) + 1
    poe_id = pc.binary_join_element_wise(
        pc.cast(pa.array(subject), pa.string()), pc.cast(pa.array(poe_seq), pa.string()), "-"
    )
    all_drugs = shp.ALL_DRUGS
    ndc_zero = np.isin(drug, [shp.CODE["insulin_sliding"], shp.CODE["flush"]])
    form_rx_null = np.array([dr.form_rx is None for dr in all_drugs])[drug]
    o_arr = pa.array(o.astype(np.int32))
    table = pa.Table.from_arrays(
        [
            _int(subject[o], pa.int32()),
            _int(ids.hadm + r_adm[o], pa.int32(), no_hadm),
            _int(ids.pharmacy + o, pa.int32()),
            poe_id.take(o_arr),
            _int(poe_seq[o], pa.int32()),
            _take(_providers(), provider[o]),
            _ts(r_start[o]),
            _ts(r_stop[o]),
            _take(shp.DRUG_TYPES, rows.drug_type),
            _take([dr.drug for dr in all_drugs], drug),
            _take([dr.formulary_drug_cd for dr in all_drugs], drug),
            _take([sv.synthetic_gsn(i) for i in range(len(all_drugs))], drug),
            _take(
                [sv.synthetic_ndc(i) for i in range(len(all_drugs))] + ["0"],
                np.where(ndc_zero, len(all_drugs), drug),
            ),  # fmt: skip
            _take([dr.prod_strength for dr in all_drugs], drug),
            _take([dr.form_rx or "" for dr in all_drugs], drug, form_rx_null),
            _take(shp.DOSE_STRINGS, row_dose, no_dose),
            _take([dr.dose_unit for dr in all_drugs], drug, no_dose),
            _take([dr.form_val_disp for dr in all_drugs], drug),
            _take([dr.form_unit_disp for dr in all_drugs], drug),
            pa.array(np.array([dr.doses_per_24_hrs for dr in all_drugs], np.float32)[drug]),
            _take(shp.ROUTES, row_route),
        ],
        schema=arrow_schema("prescriptions"),
    )
    per_day = np.array([dr.doses_per_24_hrs for dr in all_drugs])[r_drug]
    e = shp.emar_rows(srng, r_start, r_stop, per_day, r_drug)
    srt = np.argsort((r_pat[e.order] << 42) | (e.chart - _T_BASE), kind="stable")
    eo = e.order[srt]
    seq = _rank_in_sorted_groups(r_pat[eo]) + 1
    e_subject = pc.cast(pa.array(subject[eo]), pa.string())
    emar = pa.Table.from_arrays(
        [
            _int(subject[eo], pa.int32()),
            _int(ids.hadm + r_adm[eo], pa.int32(), rows.no_hadm[eo]),
            pc.binary_join_element_wise(e_subject, pc.cast(pa.array(seq), pa.string()), "-"),
            _int(seq, pa.int32()),
            poe_id.take(pa.array(eo.astype(np.int32))),
            _int(ids.pharmacy + eo, pa.int32()),
            pa.nulls(eo.size, pa.string()),
            _ts(e.chart[srt]),
            _take([dr.drug for dr in all_drugs], r_drug[eo]),
            _take(shp.EMAR_EVENTS, e.event[srt]),
            _ts(e.schedule[srt]),
            _ts(e.store[srt]),
        ],
        schema=arrow_schema("emar"),
    )
    return table, emar


def _diagnoses(rng, p, a, plan, ext, ids: _ChunkIds) -> pa.Table:
    """diagnoses_icd rows: reason for admission, index diseases, comorbidities, lab-driven
    and status codes, in ICD-9 or ICD-10 by the admission's date."""
    A = a.n
    idx_a = np.arange(A)
    pat = a.pat
    mode = p.mode[pat]
    lat = _latent(p, plan, pat, a.admit)
    egfr, a1c = lat["egfr"], lat["a1c"]
    rows_adm, rows_key, rows_prio = [], [], []

    def add(mask, key, prio):
        rows_adm.append(idx_a[mask])
        rows_key.append(_masked(key, mask))
        rows_prio.append(_masked(prio, mask))

    c = DX_CODE
    # Principal reason for admission (priority 0).
    acs_kind = _choose(rng, [0.6, 0.2, 0.2], A)
    acs_code = np.array([c["nstemi"], c["stemi_anterior"], c["stemi_inferior"]])[acs_kind]
    generic = np.array(
        [c["chest_pain"], c["chest_pain_other"], c["syncope"], c["hypotension"], c["constipation"]]
    )[_choose(rng, [0.25, 0.2, 0.25, 0.15, 0.15], A)]
    reason = np.select(
        [a.acs, a.sepsis, a.pneumonia, a.infection, a.hf_exac, a.aki, a.elective_cath, a.chest_obs],
        [
            acs_code,
            c["sepsis"],
            c["pneumonia"],
            c["uti"],
            c["heart_failure"],
            c["aki"],
            c["angina"],
            c["chest_pain"],
        ],
        generic,
    )
    add(np.ones(A, bool), reason, 0)
    add(a.sepsis & a.pneumonia, c["pneumonia"], 1)
    add(a.sepsis & ~a.pneumonia, c["uti"], 1)

    # Index diseases: the designated one on (almost) every stay, comorbid ones on about half.
    des = p.designated[pat]
    coded = np.zeros((A, 4), dtype=bool)
    for dis in range(4):
        prob = np.where(des == dis, 0.97, 0.5)
        forced = (des == dis) & (a.k <= 1)
        coded[:, dis] = p.flags[pat, dis] & ((rng.random(A) < prob) | forced)
    coded[mode == NO_CODE] = False
    # one_index_code: a single stay gets a single code of the patient's one disease.
    one = mode == ONE_CODE
    pick_k = np.floor(rng.random(p.n) * np.maximum(p.n_adm, 1)).astype(np.int64)
    one_stay = one & (a.k == pick_k[pat])
    coded[one] = False
    simple = np.array([c["dm_uncomplicated"], c["htn"], c["ckd_3"], c["cad"]])
    add(one_stay, simple[np.maximum(des, 0)], 1)

    def prio(disease: int) -> np.ndarray:
        return np.where(des == disease, 1, 2)

    dm_code = np.select(
        [p.ckd[pat] & coded[:, CKD], a1c > 9.0, p.neuro[pat], p.retino[pat]],
        [c["dm_renal"], c["dm_uncontrolled"], c["dm_neuro"], c["dm_ophthalmic"]],
        c["dm_uncomplicated"],
    )
    on_insulin = (plan.adm["insulin_glargine"][pat] >= 0) & (
        idx_a > plan.adm["insulin_glargine"][pat]
    )
    dm_code = np.where(on_insulin & (rng.random(A) < 0.06), c["dm_hypoglycemia"], dm_code)
    add(coded[:, DM], dm_code, prio(DM))
    # A second diabetes code for single-admission diabetes (neuropathy + retinopathy).
    add(coded[:, DM] & (mode == SINGLE), c["dm_ophthalmic"], 1)
    add(coded[:, DM] & (mode == SINGLE), c["dm_neuro"], 1)
    # Hypertension with CKD must be coded as hypertensive CKD (I12 / 403): counts for both.
    dialysis_on = (plan.dialysis_from[pat] >= 0) & (idx_a >= plan.dialysis_from[pat])
    esrd = (egfr < 15) | dialysis_on
    hyp_ckd = p.htn[pat] & p.ckd[pat] & (coded[:, HTN] | coded[:, CKD])
    add(hyp_ckd, np.where(esrd, c["htn_ckd_esrd"], c["htn_ckd"]), prio(HTN))
    plain_htn = coded[:, HTN] & ~(p.ckd[pat] & p.htn[pat])
    add(plain_htn, np.where(p.hf[pat], c["htn_heart_failure"], c["htn"]), prio(HTN))
    stage = np.select(
        [dialysis_on, egfr < 15, egfr < 30, egfr < 60, egfr < 90],
        [c["esrd"], c["ckd_5"], c["ckd_4"], c["ckd_3"], c["ckd_2"]],
        c["ckd_1"],
    )
    stage = np.where(rng.random(A) < 0.08, c["ckd_unspecified"], stage)
    add(coded[:, CKD], stage, prio(CKD))
    add(coded[:, CAD], c["cad"], prio(CAD))
    after_acs = (a.k > 0) & p.cad[pat]
    first_acs = _first_flagged(a, a.acs, p.n)[pat]
    add(
        after_acs & (first_acs >= 0) & (idx_a > first_acs) & coded[:, CAD] & (rng.random(A) < 0.5),
        c["old_mi"],
        2,
    )
    add(coded[:, CAD] & (mode == SINGLE), c["old_mi"], 1)

    # Chronic comorbidities (priority 3) and heart failure.
    for j, (name, _, _) in enumerate(COMORBIDITIES):
        add(p.comorb[pat, j] & (rng.random(A) < 0.6), c[name], 3)
    add(p.hf[pat] & ~a.hf_exac & (rng.random(A) < 0.6), c["heart_failure"], 3)
    # Lab-driven problems (priority 4), from the values the lab reported.
    code_p = rng.random((A, 5)) < 0.85
    add(code_p[:, 0] & (ext.k_max > 5.5), c["hyperkalemia"], 4)
    add(code_p[:, 1] & (ext.k_min < 3.3), c["hypokalemia"], 4)
    add(code_p[:, 2] & (ext.na_min < 133), c["hyponatremia"], 4)
    add(code_p[:, 3] & (ext.hco3_min < 20), c["acidosis"], 4)
    anemia = code_p[:, 4] & (ext.hgb_min < 10)
    add(anemia, np.where(p.ckd[pat], c["anemia_ckd"], c["anemia"]), 4)
    # Status codes (priority 5).

    def on_drug(name):
        s = plan.adm[name][pat]
        return (s >= 0) & (idx_a >= s)

    status = rng.random((A, 6)) < 0.7
    add(status[:, 0] & on_drug("insulin_glargine"), c["insulin_use"], 5)
    add(status[:, 1] & (on_drug("metformin") | on_drug("glipizide")), c["oral_hypoglycemic_use"], 5)
    add(status[:, 2] & on_drug("aspirin"), c["aspirin_use"], 5)
    add(status[:, 3] & on_drug("clopidogrel"), c["antiplatelet_use"], 5)
    add(status[:, 4] & dialysis_on, c["dialysis_status"], 5)
    first_pci = _first_flagged(a, a.pci, p.n)[pat]
    add(status[:, 5] & (first_pci >= 0) & (idx_a > first_pci), c["ptca_status"], 5)

    r_adm = np.concatenate(rows_adm)
    r_key = np.concatenate(rows_key)
    r_prio = np.concatenate(rows_prio)
    # One row per (stay, code), keeping its most important position; then seq_num in order.
    order = np.lexsort((r_prio, r_key, r_adm))
    r_adm, r_key, r_prio = r_adm[order], r_key[order], r_prio[order]
    first = np.r_[True, (np.diff(r_adm) != 0) | (np.diff(r_key) != 0)]
    r_adm, r_key, r_prio = r_adm[first], r_key[first], r_prio[first]
    order = np.lexsort((r_key, r_prio, r_adm))
    r_adm, r_key = r_adm[order], r_key[order]
    seq = _rank_in_sorted_groups(r_adm) + 1
    icd10 = a.icd10[r_adm]
    codes9 = [sv.DX_PAIRS[k][0] for k in DX_KEYS]
    codes10 = [sv.DX_PAIRS[k][1] for k in DX_KEYS]
    code_idx = np.where(icd10, r_key + len(DX_KEYS), r_key)
    return pa.Table.from_arrays(
        [
            _int(ids.subject + a.pat[r_adm], pa.int32()),
            _int(ids.hadm + r_adm, pa.int32()),
            _int(seq, pa.int32()),
            _take(codes9 + codes10, code_idx),
            _int(np.where(icd10, 10, 9), pa.int16()),
        ],
        schema=arrow_schema("diagnoses_icd"),
    )


def _procedures(rng, p, a, plan, ext, ids: _ChunkIds) -> pa.Table:
    """procedures_icd rows: catheterisation / PCI, dialysis, transfusion, lines, echo."""
    A = a.n
    idx_a = np.arange(A)
    pat = a.pat
    rows_adm, rows_grp, rows_day = [], [], []

    def add(mask, key, day):
        sel = idx_a[mask]
        rows_adm.append(sel)
        rows_grp.append(np.full(sel.size, PX_CODE[key], np.int64))
        # A procedure happens during the stay: its chartdate is at most the discharge date.
        last_day = (a.disch[sel] // _DAY) - (a.admit[sel] // _DAY)
        rows_day.append(np.minimum(_masked(day, mask), last_day))

    cath = (a.acs & (rng.random(A) < 0.9)) | a.elective_cath | a.pci
    cath_day = np.where(a.acs, rng.integers(0, 2, A), 0)
    left_only = rng.random(A) < 0.8
    add(cath & left_only, "left_heart_cath", cath_day)
    add(cath & ~left_only, "right_left_cath", cath_day)
    des_stent = rng.random(A) < 0.85
    add(a.pci & des_stent, "pci_des", cath_day)
    add(a.pci & ~des_stent, "pci_balloon", cath_day)
    dialysis_on = (plan.dialysis_from[pat] >= 0) & (idx_a >= plan.dialysis_from[pat])
    first_dialysis = dialysis_on & (idx_a == plan.dialysis_from[pat])
    add(dialysis_on & ((rng.random(A) < 0.85) | first_dialysis), "hemodialysis", 1)
    add(first_dialysis, "dialysis_catheter", 0)
    add((ext.hgb_min < 7.5) & (rng.random(A) < 0.8), "transfusion", 1)
    add(a.sepsis & (rng.random(A) < 0.6), "central_line", 0)
    add((a.acs | a.hf_exac) & (rng.random(A) < 0.4), "echo", 1)

    r_adm = np.concatenate(rows_adm)
    r_grp = np.concatenate(rows_grp)
    r_day = np.concatenate(rows_day)
    icd10 = a.icd10[r_adm]
    # Expand each act into its codes for the stay's ICD version.
    per9 = [sv.PX_GROUPS[k][0] for k in PX_KEYS]
    per10 = [sv.PX_GROUPS[k][1] for k in PX_KEYS]
    n_codes = np.where(
        icd10, np.array([len(x) for x in per10])[r_grp], np.array([len(x) for x in per9])[r_grp]
    )
    rep = np.repeat(np.arange(r_adm.size), n_codes)
    j = _rank_in_sorted_groups(rep)
    flat9 = [code for codes in per9 for code in codes]
    flat10 = [code for codes in per10 for code in codes]
    off9 = np.cumsum([0] + [len(x) for x in per9])[:-1]
    off10 = np.cumsum([0] + [len(x) for x in per10])[:-1] + len(flat9)
    code_idx = np.where(icd10[rep], off10[r_grp[rep]], off9[r_grp[rep]]) + j
    e_adm, e_day = r_adm[rep], r_day[rep]
    order = np.lexsort((np.arange(rep.size), e_day, e_adm))
    e_adm, e_day, code_idx = e_adm[order], e_day[order], code_idx[order]
    # A code appears once per stay.
    key = e_adm * 10_000 + code_idx
    _, uniq = np.unique(key, return_index=True)
    keep = np.zeros(key.size, bool)
    keep[uniq] = True
    e_adm, e_day, code_idx = e_adm[keep], e_day[keep], code_idx[keep]
    seq = _rank_in_sorted_groups(e_adm) + 1
    chartdate = (a.admit[e_adm] // _DAY + e_day) * _DAY
    return pa.Table.from_arrays(
        [
            _int(ids.subject + pat[e_adm], pa.int32()),
            _int(ids.hadm + e_adm, pa.int32()),
            _int(seq, pa.int32()),
            _date(chartdate),
            _take(flat9 + flat10, code_idx),
            _int(np.where(a.icd10[e_adm], 10, 9), pa.int16()),
        ],
        schema=arrow_schema("procedures_icd"),
    )


def _patients_table(p: SimpleNamespace, ids: _ChunkIds) -> pa.Table:
    dod_null = p.death_s == np.iinfo(np.int64).max
    return pa.Table.from_arrays(
        [
            _int(ids.subject + np.arange(p.n), pa.int32()),
            _take(["M", "F"], p.female.astype(np.int32)),
            _int(p.anchor_age, pa.int16()),
            _int(p.anchor_year, pa.int16()),
            _take(ANCHOR_YEAR_GROUPS, p.anchor_group),
            _date(np.where(dod_null, 0, p.death_s), dod_null),
        ],
        schema=arrow_schema("patients"),
    )


def _admissions_table(p: SimpleNamespace, a: SimpleNamespace, ids: _ChunkIds) -> pa.Table:
    pat = a.pat
    no_ed = ~a.ed
    marital_null = p.marital[pat] == len(MARITAL)
    return pa.Table.from_arrays(
        [
            _int(ids.subject + pat, pa.int32()),
            _int(ids.hadm + np.arange(a.n), pa.int32()),
            _ts(a.admit),
            _ts(a.disch),
            _ts(a.disch, ~a.died),
            _take(ADMISSION_TYPES, a.type),
            _take(_providers(), a.provider),
            _take(ADMISSION_LOCATIONS, a.location),
            _take(DISCHARGE_LOCATIONS, a.discharge),
            _take(INSURANCES, p.insurance[pat]),
            _take(LANGUAGES, p.language[pat]),
            _take(MARITAL, np.minimum(p.marital[pat], len(MARITAL) - 1), marital_null),
            _take(RACES, p.race[pat]),
            _ts(a.edreg, no_ed),
            _ts(a.edout, no_ed),
            _int(a.died.astype(np.int16), pa.int16()),
        ],
        schema=arrow_schema("admissions"),
    )


MANIFEST_SCHEMA = pa.schema(
    [
        ("subject_id", pa.int32()),
        ("mode", pa.string()),
        ("designated_disease", pa.string()),
        ("has_diabetes", pa.bool_()),
        ("has_hypertension", pa.bool_()),
        ("has_ckd", pa.bool_()),
        ("has_cad", pa.bool_()),
        ("n_admissions", pa.int32()),
        ("expected_fail", pa.string()),
    ]
)


def _manifest_table(p: SimpleNamespace, ids: _ChunkIds) -> pa.Table:
    fails = [",".join(sorted(MODE_FAILS[m])) for m in MODES]
    des_null = p.designated < 0
    return pa.Table.from_arrays(
        [
            _int(ids.subject + np.arange(p.n), pa.int32()),
            _take(MODES, p.mode),
            _take(INDEX_DISEASES, np.maximum(p.designated, 0), des_null),
            pa.array(p.dm),
            pa.array(p.htn),
            pa.array(p.ckd),
            pa.array(p.cad),
            _int(p.n_adm, pa.int32()),
            _take(fails, p.mode),
        ],
        schema=MANIFEST_SCHEMA,
    )


def generate_chunk(seed: int, chunk_idx: int, n: int, chunk_patients: int) -> dict[str, pa.Table]:
    """All per-patient hosp tables (and the manifest) for one chunk.

    Args:
        seed: dataset seed.
        chunk_idx: chunk number; patients ``chunk_idx * chunk_patients`` onwards.
        n: patients in this chunk (<= chunk_patients).
        chunk_patients: patients per chunk (fixes the chunk's id ranges).

    Returns:
        table name -> arrow table (schemas of :func:`arrow_schema`), plus ``"manifest"``.
    """
    rng = np.random.default_rng([seed, chunk_idx])
    ids = _ChunkIds(chunk_idx * chunk_patients, chunk_patients)
    p = _population(rng, n)
    a = _admissions(rng, p)
    plan = _plan(rng, p, a)
    srng = np.random.default_rng([seed, chunk_idx, shp.SHAPES_STREAM])
    labevents, ext = _labevents(rng, srng, p, a, plan, ids)
    prescriptions, emar = _prescriptions(rng, srng, p, a, plan, ext, ids)
    return {
        "patients": _patients_table(p, ids),
        "admissions": _admissions_table(p, a, ids),
        "labevents": labevents,
        "prescriptions": prescriptions,
        "emar": emar,
        "diagnoses_icd": _diagnoses(rng, p, a, plan, ext, ids),
        "procedures_icd": _procedures(rng, p, a, plan, ext, ids),
        "manifest": _manifest_table(p, ids),
    }


# --------------------------------------------------------------------------- dictionary tables


def dictionary_tables() -> dict[str, pa.Table]:
    """The static tables: d_labitems, d_icd_diagnoses, d_icd_procedures (every emitted code)."""
    items = sorted(sv.LAB_ITEMS.values(), key=lambda i: i.itemid)
    d_lab = pa.Table.from_arrays(
        [
            pa.array([i.itemid for i in items], pa.int32()),
            pa.array([i.label for i in items]),
            pa.array([i.fluid for i in items]),
            pa.array([i.category for i in items]),
        ],
        schema=arrow_schema("d_labitems"),
    )

    def titles(by9: dict[str, str], by10: dict[str, str], table: str) -> pa.Table:
        rows = sorted([(c, 9, t) for c, t in by9.items()] + [(c, 10, t) for c, t in by10.items()])
        return pa.Table.from_arrays(
            [
                pa.array([r[0] for r in rows]),
                pa.array([r[1] for r in rows], pa.int16()),
                pa.array([r[2] for r in rows]),
            ],
            schema=arrow_schema(table),
        )

    return {
        "d_labitems": d_lab,
        "d_icd_diagnoses": titles(sv.ICD9_DX_TITLES, sv.ICD10_DX_TITLES, "d_icd_diagnoses"),
        "d_icd_procedures": titles(sv.ICD9_PX_TITLES, sv.ICD10_PX_TITLES, "d_icd_procedures"),
    }


# --------------------------------------------------------------------------- writers

_CSV_NEEDS_QUOTE = r'[",\r\n]'
_CSV_SLICE_ROWS = 500_000


@lru_cache(maxsize=1)
def _clock_strings() -> pa.Array:
    """ "HH:MM:SS" for every second of the day (index = seconds since midnight)."""
    return _str_table(
        f"{h:02d}:{m:02d}:{sec:02d}" for h in range(24) for m in range(60) for sec in range(60)
    )


def _format_timestamps(col: pa.Array) -> pa.Array:
    """Timestamps as 'YYYY-MM-DD HH:MM:SS' (one formatting per distinct day, then a gather)."""
    micros = pc.fill_null(col.cast(pa.int64()), 0).to_numpy()
    seconds = micros // 1_000_000
    days, clock = np.divmod(seconds, _DAY)
    uniq, inverse = np.unique(days, return_inverse=True)
    dates = _str_table(np.datetime_as_string(uniq.astype("datetime64[D]")).tolist())
    mask = pc.is_null(col).to_numpy(zero_copy_only=False) if col.null_count else None
    date_part = dates.take(pa.array(inverse.astype(np.int32), mask=mask))
    clock_part = _clock_strings().take(pa.array(clock.astype(np.int32)))
    return pc.binary_join_element_wise(date_part, clock_part, " ")


def _csv_column(col: pa.ChunkedArray | pa.Array, sql_type: str) -> pa.Array:
    """One column as CSV text: NULL -> empty, strings quoted only when they must be."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if sql_type == "TIMESTAMP":
        return _format_timestamps(col)
    if sql_type == "VARCHAR":
        # Decide on the distinct values (few) rather than on every row.
        distinct = pc.unique(col)
        needs = pc.fill_null(pc.match_substring_regex(distinct, _CSV_NEEDS_QUOTE), False)
        if not pc.any(needs).as_py():
            return col
        rows = pc.is_in(col, value_set=distinct.filter(needs))
        quoted = pc.binary_join_element_wise('"', pc.replace_substring(col, '"', '""'), '"', "")
        return pc.if_else(rows, quoted, col)
    return pc.cast(col, pa.string())


def csv_bytes(table: pa.Table, name: str) -> Iterator[bytes]:
    """Serialise rows of a hosp table as MIMIC-style CSV lines (no header), in slices.

    Args:
        table: rows with the schema of ``name``.
        name: hosp table name (gives each column's SQL type).

    Yields:
        ``bytes`` blocks, each a whole number of ``\\n``-terminated lines.
    """
    types = list(WRITTEN_TABLES[name].values())
    for start in range(0, table.num_rows, _CSV_SLICE_ROWS):
        part = table.slice(start, _CSV_SLICE_ROWS)
        cols = [_csv_column(part.column(i), types[i]) for i in range(part.num_columns)]
        lines = pc.binary_join_element_wise(
            *cols, ",", null_handling="replace", null_replacement=""
        )
        lines = pc.binary_join_element_wise(lines, pa.scalar("\n"), "")
        lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
        lo, hi = offsets[lines.offset], offsets[lines.offset + len(lines)]
        yield memoryview(lines.buffers()[2])[lo:hi].tobytes()


class _Sink:
    """Appends arrow tables to one output file (parquet row groups or a gzip CSV stream)."""

    def __init__(self, path: Path, name: str, fmt: str) -> None:
        self.name, self.fmt = name, fmt
        self.rows = 0
        if fmt == "parquet":
            self._writer = pq.ParquetWriter(path, arrow_schema(name), compression="zstd")
        else:
            self._raw = open(path, "wb")  # closed in close()
            # mtime=0 and no file name in the header: identical bytes on every run. Level 1
            # is 4x faster than the default 9 for ~25% larger files (still ~18 bytes per
            # labevents row, about what PhysioNet's own files take).
            self._gz = gzip.GzipFile(
                filename="", mode="wb", fileobj=self._raw, mtime=0, compresslevel=1
            )
            self._gz.write((",".join(WRITTEN_TABLES[name]) + "\n").encode())

    def write(self, table: pa.Table) -> None:
        self.rows += table.num_rows
        if self.fmt == "parquet":
            self._writer.write_table(table, row_group_size=1_000_000)
        else:
            for block in csv_bytes(table, self.name):
                self._gz.write(block)

    def close(self) -> None:
        if self.fmt == "parquet":
            self._writer.close()
        else:
            self._gz.close()
            self._raw.close()


# --------------------------------------------------------------------------- public API


def _validate(n_patients, seed, fmt, chunk_patients) -> None:
    for name, value in (
        ("n_patients", n_patients),
        ("seed", seed),
        ("chunk_patients", chunk_patients),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise SyntheticConfigError(f"{name} must be an integer, got {value!r}")
    if not 1 <= n_patients <= MAX_PATIENTS:
        raise SyntheticConfigError(
            f"n_patients must be between 1 and {MAX_PATIENTS:,}, got {n_patients}"
        )
    if seed < 0:
        raise SyntheticConfigError(f"seed must be >= 0, got {seed}")
    if chunk_patients < 1:
        raise SyntheticConfigError(f"chunk_patients must be >= 1, got {chunk_patients}")
    if fmt not in FORMATS:
        raise SyntheticConfigError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")


def generate_hosp(
    out_dir: Path,
    n_patients: int,
    seed: int = 0,
    fmt: str = "csv.gz",
    chunk_patients: int = 20_000,
    progress: bool = False,
) -> dict[str, Path]:
    """Write a SYNTHETIC MIMIC-IV-shaped hosp module under ``out_dir/hosp/``.

    Args:
        out_dir: folder that receives ``hosp/`` (and ``synthetic_manifest.parquet``).
        n_patients: patients to generate (1 .. 500,000).
        seed: dataset seed; with ``n_patients`` and ``chunk_patients`` it fixes every byte.
        fmt: ``"csv.gz"`` (PhysioNet layout) or ``"parquet"``.
        chunk_patients: patients generated (and held in memory) at a time.
        progress: show a progress bar over chunks.

    Returns:
        table name -> written file path, plus ``"manifest"``.

    Raises:
        SyntheticConfigError: an argument is out of range.
    """
    _validate(n_patients, seed, fmt, chunk_patients)
    out_dir = Path(out_dir)
    hosp = out_dir / "hosp"
    manifest_path = out_dir / MANIFEST_NAME
    # A manifest from an earlier run must never sit next to tables it does not describe.
    manifest_path.unlink(missing_ok=True)
    n_chunks = -(-n_patients // chunk_patients)
    chunks = range(n_chunks)
    if progress:
        from tqdm.auto import tqdm

        chunks = tqdm(chunks, desc="synthetic hosp", unit="chunk")
    # Nesting order: hosp/ is renamed into place first, then the manifest that describes it.
    with atomic_path(manifest_path) as tmp_manifest, atomic_path(hosp) as tmp_hosp:
        tmp_hosp.mkdir(parents=True)
        sinks = {name: _Sink(tmp_hosp / f"{name}.{fmt}", name, fmt) for name in WRITTEN_TABLES}
        manifest = pq.ParquetWriter(tmp_manifest, MANIFEST_SCHEMA)
        try:
            for name, table in dictionary_tables().items():
                sinks[name].write(table)
            for chunk_idx in chunks:
                n = min(chunk_patients, n_patients - chunk_idx * chunk_patients)
                tables = generate_chunk(seed, chunk_idx, n, chunk_patients)
                manifest.write_table(tables.pop("manifest"))
                for name, table in tables.items():
                    sinks[name].write(table)
                # Hand the chunk's buffers back so RSS stays at one chunk's worth.
                del tables, table
                pa.default_memory_pool().release_unused()
        finally:
            for sink in sinks.values():
                sink.close()
            manifest.close()
        log.info("synthetic hosp: %s", {k: s.rows for k, s in sinks.items()})
    paths = {name: hosp / f"{name}.{fmt}" for name in WRITTEN_TABLES}
    paths["manifest"] = manifest_path
    return paths


def synthesize(profile: str | None = None, seed: int | None = None, fmt: str = "csv.gz") -> Path:
    """Write the synthetic hosp tables of a profile to ``data/build/<profile>/raw/hosp/``.

    Args:
        profile: ``quick``, ``paper`` or ``mimic-scale`` (default: the active profile).
        seed: dataset seed (default: the profile's).
        fmt: ``"csv.gz"`` or ``"parquet"``.

    Returns:
        The hosp directory written.
    """
    name = resolve_profile(profile)
    sizes = profile_sizes(name)
    hosp = raw_hosp_dir(name)
    generate_hosp(
        hosp.parent,
        n_patients=sizes.n_patients,
        seed=sizes.seed if seed is None else seed,
        fmt=fmt,
    )
    return hosp
