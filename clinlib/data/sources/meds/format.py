"""MEDS 0.4 layout constants shared by export, reading and the MIMIC-shaped views (paper §3
"Cohort", Fig. 2 stages 1–2): schemas, code conventions, extra columns, event-id patterns.
"""

from __future__ import annotations

import pyarrow as pa

MEDS_VERSION = "0.4.0"
ETL_NAME = "clintrace-kit"
DEFAULT_SPLIT = "held_out"  # ClinTraceBench is evaluation-only: no subject is for training.
DEFAULT_SHARD_SIZE = 10_000  # subjects per data shard
UNKNOWN = "UNK"  # MEDS-transforms' placeholder for a missing code component
SEP = "//"

BIRTH_CODE = "MEDS_BIRTH"
DEATH_CODE = "MEDS_DEATH"
GENDER_PREFIX = "GENDER//"

DATA_SCHEMA = pa.schema(
    [
        ("subject_id", pa.int64()),
        ("time", pa.timestamp("us")),
        ("code", pa.string()),
        ("numeric_value", pa.float32()),
        ("text_value", pa.large_string()),  # MEDS 0.4 DataSchema: Optional(pa.large_string())
        ("hadm_id", pa.int64()),
        ("event_id", pa.string()),
        ("unit", pa.string()),
        ("end_time", pa.timestamp("us")),
        ("ref_low", pa.float64()),
        ("ref_high", pa.float64()),
        ("flag", pa.string()),
    ]
)
CODES_SCHEMA = pa.schema(
    [("code", pa.string()), ("description", pa.string()), ("parent_codes", pa.list_(pa.string()))]
)
SPLITS_SCHEMA = pa.schema([("subject_id", pa.int64()), ("split", pa.string())])

# Extra (non-core) columns the views use, with their DuckDB types; absent ones read as NULL.
EXTRA_COLUMNS: dict[str, str] = {
    "hadm_id": "BIGINT",
    "event_id": "VARCHAR",
    "unit": "VARCHAR",
    "end_time": "TIMESTAMP",
    "ref_low": "DOUBLE",
    "ref_high": "DOUBLE",
    "flag": "VARCHAR",
    "route": "VARCHAR",  # MEDS-transforms' pharmacy START rows carry the route here
}

# Columns the events table must have for export; the rest of ARTIFACTS["events"] is optional.
EVENTS_REQUIRED: tuple[str, ...] = (
    "event_id",
    "subject_id",
    "hadm_id",
    "time",
    "kind",
    "code",
    "code_system",
)
EVENTS_OPTIONAL: tuple[str, ...] = (
    "label",
    "value",
    "value_text",
    "unit",
    "ref_low",
    "ref_high",
    "flag",
    "route",
    "end_time",
)
ICD_VERSION: dict[str, dict[str, str]] = {
    "diagnosis": {"ICD9-CM": "9", "ICD10-CM": "10"},
    "procedure": {"ICD9-PCS": "9", "ICD10-PCS": "10"},
}
# OMOP vocabulary parents, as MEDS-transforms' MIMIC-IV metadata templates write them.
ICD_PARENT: dict[tuple[str, str], str] = {
    ("DIAGNOSIS", "9"): "ICD9CM/{}",
    ("DIAGNOSIS", "10"): "ICD10CM/{}",
    ("PROCEDURE", "9"): "ICD9Proc/{}",
    ("PROCEDURE", "10"): "ICD10PCS/{}",
}
# event_id patterns of the kit's events table (clinlib.data.events); group 1 (or 2) is the source id.
EVENT_ID_PATTERN: dict[str, str] = {
    "lab": r"^LAB-([0-9]+)$",
    "medication": r"^RX-([0-9]+)$",
    "diagnosis": r"^DX-[0-9]+-([0-9]+)$",
    "procedure": r"^PX-[0-9]+-([0-9]+)$",
}
INT32_MAX = 2**31 - 1
# Ids the MEDS views hold wider than MIMIC's INTEGER: content ids are 60-bit
# (clinlib.data.sources.meds.families, "Content ids").
ID_TYPES: dict[str, str] = {"hadm_id": "BIGINT", "labevent_id": "BIGINT", "pharmacy_id": "BIGINT"}
