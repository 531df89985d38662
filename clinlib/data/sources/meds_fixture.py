"""A MIMIC-derived MEDS dataset from a MIMIC-IV-shaped hosp directory, built the way the
MEDS-transforms MIMIC-IV ETL builds one (paper §3 "Cohort"): no ``event_id``, medication orders
without a dose, orders and administrations as separate codes (MEDS-transforms'
``MIMIC-IV_Example/configs/event_configs.yaml``). :class:`MedsShapes` turns on the shapes of a
real export (:data:`REAL_SHAPES`: unnamed drugs, unused code families, bad values, split shards,
no code metadata); the default turns them off so the CSV and MEDS paths select the same cohort.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from clinlib.core.io import atomic_path
from clinlib.data.schema import OPTIONAL_HOSP_TABLES, RX_ORDER_SQL
from clinlib.data.sources.meds import CODES_SCHEMA, DEFAULT_SPLIT, MEDS_VERSION, SPLITS_SCHEMA
from clinlib.data.sources.mimic import CSV_OPTIONS, open_hosp

FIXTURE_ETL = "clintrace-kit meds_fixture (MEDS-transforms MIMIC-IV conventions)"

DATA_SCHEMA = pa.schema(
    [
        ("subject_id", pa.int64()),
        ("time", pa.timestamp("us")),
        ("code", pa.string()),
        ("numeric_value", pa.float32()),
        ("text_value", pa.large_string()),
        ("hadm_id", pa.int64()),
        ("priority", pa.string()),
        ("route", pa.string()),
        ("doses_per_24_hrs", pa.float32()),
        ("poe_id", pa.string()),
        ("emar_id", pa.string()),
        ("emar_seq", pa.int64()),
    ]
)


FLOAT32_MAX = 3.4028234663852886e38


def _c(expr: str) -> str:
    """A code component: trimmed text, ``UNK`` when missing, no embedded ``//``."""
    return f"coalesce(nullif(replace(trim(CAST({expr} AS VARCHAR)), '//', '/'), ''), 'UNK')"


def _row(subject, time, code, num="NULL", text="NULL", **extra) -> str:
    cols = {
        "subject_id": f"CAST({subject} AS BIGINT)",
        "time": f"CAST({time} AS TIMESTAMP)",
        "code": code,
        # float32, as MEDS stores it: a value past its range becomes +-inf (numpy's cast),
        # as in a real export, instead of failing the write
        "numeric_value": f"CASE WHEN abs({num}) > {FLOAT32_MAX} THEN sign({num}) * "
        f"'inf'::FLOAT ELSE CAST({num} AS FLOAT) END",
        "text_value": f"CAST({text} AS VARCHAR)",
    }
    for name in DATA_SCHEMA.names[5:]:
        cols[name] = extra.get(name, "NULL")
    return ", ".join(f"{v} AS {k}" for k, v in cols.items())


def _code(head: str, *components: str) -> str:
    return " || '//' || ".join([f"'{head}'"] + [_c(x) for x in components])


# (source, time, code, values and extras, filter) per row kind; see the module docstring.
_ROWS: tuple[tuple[str, str, str, dict, str], ...] = (
    ("patients", "NULL", "'GENDER//' || " + _c("gender"), {}, "TRUE"),
    (
        "patients",
        "make_date(anchor_year - anchor_age, 1, 1)",
        "'MEDS_BIRTH'",
        {},
        "anchor_year IS NOT NULL",
    ),
    ("patients", "dod", "'MEDS_DEATH'", {}, "dod IS NOT NULL"),
    (
        "admissions",
        "admittime",
        _code("HOSPITAL_ADMISSION", "admission_type", "admission_location"),
        {"hadm_id": "hadm_id"},
        "TRUE",
    ),
    (
        "admissions",
        "dischtime",
        _code("HOSPITAL_DISCHARGE", "discharge_location"),
        {"hadm_id": "hadm_id"},
        "TRUE",
    ),
    (
        "labevents",
        "charttime",
        _code("LAB", "itemid", "valueuom"),
        {"num": "valuenum", "text": "value", "hadm_id": "hadm_id", "priority": "priority"},
        "TRUE",
    ),
    (
        "diagnoses_icd d JOIN admissions a USING (hadm_id, subject_id)",
        "a.dischtime",
        _code("DIAGNOSIS//ICD", "d.icd_version", "d.icd_code"),
        {"hadm_id": "hadm_id"},
        "TRUE",
    ),
    (
        "procedures_icd",
        "chartdate",
        _code("PROCEDURE//ICD", "icd_version", "icd_code"),
        {"hadm_id": "hadm_id"},
        "TRUE",
    ),
    (
        "prescriptions",
        "starttime",
        _code("MEDICATION//START", "drug"),
        {"route": "route", "doses_per_24_hrs": "doses_per_24_hrs", "poe_id": "poe_id"},
        f"{RX_ORDER_SQL} AND starttime IS NOT NULL",
    ),
    (
        "prescriptions",
        "stoptime",
        _code("MEDICATION//STOP", "drug"),
        {"poe_id": "poe_id"},
        f"{RX_ORDER_SQL} AND stoptime IS NOT NULL",
    ),
)
_EMAR_ROW = (
    "emar",
    "charttime",
    _code("MEDICATION", "medication", "event_txt"),
    {"hadm_id": "hadm_id", "emar_id": "emar_id", "emar_seq": "emar_seq"},
    "TRUE",
)


@dataclass(frozen=True)
class MedsShapes:
    """Real-export shapes to write (module docstring, "Real-export shapes")."""

    unk_drug_pct: int = 0
    unused_families: bool = False
    bad_values: bool = False
    splits: tuple[str, ...] = (DEFAULT_SPLIT,)
    shards_per_split: int = 1
    codes: bool = True
    umol_creatinine_pct: int = 0
    duplicate_admission_pct: int = 0


REAL_SPLITS = ("train", "tuning", "held_out")
REAL_SHAPES = MedsShapes(
    unk_drug_pct=10,
    unused_families=True,
    bad_values=True,
    splits=REAL_SPLITS,
    shards_per_split=2,
    umol_creatinine_pct=20,
    duplicate_admission_pct=2,
)
# Creatinine written in µmol/L (a non-US export: LAB//50912//umol/L, no ranges), an integer
# as such labs report it; the kit converts it back (clinlib.data.units).
UMOL_PER_MG_DL = 88.42
BAD_VALUE_EVERY = 400
BAD_VALUES = ("'nan'::FLOAT", "'inf'::FLOAT", "-5", "1e30")

_ICU = "hadm_id % 4 = 0 AND dischtime > admittime + INTERVAL 1 DAY"
_DAY = "CAST(CAST(admittime AS DATE) AS TIMESTAMP)"
# Code families the kit does not use, one set per admission (MEDS-transforms MIMIC-IV codes).
UNUSED_ROWS: tuple[tuple[str, str, str, dict, str], ...] = (
    (
        "admissions",
        "admittime - INTERVAL 3 HOUR",
        "'ED_REGISTRATION'",
        {},
        "admission_type LIKE '%EMER%'",
    ),
    (
        "admissions",
        "admittime",
        _code("TRANSFER_TO//admit", "admission_location"),
        {"hadm_id": "hadm_id"},
        "TRUE",
    ),
    (
        "admissions",
        "dischtime",
        "'DRG//HCFA//' || CAST(100 + hadm_id % 800 AS VARCHAR)",
        {"hadm_id": "hadm_id"},
        "TRUE",
    ),
    ("admissions", "admittime", "'HCPCS//G0378'", {"hadm_id": "hadm_id"}, "hadm_id % 3 = 0"),
    (
        "admissions",
        "admittime + INTERVAL 2 HOUR",
        "'ICU_ADMISSION//MICU'",
        {"hadm_id": "hadm_id"},
        _ICU,
    ),
    ("admissions", "admittime + INTERVAL 3 HOUR", "'INFUSION_START//225158'", {"num": "100"}, _ICU),
    (
        "admissions",
        "admittime + INTERVAL 3 HOUR",
        "'SUBJECT_WEIGHT_AT_INFUSION//KG'",
        {"num": "80.5"},
        _ICU,
    ),
    ("admissions", "admittime + INTERVAL 5 HOUR", "'INFUSION_END//225158'", {}, _ICU),
    ("admissions", "admittime + INTERVAL 4 HOUR", "'PROCEDURE//START//225792'", {}, _ICU),
    ("admissions", "admittime + INTERVAL 6 HOUR", "'PROCEDURE//END//225792'", {}, _ICU),
    ("admissions", _DAY, "'Blood Pressure'", {"text": "'128/76'"}, "TRUE"),
    ("admissions", _DAY, "'Weight (Lbs)'", {"text": "'182.4'"}, "TRUE"),
)


_ADMISSION_CODE = "'HOSPITAL_ADMISSION'"


def _md5_pct(expr: str) -> str:
    """0..99 from the md5 of ``expr``: a deterministic, row-order-free choice."""
    return f"(CAST('0x' || substr(md5(CAST({expr} AS VARCHAR)), 1, 8) AS BIGINT) % 100)"


def _shaped_rows(shapes: MedsShapes) -> tuple:
    """_ROWS with the chosen shapes: unnamed orders, bad lab values, unused families."""
    rows = []
    for src, time, code, extra, where in _ROWS:
        if shapes.unk_drug_pct and src == "prescriptions":
            drug = f"CASE WHEN {_md5_pct('pharmacy_id')} < {shapes.unk_drug_pct} THEN NULL ELSE drug END"  # noqa: E501
            head = code.split(" || ")[0].strip("'")
            code = _code(head, drug)
        if shapes.umol_creatinine_pct and src == "labevents":
            umol = f"itemid = 50912 AND {_md5_pct('labevent_id')} < {shapes.umol_creatinine_pct}"
            number = f"round(valuenum * {UMOL_PER_MG_DL})"
            code = _code("LAB", "itemid", f"CASE WHEN {umol} THEN 'umol/L' ELSE valueuom END")
            extra = {
                **extra,
                "num": f"CASE WHEN {umol} THEN {number} ELSE valuenum END",
                "text": f"CASE WHEN {umol} THEN CAST(CAST({number} AS BIGINT) AS VARCHAR) "
                "ELSE value END",
            }
        if shapes.bad_values and src == "labevents":
            pick = "CAST('0x' || substr(md5(CAST(labevent_id AS VARCHAR)), 1, 8) AS BIGINT)"
            bad = f"{pick} % {BAD_VALUE_EVERY} = 0"
            value = f"[{', '.join(BAD_VALUES)}][({pick} // {BAD_VALUE_EVERY}) % 4 + 1]"
            extra = {
                **extra,
                "num": f"CASE WHEN {bad} THEN {value} ELSE {extra.get('num', 'valuenum')} END",
                "text": f"CASE WHEN {bad} THEN CAST({value} AS VARCHAR) "
                f"ELSE {extra.get('text', 'value')} END",
            }
        rows.append((src, time, code, extra, where))
        if shapes.duplicate_admission_pct and code.startswith(_ADMISSION_CODE):
            # an exact copy of the admission row (a real export's duplicate; de-duplicated
            # with a count by the MEDS reader)
            pick = f"{_md5_pct('hadm_id')} < {shapes.duplicate_admission_pct}"
            rows.append((src, time, code, extra, f"({where}) AND {pick}"))
    return tuple(rows) + (UNUSED_ROWS if shapes.unused_families else ())


def _sources(has_emar: bool, shapes: MedsShapes = MedsShapes()) -> list[str]:
    rows = _shaped_rows(shapes) + ((_EMAR_ROW,) if has_emar else ())
    return [
        f"SELECT {_row('subject_id', time, code, **extra)} FROM {src} WHERE {where}"
        for src, time, code, extra, where in rows
    ]


CODES_SQL = """
SELECT 'LAB//' || CAST(itemid AS VARCHAR) AS prefix, label AS description FROM d_labitems
UNION ALL
SELECT 'DIAGNOSIS//ICD//' || icd_version || '//' || trim(icd_code), long_title FROM d_icd_diagnoses
UNION ALL
SELECT 'PROCEDURE//ICD//' || icd_version || '//' || trim(icd_code), long_title
FROM d_icd_procedures
"""


def _open_emar(con: duckdb.DuckDBPyConnection, hosp_dir: Path) -> bool:
    hosp = hosp_dir / "hosp" if (hosp_dir / "hosp").is_dir() else hosp_dir
    for suffix in (".parquet", ".csv.gz", ".csv"):
        path = hosp / f"emar{suffix}"
        if path.exists():
            src = f"read_parquet('{path}')"
            if suffix != ".parquet":
                types = ", ".join(f"'{c}': '{t}'" for c, t in OPTIONAL_HOSP_TABLES["emar"].items())
                src = f"read_csv('{path}', {CSV_OPTIONS}, columns={{{types}}})"
            con.execute(f"CREATE OR REPLACE VIEW emar AS SELECT * FROM {src}")
            return True
    return False


def mimic_to_meds(
    hosp_dir: Path,
    out_dir: Path,
    dataset_name: str = "mimic-fixture",
    shapes: MedsShapes = MedsShapes(),
) -> Path:
    """Write a MIMIC-derived-MEDS-shaped dataset (module docstring) from a hosp directory.

    Args:
        hosp_dir: MIMIC-IV-shaped directory (holding ``hosp/`` or the hosp folder itself).
        out_dir: MEDS dataset root to (re)create, atomically.
        dataset_name: ``dataset_name`` in metadata/dataset.json.
        shapes: real-export shapes to write (:data:`REAL_SHAPES`: all of them).

    Returns:
        ``out_dir`` with ``data/<split>/<k>.parquet`` (default: ``data/held_out/0.parquet``;
        each sorted by subject, then time, static rows first) and ``metadata/{codes.parquet
        (unless left out), dataset.json, subject_splits.parquet}``.
    """
    hosp_dir, out_dir = Path(hosp_dir), Path(out_dir)
    con = open_hosp(hosp_dir)
    has_emar = _open_emar(con, hosp_dir)
    union = "\nUNION ALL\n".join(_sources(has_emar, shapes))
    data = con.sql(
        f"SELECT * FROM ({union}) ORDER BY subject_id, time NULLS FIRST, code, hadm_id, "
        "numeric_value, text_value, emar_seq"
    ).to_arrow_table()
    data = data.cast(DATA_SCHEMA)
    con.register("fixture_data", data)
    codes = con.sql(
        f"""SELECT c.code, min(d.description) AS description
            FROM (SELECT DISTINCT code FROM fixture_data) c
            LEFT JOIN ({CODES_SQL}) d
              ON c.code = d.prefix OR starts_with(c.code, d.prefix || '//')
            GROUP BY c.code ORDER BY c.code"""
    ).to_arrow_table()
    n_splits, n_shards = len(shapes.splits), shapes.shards_per_split
    subjects = con.sql(
        f"""SELECT DISTINCT subject_id,
                   {_md5_pct("subject_id")} % {n_splits} AS split_idx,
                   {_md5_pct("'shard:' || subject_id")} % {n_shards} AS shard
            FROM fixture_data ORDER BY 1"""
    ).df()
    with atomic_path(out_dir) as tmp:
        (tmp / "metadata").mkdir(parents=True)
        _write_shards(con, tmp / "data", subjects, shapes.splits)
        if shapes.codes:
            parents = pa.array([[] for _ in range(codes.num_rows)], pa.list_(pa.string()))
            pq.write_table(
                pa.table([codes["code"], codes["description"], parents], schema=CODES_SCHEMA),
                tmp / "metadata" / "codes.parquet",
            )
        ids = pa.array(subjects["subject_id"], pa.int64())
        splits = pa.array([shapes.splits[i] for i in subjects["split_idx"]], pa.string())
        pq.write_table(
            pa.table([ids, splits], schema=SPLITS_SCHEMA),
            tmp / "metadata" / "subject_splits.parquet",
        )
        meta = {
            "dataset_name": dataset_name,
            "dataset_version": "1.0",
            "etl_name": FIXTURE_ETL,
            "etl_version": "1",
            "meds_version": MEDS_VERSION,
            "created_at": datetime.now(UTC).isoformat(),
        }
        (tmp / "metadata" / "dataset.json").write_text(json.dumps(meta, indent=2) + "\n")
    return out_dir


def _write_shards(con, data_dir: Path, subjects, split_names: tuple[str, ...]) -> None:
    """One parquet per non-empty (split, shard), rows in the sorted order of fixture_data."""
    con.register("fixture_subjects", subjects)
    for (split_idx, shard), _ in subjects.groupby(["split_idx", "shard"], sort=True):
        part = con.sql(
            f"""SELECT d.* FROM fixture_data d JOIN fixture_subjects s USING (subject_id)
                WHERE s.split_idx = {int(split_idx)} AND s.shard = {int(shard)}
                ORDER BY subject_id, time NULLS FIRST, code, hadm_id, numeric_value,
                         text_value, emar_seq"""
        ).to_arrow_table()
        folder = data_dir / split_names[int(split_idx)]
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(part.cast(DATA_SCHEMA), folder / f"{int(shard)}.parquet")


if __name__ == "__main__":  # python -m clinlib.data.sources.meds_fixture <hosp dir> <MEDS out dir>
    import sys

    args = [a for a in sys.argv[1:] if a != "--real-shapes"]
    if len(args) != 2:
        sys.exit(
            "usage: python -m clinlib.data.sources.meds_fixture [--real-shapes] "
            "<mimic hosp dir> <meds out dir>"
        )
    real = "--real-shapes" in sys.argv[1:]
    print(mimic_to_meds(Path(args[0]), Path(args[1]), shapes=REAL_SHAPES if real else MedsShapes()))
