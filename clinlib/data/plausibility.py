"""Plausibility screen of the cohort stage (paper §3 "Cohort"): a source row that is clinically
impossible is excluded with its reason, counted and reported, never stated in a dialogue or
asked about. One documented rule per field (docs/real-data.md "Impossible values are
excluded, counted and reported, never stated"): admissions are screened before cohort
selection, panel labs after unit conversion (:data:`UNIT_FACTORS`, :data:`BOUNDS`);
prescriptions in :mod:`clinlib.data.plausibility_rx`. Each excluded row is a row of
``exclusions.parquet``.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from clinlib.core.guards import check_kept, group_reasons
from clinlib.data.units import convert_sql, units_frame

MIN_YEAR, MAX_YEAR = 1900, 2300
MAX_AGE = 125

# Physiological bounds per panel lab, in its canonical unit (inclusive).
BOUNDS: dict[str, tuple[float, float]] = {
    "creatinine": (0.01, 40.0),
    "potassium": (1.0, 12.0),
    "sodium": (90.0, 200.0),
    "glucose": (5.0, 3000.0),
    "bun": (0.5, 500.0),
    "bicarbonate": (1.0, 70.0),
    "chloride": (50.0, 170.0),
    "anion_gap": (-15.0, 80.0),
    "calcium": (1.0, 30.0),
    "hemoglobin": (0.5, 30.0),
    "hematocrit": (2.0, 85.0),
    "platelets": (0.0, 5000.0),
    "wbc": (0.0, 1500.0),
    "hba1c": (2.0, 25.0),
    "ldl": (0.0, 2000.0),
    "total_cholesterol": (10.0, 3000.0),
    "triglycerides": (1.0, 30000.0),
    "troponin_t": (0.0, 100.0),
}
EXCLUSION_COLUMNS = ("table", "rule", "key", "subject_id", "field", "value")
# The admissions as recorded, kept queryable under this name by screen_admissions (the cohort
# stage's LongMedBench rule reads their completeness: clinlib.data.cohort).
RAW_ADMISSIONS = "ct_raw_admissions"


def _admission_rules_sql(has_dod: bool) -> str:
    dod = (
        (
            "WHEN p.dod IS NOT NULL AND CAST(a.admittime AS DATE) > p.dod "
            "THEN 'admission_after_death'"
        )
        if has_dod
        else ""
    )
    return f"""
    SELECT a.subject_id, a.hadm_id, a.admittime, a.dischtime,
           CASE WHEN a.admittime IS NULL OR year(a.admittime) NOT BETWEEN {MIN_YEAR} AND {MAX_YEAR}
                     THEN 'admittime_out_of_range'
                WHEN p.anchor_age + year(a.admittime) - p.anchor_year NOT BETWEEN 0 AND {MAX_AGE}
                     THEN 'age_at_admission_out_of_range'
                WHEN a.dischtime IS NULL OR a.dischtime < a.admittime
                     THEN 'discharge_before_admission'
                {dod}
           END AS rule
    FROM ct_raw_admissions a LEFT JOIN patients p USING (subject_id)
    """


def screen_admissions(con: duckdb.DuckDBPyConnection) -> tuple[pd.DataFrame, int]:
    """Replace the ``admissions`` view by its plausible rows.

    Returns:
        (exclusion rows (:data:`EXCLUSION_COLUMNS`), one per excluded admission; the number
        of admissions screened).
    """
    con.execute(f"ALTER VIEW admissions RENAME TO {RAW_ADMISSIONS}")
    cols = {r[0] for r in con.execute("DESCRIBE patients").fetchall()}
    con.execute(f"CREATE TEMP TABLE ct_adm_rules AS {_admission_rules_sql('dod' in cols)}")
    con.execute("""
        CREATE TEMP VIEW admissions AS
        SELECT a.* FROM ct_raw_admissions a
        WHERE a.hadm_id NOT IN (SELECT hadm_id FROM ct_adm_rules WHERE rule IS NOT NULL)
    """)
    bad = con.execute("""
        SELECT 'admissions' AS "table", rule, CAST(hadm_id AS VARCHAR) AS key, subject_id,
               CASE rule WHEN 'discharge_before_admission' THEN 'dischtime'
                         ELSE 'admittime' END AS field,
               CASE rule WHEN 'discharge_before_admission' THEN CAST(dischtime AS VARCHAR)
                         ELSE CAST(admittime AS VARCHAR) END AS value
        FROM ct_adm_rules WHERE rule IS NOT NULL ORDER BY subject_id, hadm_id
    """).df()
    n_all = con.execute("SELECT count(*) FROM ct_adm_rules").fetchall()[0][0]  # the view reads it
    return bad, int(n_all)


def _bounds_frame() -> pd.DataFrame:
    return pd.DataFrame(
        [(k, lo, hi) for k, (lo, hi) in BOUNDS.items()], columns=["lab_key", "lo", "hi"]
    )


SCREEN_LABS_SQL = """
CREATE TEMP TABLE ct_lab_screen AS
SELECT l.*, p.lab_key, p.canon_unit, u.factor,
       CASE WHEN isnan(l.valuenum) OR isinf(l.valuenum) THEN 'value_not_finite'
            WHEN nullif(trim(l.valueuom), '') IS NULL AND p.canon_unit <> ''
                 THEN 'unit_missing'
            WHEN nullif(trim(l.valueuom), '') IS NOT NULL AND u.factor IS NULL
                 THEN 'unit_not_convertible'
            WHEN l.valuenum * coalesce(u.factor, 1) NOT BETWEEN b.lo AND b.hi
                 THEN 'value_out_of_bounds'
            WHEN l.hadm_id IS NOT NULL AND NOT EXISTS (
                 SELECT 1 FROM ct_raw_admissions a
                 WHERE a.hadm_id = l.hadm_id AND a.subject_id = l.subject_id)
                 THEN 'unknown_hadm_id'
            WHEN l.hadm_id IS NOT NULL AND NOT EXISTS (
                 SELECT 1 FROM admissions a WHERE a.hadm_id = l.hadm_id)
                 THEN 'admission_excluded'
       END AS rule
FROM labevents l
JOIN ct_subjects s USING (subject_id)
JOIN ct_panel_full p USING (itemid)
JOIN ct_bounds b USING (lab_key)
LEFT JOIN ct_units u ON u.lab_key = p.lab_key AND u.unit = trim(l.valueuom)
WHERE l.valuenum IS NOT NULL
"""


def screen_labs(con: duckdb.DuckDBPyConnection) -> None:
    """Create ``ct_labs_ok``: the cohort's plausible panel labs with a number, in canonical
    units, with ``labevents``' columns (the excluded rows: :func:`lab_exclusions`).

    Needs ``ct_subjects`` and ``ct_panel_full`` registered (clinlib.data.events) and the
    ``admissions`` view screened by :func:`screen_admissions` (else no admission rule).
    """
    if not view_exists(con, RAW_ADMISSIONS):
        con.execute(f"CREATE TEMP VIEW {RAW_ADMISSIONS} AS SELECT * FROM admissions")
    con.register("ct_units", units_frame())
    con.register("ct_bounds", _bounds_frame())
    con.execute("DROP TABLE IF EXISTS ct_lab_screen")
    con.execute(SCREEN_LABS_SQL)
    # converted rows: the number and range in canonical units, the text re-formatted from it
    con.execute(f"""
        CREATE OR REPLACE TEMP VIEW ct_labs_ok AS
        SELECT * EXCLUDE (lab_key, canon_unit, factor, rule) REPLACE (
            {convert_sql("valuenum", "factor")} AS valuenum,
            CASE WHEN factor IS NULL OR factor = 1 THEN value END AS value,
            CASE WHEN factor IS NULL THEN valueuom ELSE canon_unit END AS valueuom,
            {convert_sql("ref_range_lower", "factor")} AS ref_range_lower,
            {convert_sql("ref_range_upper", "factor")} AS ref_range_upper)
        FROM ct_lab_screen WHERE rule IS NULL
    """)


def lab_conversions(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The cohort's kept panel lab rows :func:`screen_labs` converted from a known alternative
    unit (value and range, :mod:`clinlib.data.units`), counted per lab and unit:
    (lab_key, from_unit, to_unit, factor, rows)."""
    return con.execute("""
        SELECT lab_key, trim(valueuom) AS from_unit, canon_unit AS to_unit, factor,
               count(*) AS rows
        FROM ct_lab_screen WHERE rule IS NULL AND factor IS NOT NULL AND factor <> 1
        GROUP BY ALL ORDER BY lab_key, from_unit
    """).df()


def lab_exclusions(con: duckdb.DuckDBPyConnection) -> tuple[pd.DataFrame, int]:
    """(the lab rows :func:`screen_labs` excluded, as exclusion rows; the rows screened)."""
    bad = con.execute("""
        SELECT 'labevents' AS "table", rule, CAST(labevent_id AS VARCHAR) AS key, subject_id,
               CASE rule WHEN 'unit_not_convertible' THEN 'valueuom'
                         WHEN 'unit_missing' THEN 'valueuom'
                         WHEN 'unknown_hadm_id' THEN 'hadm_id'
                         WHEN 'admission_excluded' THEN 'hadm_id'
                         ELSE 'valuenum' END AS field,
               CASE rule WHEN 'unit_not_convertible' THEN valueuom
                         WHEN 'unit_missing' THEN coalesce(valueuom, '')
                         WHEN 'unknown_hadm_id' THEN CAST(hadm_id AS VARCHAR)
                         WHEN 'admission_excluded' THEN CAST(hadm_id AS VARCHAR)
                         ELSE CAST(valuenum AS VARCHAR) || ' ' || coalesce(valueuom, '')
                         END AS value
        FROM ct_lab_screen WHERE rule IS NOT NULL ORDER BY subject_id, labevent_id
    """).df()
    n_all = con.execute("SELECT count(*) FROM ct_lab_screen").fetchall()[0][0]
    return bad, int(n_all)


def stay_exclusions(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The diagnosis and procedure rows an excluded admission of the cohort's patients takes
    with it (rule ``admission_excluded``, key ``<hadm_id>-<seq_num>``), so that every row of
    an excluded stay is counted by kind (its labs and orders are screened rows of their own:
    :func:`lab_exclusions`, clinlib.data.plausibility_rx). Needs ``ct_subjects`` and the
    screened ``admissions`` view."""
    parts = []
    for table in ("diagnoses_icd", "procedures_icd"):
        parts.append(f"""
            SELECT '{table}' AS "table", 'admission_excluded' AS rule,
                   CAST(d.hadm_id AS VARCHAR) || '-' || CAST(d.seq_num AS VARCHAR) AS key,
                   d.subject_id, 'hadm_id' AS field, CAST(d.hadm_id AS VARCHAR) AS value
            FROM {table} d JOIN ct_subjects s USING (subject_id)
            WHERE d.hadm_id IN (SELECT hadm_id FROM {RAW_ADMISSIONS})
              AND d.hadm_id NOT IN (SELECT hadm_id FROM admissions)""")
    sql = " UNION ALL ".join(parts) + ' ORDER BY "table", subject_id, key'
    return con.execute(sql).df()


def view_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    q = "SELECT count(*) FROM duckdb_views() WHERE view_name = ?"
    return bool(con.execute(q, [name]).fetchall()[0][0])


def check_excluded(what: str, total: int, bad: pd.DataFrame, allow_drops: bool) -> None:
    """The drop guard: more than MAX_DROP_SHARE of ``what`` implausible fails the stage."""
    if total:
        reasons = group_reasons(bad["rule"]) if len(bad) else None
        check_kept(
            "cohort (plausibility)", what, total - len(bad), total, reasons, allow_drops=allow_drops
        )


def summary_lines(exclusions: pd.DataFrame) -> list[str]:
    """``labevents: 3 rows excluded ('value_out_of_bounds' x2, 'unit_not_convertible' x1)``."""
    lines = []
    for table, part in exclusions.groupby("table", sort=True):
        counts = part["rule"].value_counts()
        why = ", ".join(f"{r!r} x{n}" for r, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        lines.append(f"{table}: {len(part)} rows excluded as implausible ({why})")
    return lines


def apply_exclusions(con: duckdb.DuckDBPyConnection, exclusions: pd.DataFrame) -> None:
    """Hide a build's excluded rows (its ``exclusions.parquet``) from the raw ``admissions``
    and ``labevents`` views of ``con``, so that a reader of the raw source (the L2 gold
    recompute) sees the rows the events were built from: an excluded stay is no visit there
    either, and an impossible value is no measurement. The rules are not re-run: the recorded
    keys are the data."""
    for table, key in (
        ("admissions", "hadm_id"),
        ("labevents", "labevent_id"),
        ("prescriptions", "pharmacy_id"),  # a whole pharmacy order (plausibility_rx)
    ):
        keys = exclusions.loc[exclusions["table"] == table, "key"]
        if keys.empty:
            continue
        con.register(f"ct_excluded_{table}", pd.DataFrame({"k": keys.astype("int64")}))
        con.execute(f"ALTER VIEW {table} RENAME TO ct_unscreened_{table}")
        con.execute(
            f"CREATE TEMP VIEW {table} AS SELECT * FROM ct_unscreened_{table} "
            f"WHERE {key} IS NULL OR {key} NOT IN (SELECT k FROM ct_excluded_{table})"
        )
