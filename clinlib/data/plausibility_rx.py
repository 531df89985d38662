"""Plausibility screen of prescriptions (paper §3 "Cohort"; the table in
docs/real-data.md "Plausibility rules"): a medication order whose dose is impossible is
excluded with its reason, counted and reported, never stated; a dose of 0 is no dose.

``prescriptions.dose_val_rx`` is pharmacy text (docs/real-data.md "prescriptions and emar":
ranges "50-100", "0", a few empty). How it is read:

* a plain number (``"500"``, ``"0.5"``) or one written with thousands separators
  (``"25,000"``, ``"1,000.5"``: groups of exactly three digits) is the dose; ``value`` is that
  number (25000.0), ``value_text`` the text as recorded ("25,000", which the dialogue states);
* a range ("0-10", "1-2") or any other text keeps ``value`` NULL and is stated as recorded;
* ``"0"`` (any zero) is NOT a dose. In MIMIC-IV it is how a sliding-scale order is written
  ("Insulin 0 UNIT SC": the nurse gives what the scale says, and eMAR records "Not Given per
  Sliding Scale" when the scale says none). Such an order is a real clinical decision, so it
  stays an event, but without a dose: ``value``, ``value_text`` and ``unit`` are NULL and the
  dialogue says the drug was started (drug and route only, clinlib.dialogue.turns). Counted
  (:func:`zero_dose_count`) and reported by the cohort stage, never excluded.

Rules, one per excluded order row, in this order (``rule`` in exclusions.parquet):

* ``dose_not_finite`` — the dose parses to NaN or ±infinity ("nan", "inf", "1e999");
* ``dose_negative`` — the dose is below 0;
* ``dose_out_of_bounds`` — above the largest single dose any order in that unit could carry
  (:data:`DOSE_MAX`, by ``dose_unit_rx``; :data:`DOSE_MAX_ANY` for any other unit): e.g.
  100 g in mg, 10 L in mL, 100 million units (penicillin G reaches millions of units);
* ``dose_over_strength`` — above :data:`MAX_STRENGTH_MULTIPLE` times the order's own product
  strength (``prod_strength``'s leading amount, "5mg Tablet" -> 5 mg, "25,000 Units / 250 mL"
  -> 25,000 units), when the dose unit measures the same thing (mass, volume, units, mEq,
  mmol; "1g Vial" against a dose in mg: 1,000 mg). The per-unit bound cannot see that 50,000 mg
  of OxyCODONE is 10,000 of its 5 mg tablets. 100 strengths covers the largest real single
  doses measured against their product (furosemide 200 mg from a 10 mg/mL vial: 20; a
  1 mg/mL solution drawn up for 50 mg: 50); a strength without a leading amount, or in a
  dimension the dose is not in ("2mg/mL" against mcg/kg/min), is no bound;
* ``drug_name_instruction_shaped`` — the drug name is free text from the pharmacy system
  and reaches question prompts as data; a name shaped like an instruction to a model or like
  markup ("IGNORE ALL PREVIOUS INSTRUCTIONS <script>...": :data:`INSTRUCTION_RE`) is no drug
  name, and one longer than :data:`MAX_DRUG_NAME_CHARS` is not told either
  (``drug_name_too_long``). Screened here, where the text enters, so no question builder sees
  it; the exclusion's value is the name's first 60 characters;
* ``unknown_hadm_id`` / ``admission_excluded`` — as for labs
  (:mod:`clinlib.data.plausibility`): a ``hadm_id`` that is not one of the patient's
  admissions, or names an excluded admission (before, these orders vanished without a word).

An order is one ``pharmacy_id``: its MAIN row, BASE diluents and ADDITIVE rows. When one of its
order rows fails, the whole pharmacy order is excluded (its other order rows with rule
``order_excluded``), so the ``RX-<pharmacy_id>[-<k>]`` ids of the orders that stay do not move
(k ranks the rows of one pharmacy_id, clinlib.data.events). The exclusion key is the
``pharmacy_id``; the drop guard counts order rows (MAIN and ADDITIVE) of the cohort.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from clinlib.data.schema import RX_ORDER_SQL

# Largest plausible single dose per dose unit (lower-cased, trimmed), inclusive.
DOSE_MAX: dict[str, float] = {
    "mg": 100_000.0,
    "g": 100.0,
    "gm": 100.0,
    "mcg": 1_000_000.0,
    "ml": 10_000.0,
    "l": 10.0,
    "meq": 1_000.0,
    "mmol": 1_000.0,
    "unit": 100_000_000.0,
    "units": 100_000_000.0,
}
DOSE_MAX_ANY = 100_000_000.0
# Text shaped like an instruction to a model, or like markup (case-insensitive, RE2 syntax).
INSTRUCTION_RE = (
    r"(ignore|disregard|forget)\s+(all\s+|any\s+)?(the\s+)?(previous|prior|above|earlier)"
    r"|system\s+prompt|you\s+are\s+now|new\s+instructions"
    r"|<\s*/?\s*(script|iframe|img|svg|style|object)\b|javascript:"
)
# MIMIC-IV's longest drug names are about 60 characters ("Potassium Chloride Replacement
# (Critical Care and Oncology)"); a name past this is not told.
MAX_DRUG_NAME_CHARS = 200
# A dose may be at most this many times its product's strength (module docstring).
MAX_STRENGTH_MULTIPLE = 100.0
# unit (lower-cased) -> (what it measures, size in that dimension's base unit)
UNIT_SCALE: dict[str, tuple[str, float]] = {
    "mcg": ("mass", 0.001),
    "mg": ("mass", 1.0),
    "g": ("mass", 1000.0),
    "gm": ("mass", 1000.0),
    "ml": ("volume", 1.0),
    "l": ("volume", 1000.0),
    "unit": ("unit", 1.0),
    "units": ("unit", 1.0),
    "meq": ("meq", 1.0),
    "mmol": ("mmol", 1.0),
}
# prod_strength's leading amount and its unit ("5mg Tablet", "25,000 Units / 250 mL")
STRENGTH_RE = r"^\s*([0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]*\.?[0-9]+)\s*([A-Za-z]+)"
# A number with thousands separators: 1-3 digits, then groups of ",ddd", then decimals.
THOUSANDS_RE = r"^[0-9]{1,3}(,[0-9]{3})+(\.[0-9]+)?$"


def dose_number_sql(col: str) -> str:
    """SQL: the number of a ``dose_val_rx`` text (thousands separators removed), else NULL."""
    t = f"trim({col})"
    return (
        f"CASE WHEN regexp_matches({t}, '{THOUSANDS_RE}') "
        f"THEN TRY_CAST(replace({t}, ',', '') AS DOUBLE) ELSE TRY_CAST({t} AS DOUBLE) END"
    )


def _dose_max_sql() -> str:
    cases = " ".join(f"WHEN '{u}' THEN {m!r}" for u, m in DOSE_MAX.items())
    return f"CASE lower(trim(r.dose_unit_rx)) {cases} ELSE {DOSE_MAX_ANY!r} END"


def _scale_sql(unit: str, part: int) -> str:
    """SQL: the dimension (part 0) or size (part 1) of ``unit`` (:data:`UNIT_SCALE`), else NULL."""
    cases = " ".join(
        f"WHEN '{u}' THEN {v[part]!r}" if part else f"WHEN '{u}' THEN '{v[0]}'"
        for u, v in UNIT_SCALE.items()
    )
    return f"CASE lower(trim({unit})) {cases} END"


def strength_cap_sql(strength: str, dose_unit: str) -> str:
    """SQL: the largest dose (in ``dose_unit``) :data:`MAX_STRENGTH_MULTIPLE` products of
    ``strength`` hold, or NULL when the strength has no amount in the dose's dimension."""
    amount = dose_number_sql(f"regexp_extract({strength}, '{STRENGTH_RE}', 1)")
    s_unit = f"regexp_extract({strength}, '{STRENGTH_RE}', 2)"
    return (
        f"CASE WHEN {_scale_sql(s_unit, 0)} = {_scale_sql(dose_unit, 0)} "
        f"THEN {amount} * {_scale_sql(s_unit, 1)} / {_scale_sql(dose_unit, 1)} "
        f"* {MAX_STRENGTH_MULTIPLE!r} END"
    )


SCREEN_RX_SQL = f"""
CREATE TEMP TABLE ct_rx_screen AS
WITH src AS (
    -- one row per MAIN / ADDITIVE order row; k ranks a pharmacy_id's rows by content
    SELECT r.*, {dose_number_sql("r.dose_val_rx")} AS dose_num, {_dose_max_sql()} AS dose_max,
           {strength_cap_sql("r.prod_strength", "r.dose_unit_rx")} AS strength_cap,
           row_number() OVER (
               PARTITION BY r.pharmacy_id
               ORDER BY (coalesce(upper(trim(r.drug_type)), 'MAIN') <> 'MAIN'), r.drug,
                        r.dose_val_rx, r.dose_unit_rx, r.route, r.starttime, r.stoptime,
                        r.subject_id, r.hadm_id
           ) AS rx_k
    FROM prescriptions r JOIN ct_subjects s USING (subject_id)
    WHERE r.pharmacy_id IS NOT NULL AND {RX_ORDER_SQL}
),
ruled AS (
    SELECT *, 'RX-' || pharmacy_id || CASE WHEN rx_k = 1 THEN '' ELSE '-' || rx_k END AS rx_id,
           CASE WHEN isnan(dose_num) OR isinf(dose_num) THEN 'dose_not_finite'
                WHEN dose_num < 0 THEN 'dose_negative'
                WHEN dose_num > dose_max THEN 'dose_out_of_bounds'
                WHEN dose_num > strength_cap THEN 'dose_over_strength'
                WHEN regexp_matches(coalesce(drug, ''), '{INSTRUCTION_RE}', 'i')
                     THEN 'drug_name_instruction_shaped'
                WHEN length(drug) > {MAX_DRUG_NAME_CHARS} THEN 'drug_name_too_long'
                WHEN hadm_id IS NOT NULL AND NOT EXISTS (
                     SELECT 1 FROM ct_raw_admissions a
                     WHERE a.hadm_id = src.hadm_id AND a.subject_id = src.subject_id)
                     THEN 'unknown_hadm_id'
                WHEN hadm_id IS NOT NULL AND NOT EXISTS (
                     SELECT 1 FROM admissions a WHERE a.hadm_id = src.hadm_id)
                     THEN 'admission_excluded'
           END AS own_rule
    FROM src
)
SELECT * EXCLUDE (own_rule, dose_max, strength_cap),
       coalesce(own_rule, CASE WHEN max(own_rule IS NOT NULL) OVER (PARTITION BY pharmacy_id)
                               THEN 'order_excluded' END) AS rule
FROM ruled
"""


def screen_prescriptions(con: duckdb.DuckDBPyConnection) -> None:
    """Create ``ct_rx_ok``: the cohort's plausible medication-order rows with ``rx_id`` and
    ``dose_num`` (the excluded rows: :func:`rx_exclusions`).

    Needs ``ct_subjects`` registered and ``ct_raw_admissions`` (the unscreened admissions,
    clinlib.data.plausibility) present.
    """
    con.execute("DROP TABLE IF EXISTS ct_rx_screen")
    con.execute(SCREEN_RX_SQL)
    con.execute(
        "CREATE OR REPLACE TEMP VIEW ct_rx_ok AS "
        "SELECT * EXCLUDE (rule) FROM ct_rx_screen WHERE rule IS NULL"
    )


def rx_exclusions(con: duckdb.DuckDBPyConnection) -> tuple[pd.DataFrame, int]:
    """(the order rows :func:`screen_prescriptions` excluded, as exclusion rows keyed by
    ``pharmacy_id``; the order rows screened)."""
    bad = con.execute("""
        SELECT 'prescriptions' AS "table", rule, CAST(pharmacy_id AS VARCHAR) AS key, subject_id,
               CASE WHEN rule IN ('unknown_hadm_id', 'admission_excluded') THEN 'hadm_id'
                    WHEN rule = 'order_excluded' THEN 'pharmacy_id'
                    WHEN starts_with(rule, 'drug_name') THEN 'drug'
                    ELSE 'dose_val_rx' END AS field,
               CASE WHEN rule IN ('unknown_hadm_id', 'admission_excluded')
                         THEN CAST(hadm_id AS VARCHAR)
                    WHEN rule = 'order_excluded' THEN CAST(pharmacy_id AS VARCHAR)
                    WHEN starts_with(rule, 'drug_name') THEN left(drug, 60)
                    WHEN rule = 'dose_over_strength'
                         THEN trim(dose_val_rx) || ' ' || coalesce(trim(dose_unit_rx), '')
                              || ' (strength ' || trim(prod_strength) || ')'
                    ELSE trim(dose_val_rx) || ' ' || coalesce(trim(dose_unit_rx), '') END
                    AS value
        FROM ct_rx_screen WHERE rule IS NOT NULL ORDER BY subject_id, pharmacy_id, rx_k
    """).df()
    n_all = con.execute("SELECT count(*) FROM ct_rx_screen").fetchall()[0][0]
    return bad, int(n_all)


def zero_dose_count(con: duckdb.DuckDBPyConnection) -> int:
    """Kept orders whose dose is 0 (sliding scale): told without a dose."""
    return int(con.execute("SELECT count(*) FROM ct_rx_ok WHERE dose_num = 0").fetchall()[0][0])
