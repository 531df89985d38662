"""Table schemas: MIMIC-IV hosp source tables and the kit's stage artifacts.

Source schemas follow MIT-LCP/mimic-code ``buildmimic/postgres/create.sql`` (v2.2; v3.x
adds columns, which readers tolerate). ``REQUIRED`` marks the columns the kit reads; a real
MIMIC-IV directory must have them with a compatible type. Artifact schemas are the
docs/design.md contract ("The artifact contract") plus the kit's documented additions.
"""

from __future__ import annotations

# DuckDB type names. Order = MIMIC-IV column order (the synthetic writer emits exactly this).
HOSP_TABLES: dict[str, dict[str, str]] = {
    "patients": {
        "subject_id": "INTEGER",
        "gender": "VARCHAR",
        "anchor_age": "SMALLINT",
        "anchor_year": "SMALLINT",
        "anchor_year_group": "VARCHAR",
        "dod": "DATE",
    },
    "admissions": {
        "subject_id": "INTEGER",
        "hadm_id": "INTEGER",
        "admittime": "TIMESTAMP",
        "dischtime": "TIMESTAMP",
        "deathtime": "TIMESTAMP",
        "admission_type": "VARCHAR",
        "admit_provider_id": "VARCHAR",
        "admission_location": "VARCHAR",
        "discharge_location": "VARCHAR",
        "insurance": "VARCHAR",
        "language": "VARCHAR",
        "marital_status": "VARCHAR",
        "race": "VARCHAR",
        "edregtime": "TIMESTAMP",
        "edouttime": "TIMESTAMP",
        "hospital_expire_flag": "SMALLINT",
    },
    "labevents": {
        "labevent_id": "INTEGER",
        "subject_id": "INTEGER",
        "hadm_id": "INTEGER",
        "specimen_id": "INTEGER",
        "itemid": "INTEGER",
        "order_provider_id": "VARCHAR",
        "charttime": "TIMESTAMP",
        "storetime": "TIMESTAMP",
        "value": "VARCHAR",
        "valuenum": "DOUBLE",
        "valueuom": "VARCHAR",
        "ref_range_lower": "DOUBLE",
        "ref_range_upper": "DOUBLE",
        "flag": "VARCHAR",
        "priority": "VARCHAR",
        "comments": "VARCHAR",
    },
    "d_labitems": {
        "itemid": "INTEGER",
        "label": "VARCHAR",
        "fluid": "VARCHAR",
        "category": "VARCHAR",
    },
    "prescriptions": {
        "subject_id": "INTEGER",
        "hadm_id": "INTEGER",
        "pharmacy_id": "INTEGER",
        "poe_id": "VARCHAR",
        "poe_seq": "INTEGER",
        "order_provider_id": "VARCHAR",
        "starttime": "TIMESTAMP",
        "stoptime": "TIMESTAMP",
        "drug_type": "VARCHAR",
        "drug": "VARCHAR",
        "formulary_drug_cd": "VARCHAR",
        "gsn": "VARCHAR",
        "ndc": "VARCHAR",
        "prod_strength": "VARCHAR",
        "form_rx": "VARCHAR",
        "dose_val_rx": "VARCHAR",
        "dose_unit_rx": "VARCHAR",
        "form_val_disp": "VARCHAR",
        "form_unit_disp": "VARCHAR",
        "doses_per_24_hrs": "REAL",
        "route": "VARCHAR",
    },
    "diagnoses_icd": {
        "subject_id": "INTEGER",
        "hadm_id": "INTEGER",
        "seq_num": "INTEGER",
        "icd_code": "VARCHAR",
        "icd_version": "SMALLINT",
    },
    "d_icd_diagnoses": {
        "icd_code": "VARCHAR",
        "icd_version": "SMALLINT",
        "long_title": "VARCHAR",
    },
    "procedures_icd": {
        "subject_id": "INTEGER",
        "hadm_id": "INTEGER",
        "seq_num": "INTEGER",
        "chartdate": "DATE",
        "icd_code": "VARCHAR",
        "icd_version": "SMALLINT",
    },
    "d_icd_procedures": {
        "icd_code": "VARCHAR",
        "icd_version": "SMALLINT",
        "long_title": "VARCHAR",
    },
}

# Hosp tables the kit can use but a MIMIC-IV directory need not have. ``emar`` (one row per
# medication administration) is what MIMIC-derived MEDS datasets build medication codes from
# (clinlib.data.sources.meds_fixture); the CSV path reads prescriptions, so a real directory without
# emar still opens. Same convention as HOSP_TABLES (v2.2 column order, DuckDB types).
OPTIONAL_HOSP_TABLES: dict[str, dict[str, str]] = {
    "emar": {
        "subject_id": "INTEGER",
        "hadm_id": "INTEGER",
        "emar_id": "VARCHAR",
        "emar_seq": "INTEGER",
        "poe_id": "VARCHAR",
        "pharmacy_id": "INTEGER",
        "enter_provider_id": "VARCHAR",
        "charttime": "TIMESTAMP",
        "medication": "VARCHAR",
        "event_txt": "VARCHAR",
        "scheduletime": "TIMESTAMP",
        "storetime": "TIMESTAMP",
    },
}

# prescriptions.drug_type values that are not a medication order of their own: a BASE row is
# the diluent of its pharmacy_id's MAIN drug (clinlib.data.events). NULL (e.g. from MEDS) = MAIN.
RX_DILUENT_TYPES: tuple[str, ...] = ("BASE",)
# SQL predicate over one prescriptions row: the row is a medication order (MAIN / ADDITIVE).
RX_ORDER_SQL = (
    "coalesce(upper(trim(drug_type)), 'MAIN') NOT IN ("
    + ", ".join(f"'{t}'" for t in RX_DILUENT_TYPES)
    + ")"
)

# Columns the kit reads from each source table (a real directory must provide these).
REQUIRED: dict[str, tuple[str, ...]] = {
    "patients": ("subject_id", "gender", "anchor_age", "anchor_year"),
    "admissions": ("subject_id", "hadm_id", "admittime", "dischtime", "admission_type"),
    "labevents": (
        "labevent_id",
        "subject_id",
        "hadm_id",
        "itemid",
        "charttime",
        "value",
        "valuenum",
        "valueuom",
        "ref_range_lower",
        "ref_range_upper",
        "flag",
    ),
    "d_labitems": ("itemid", "label"),
    "prescriptions": (
        "subject_id",
        "hadm_id",
        "pharmacy_id",
        "starttime",
        "stoptime",
        "drug_type",
        "drug",
        "dose_val_rx",
        "dose_unit_rx",
        "route",
    ),
    "diagnoses_icd": ("subject_id", "hadm_id", "seq_num", "icd_code", "icd_version"),
    "d_icd_diagnoses": ("icd_code", "icd_version", "long_title"),
    "procedures_icd": ("subject_id", "hadm_id", "seq_num", "chartdate", "icd_code", "icd_version"),
    "d_icd_procedures": ("icd_code", "icd_version", "long_title"),
}

# Artifact columns (docs/design.md contract + documented additions). Types are pandas dtypes
# as written to parquet; "list" = list of strings.
ARTIFACTS: dict[str, dict[str, str]] = {
    "cohort": {
        "subject_id": "int64",
        "disease": "string",
        "tertile": "string",
        "n_admissions": "int64",
        "n_events": "int64",
        "n_labs": "int64",
        "n_meds": "int64",
        "span_days": "float64",
        "n_index_codes": "int64",
        "n_dx": "int64",
        "n_px": "int64",
        "n_events_raw": "int64",
        "complexity": "float64",
    },
    "attrition": {"step_idx": "int64", "step": "string", "n_patients": "int64"},
    "events": {
        "event_id": "string",
        "subject_id": "int64",
        "hadm_id": "int64",
        "visit_idx": "int64",
        "time": "datetime64[us]",
        "kind": "string",
        "code": "string",
        "code_system": "string",
        "label": "string",
        "value": "float64",
        "value_text": "string",
        "unit": "string",
        "ref_low": "float64",
        "ref_high": "float64",
        "flag": "string",
        "route": "string",
        "end_time": "datetime64[us]",
        "source": "string",
    },
    "dialogues": {
        "subject_id": "int64",
        "visit_idx": "int64",
        "turn_idx": "int64",
        "speaker": "string",
        "text": "string",
        "event_ids": "list",
    },
    "dialogue_checks": {
        "subject_id": "int64",
        "check": "string",
        "severity": "string",
        "passed": "bool",
        "detail": "string",
    },
}
