"""The event table: every cohort patient's record as one row per clinical event with a stable
id (paper §3 "Cohort", Fig. 2 stage 2 "deterministic event IDs for provenance").

Extraction runs in DuckDB over the MIMIC-shaped views, restricted to the cohort's subjects.
Ids come from the source record's natural key, never from row order (``ADM-<hadm_id>``,
``LAB-<labevent_id>``, ``RX-<pharmacy_id>[-<k>]``, ``DX-<hadm_id>-<seq_num>``, ...). Visits are
admissions in time order; an event without hadm_id joins the admission whose
[admittime - 1 day, dischtime] holds it. A prescription's BASE diluent rows yield no event; labs
are the 18-lab panel after the plausibility screen, one value per (visit, lab, calendar day).
"""

from __future__ import annotations

import duckdb
import pandas as pd

from clinlib.data.drugnames import SPACES_PATTERN
from clinlib.data.plausibility import screen_labs
from clinlib.data.plausibility_rx import screen_prescriptions
from clinlib.data.schema import ARTIFACTS
from clinlib.data.vocab import LAB_PANEL, PANEL_ITEMIDS

KIND_ORDER = {
    "admission": 0,
    "lab": 1,
    "medication": 2,
    "procedure": 3,
    "diagnosis": 4,
    "discharge": 5,
}
LAB_WINDOW_BEFORE_ADMIT = "1 day"


def _register_panel(con: duckdb.DuckDBPyConnection) -> None:
    by_key = {lab.key: lab for lab in LAB_PANEL}
    panel = pd.DataFrame(
        [
            (
                itemid,
                key,
                rank,
                by_key[key].label,
                by_key[key].unit,
                by_key[key].decimals,
            )
            for itemid, (key, rank) in PANEL_ITEMIDS.items()
        ],
        columns=["itemid", "lab_key", "item_rank", "panel_label", "canon_unit", "decimals"],
    )
    con.register("ct_panel_full", panel)


EVENTS_SQL = f"""
WITH visits AS (
    SELECT a.subject_id, a.hadm_id, a.admittime, a.dischtime, a.admission_type,
           a.discharge_location,
           row_number() OVER (PARTITION BY a.subject_id ORDER BY a.admittime, a.hadm_id) - 1
               AS visit_idx
    FROM admissions a JOIN ct_subjects s USING (subject_id)
),
lab_rows AS (
    -- the cohort's panel labs with a number, screened and in canonical units (plausibility)
    SELECT l.*, p.lab_key, p.item_rank, p.panel_label, p.canon_unit, p.decimals
    FROM ct_labs_ok l
    JOIN ct_panel_full p USING (itemid)
),
lab_direct AS (
    SELECT r.*, v.visit_idx FROM lab_rows r
    JOIN visits v ON v.subject_id = r.subject_id AND v.hadm_id = r.hadm_id
),
lab_windowed AS (
    SELECT * EXCLUDE (rn) FROM (
        SELECT r.* EXCLUDE (hadm_id), v.hadm_id, v.visit_idx,
               row_number() OVER (PARTITION BY r.labevent_id ORDER BY v.admittime) AS rn
        FROM lab_rows r
        JOIN visits v ON v.subject_id = r.subject_id
         AND r.charttime >= v.admittime - INTERVAL {LAB_WINDOW_BEFORE_ADMIT}
         AND r.charttime <= v.dischtime
        WHERE r.hadm_id IS NULL
    ) WHERE rn = 1
),
labs AS (
    SELECT * FROM (
        SELECT *, row_number() OVER (
            PARTITION BY subject_id, hadm_id, lab_key, CAST(charttime AS DATE)
            ORDER BY item_rank, (flag = 'abnormal') DESC NULLS LAST, charttime, labevent_id
        ) AS keep_rank
        FROM (SELECT * FROM lab_direct UNION ALL BY NAME SELECT * FROM lab_windowed)
    ) WHERE keep_rank = 1
),
rx_keyed AS (
    -- the cohort's plausible medication-order rows, keyed RX-<pharmacy_id>[-<k>]
    -- (clinlib.data.plausibility_rx; k ranks a pharmacy_id's rows by content)
    SELECT * FROM ct_rx_ok
),
rx_rows AS (
    SELECT r.*, v.visit_idx, v.admittime AS v_admit FROM rx_keyed r
    JOIN visits v ON v.subject_id = r.subject_id AND v.hadm_id = r.hadm_id
    UNION ALL BY NAME
    SELECT * EXCLUDE (rn) FROM (
        SELECT r.* EXCLUDE (hadm_id), v.hadm_id, v.visit_idx, v.admittime AS v_admit,
               row_number() OVER (PARTITION BY r.rx_id ORDER BY v.admittime) AS rn
        FROM rx_keyed r
        JOIN visits v ON v.subject_id = r.subject_id
         AND r.starttime >= v.admittime - INTERVAL {LAB_WINDOW_BEFORE_ADMIT}
         AND r.starttime <= v.dischtime
        WHERE r.hadm_id IS NULL
    ) WHERE rn = 1
)
SELECT 'ADM-' || hadm_id AS event_id, subject_id, hadm_id, visit_idx, admittime AS time,
       'admission' AS kind, admission_type AS code, 'admission_type' AS code_system,
       'Admission' AS label, NULL::DOUBLE AS value, NULL::VARCHAR AS value_text,
       NULL::VARCHAR AS unit, NULL::DOUBLE AS ref_low, NULL::DOUBLE AS ref_high,
       NULL::VARCHAR AS flag, NULL::VARCHAR AS route, dischtime AS end_time,
       'admissions' AS source
FROM visits
UNION ALL
SELECT 'DIS-' || hadm_id, subject_id, hadm_id, visit_idx, dischtime, 'discharge',
       discharge_location, 'discharge_location', 'Discharge', NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, 'admissions'
FROM visits
UNION ALL
SELECT 'LAB-' || labevent_id, subject_id, hadm_id, visit_idx, charttime, 'lab',
       CAST(itemid AS VARCHAR), 'itemid', panel_label, valuenum,
       CASE WHEN value IS NULL OR trim(value) IN ('', '___')
            THEN printf('%.' || decimals || 'f', valuenum) ELSE trim(value) END,
       nullif(trim(valueuom), ''), ref_range_lower, ref_range_upper,
       CASE WHEN flag = 'abnormal' THEN 'abnormal' END, NULL, NULL, 'labevents'
FROM labs
UNION ALL
SELECT rx_id, subject_id, hadm_id, visit_idx, coalesce(starttime, v_admit),
       'medication', drug, 'drug', trim(regexp_replace(drug, '{SPACES_PATTERN}', ' ', 'g')),
       CASE WHEN dose_num <> 0 THEN dose_num END,
       CASE WHEN dose_num IS NULL OR dose_num <> 0 THEN dose_val_rx END,
       CASE WHEN dose_num IS NULL OR dose_num <> 0 THEN dose_unit_rx END,
       NULL, NULL, NULL, route, stoptime, 'prescriptions'
FROM rx_rows
UNION ALL
SELECT 'DX-' || d.hadm_id || '-' || d.seq_num, d.subject_id, d.hadm_id, v.visit_idx,
       v.dischtime, 'diagnosis', trim(d.icd_code),
       CASE WHEN d.icd_version = 9 THEN 'ICD9-CM' ELSE 'ICD10-CM' END, t.long_title,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'diagnoses_icd'
FROM diagnoses_icd d
JOIN visits v ON v.subject_id = d.subject_id AND v.hadm_id = d.hadm_id
LEFT JOIN d_icd_diagnoses t ON t.icd_code = d.icd_code AND t.icd_version = d.icd_version
UNION ALL
SELECT 'PX-' || p.hadm_id || '-' || p.seq_num, p.subject_id, p.hadm_id, v.visit_idx,
       CAST(p.chartdate AS TIMESTAMP), 'procedure', trim(p.icd_code),
       CASE WHEN p.icd_version = 9 THEN 'ICD9-PCS' ELSE 'ICD10-PCS' END, t.long_title,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'procedures_icd'
FROM procedures_icd p
JOIN visits v ON v.subject_id = p.subject_id AND v.hadm_id = p.hadm_id
LEFT JOIN d_icd_procedures t ON t.icd_code = p.icd_code AND t.icd_version = p.icd_version
"""


def extract_events(con: duckdb.DuckDBPyConnection, subject_ids) -> pd.DataFrame:
    """Extract the event table for ``subject_ids``.

    Args:
        con: DuckDB connection with MIMIC-shaped hosp views.
        subject_ids: the cohort's subject ids.

    Returns:
        One row per event, columns as ``clinlib.data.schema.ARTIFACTS["events"]``, sorted by
        subject, visit, time, kind (admission first, discharge last) and event_id.
    """
    _register_panel(con)
    con.register("ct_subjects", pd.DataFrame({"subject_id": pd.Series(subject_ids, dtype="int64")}))
    screen_labs(con)  # the excluded rows stay queryable: plausibility.lab_exclusions(con)
    screen_prescriptions(con)  # likewise: plausibility_rx.rx_exclusions(con)
    df = con.execute(EVENTS_SQL).df()
    return normalize_events(df)


def normalize_events(df: pd.DataFrame) -> pd.DataFrame:
    """Cast to the artifact dtypes and sort deterministically."""
    cols = ARTIFACTS["events"]
    df = df[list(cols)].copy()
    for col, dtype in cols.items():
        if dtype.startswith("datetime"):
            df[col] = pd.to_datetime(df[col]).astype("datetime64[us]")
        elif dtype == "string":
            df[col] = df[col].astype("string")
        else:
            df[col] = df[col].astype(dtype)
    df["_k"] = df["kind"].map(KIND_ORDER)
    df = df.sort_values(["subject_id", "visit_idx", "time", "_k", "event_id"], kind="stable")
    return df.drop(columns="_k").reset_index(drop=True)
