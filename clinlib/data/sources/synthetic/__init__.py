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

Layout, one module per table family: :mod:`.design` (shared constants), :mod:`.population`
(patients, admissions), :mod:`.treatment` (chronic drug starts), :mod:`.labvalues`,
:mod:`.labdraws` and :mod:`.labevents` (labs), :mod:`.orders` (prescriptions, emar),
:mod:`.codes` (diagnoses, procedures), :mod:`.tables` (patients, admissions, dictionaries,
manifest), :mod:`.writer` (CSV / parquet) and :mod:`.generate` (chunks and the entry points).
Every chunk draws from one base generator in a fixed order (population, admissions,
treatment, labs, orders, diagnoses, procedures): moving a draw between these steps changes
every byte after it.
"""

from clinlib.data.sources.synthetic.arrow import WRITTEN_TABLES, arrow_schema
from clinlib.data.sources.synthetic.design import (
    COHORT_RULES,
    FORMATS,
    HADM_PER_PATIENT,
    LAB_COMMENTS,
    LABEVENTS_PER_PATIENT,
    MANIFEST_NAME,
    MODE_FAILS,
    MODE_SHARES,
    MODES,
    SyntheticConfigError,
)
from clinlib.data.sources.synthetic.generate import generate_chunk, generate_hosp, synthesize
from clinlib.data.sources.synthetic.labevents import format_fixed
from clinlib.data.sources.synthetic.tables import MANIFEST_SCHEMA, dictionary_tables
from clinlib.data.sources.synthetic.writer import csv_bytes

__all__ = [
    "COHORT_RULES",
    "FORMATS",
    "HADM_PER_PATIENT",
    "LAB_COMMENTS",
    "LABEVENTS_PER_PATIENT",
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "MODE_FAILS",
    "MODE_SHARES",
    "MODES",
    "WRITTEN_TABLES",
    "SyntheticConfigError",
    "arrow_schema",
    "csv_bytes",
    "dictionary_tables",
    "format_fixed",
    "generate_chunk",
    "generate_hosp",
    "synthesize",
]
