"""A MIMIC-derived MEDS dataset from a MIMIC-IV-shaped hosp directory, built the way the
MEDS-transforms MIMIC-IV ETL builds one (paper §3 "Cohort").

Real MIMIC-derived MEDS datasets do not look like the kit's own export (:func:`clinlib.data.sources.
meds.write_meds`): there is no ``event_id``, medications carry no dose, and a medication order
and its administrations are separate codes. :func:`mimic_to_meds` reproduces that shape from a
hosp directory (e.g. the synthetic raw tables, which include ``emar``), so tests and users can
run the MEDS path on data shaped like a real MEDS export. Codes follow MEDS-transforms'
``MIMIC-IV_Example/configs/event_configs.yaml``:

==========================  ===============================================  ===============
source                      code (time)                                      values / extras
==========================  ===============================================  ===============
patients                    ``GENDER//<g>`` (null), ``MEDS_BIRTH`` (1 Jan    --
                            of anchor_year - anchor_age), ``MEDS_DEATH``
                            (dod)
admissions                  ``HOSPITAL_ADMISSION//<type>//<location>``       hadm_id
                            (admittime), ``HOSPITAL_DISCHARGE//<location>``
                            (dischtime)
labevents                   ``LAB//<itemid>//<valueuom>`` (charttime)        numeric_value =
                                                                             valuenum,
                                                                             text_value =
                                                                             value; hadm_id,
                                                                             priority
diagnoses_icd               ``DIAGNOSIS//ICD//<version>//<code>``            hadm_id
                            (the admission's dischtime)
procedures_icd              ``PROCEDURE//ICD//<version>//<code>``            hadm_id
                            (chartdate)
pharmacy orders             ``MEDICATION//START//<drug>`` (starttime),       route,
                            ``MEDICATION//STOP//<drug>`` (stoptime)          doses_per_24_hrs,
                                                                             poe_id; NO dose,
                                                                             NO hadm_id
emar                        ``MEDICATION//<medication>//<event_txt>``        hadm_id, emar_id,
                            (charttime)                                      emar_seq; no dose
==========================  ===============================================  ===============

A missing code component is ``UNK``. MEDS-transforms reads orders from MIMIC's ``pharmacy``
table (one row per ``pharmacy_id``); a hosp directory the kit reads has ``prescriptions``
instead, so the orders here are its medication-order rows (MAIN and ADDITIVE, never a BASE
diluent: :data:`clinlib.data.schema.RX_DILUENT_TYPES`) — the same rows the cohort counts, which is
why the CSV and MEDS paths select the same cohort. ``emar`` is optional (absent: no
administration rows). Descriptions (d_labitems labels, ICD long titles) go to
``metadata/codes.parquet``.
"""

from __future__ import annotations

import json
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
    ("patients", "make_date(anchor_year - anchor_age, 1, 1)", "'MEDS_BIRTH'", {},
     "anchor_year IS NOT NULL"),
    ("patients", "dod", "'MEDS_DEATH'", {}, "dod IS NOT NULL"),
    ("admissions", "admittime", _code("HOSPITAL_ADMISSION", "admission_type",
                                      "admission_location"), {"hadm_id": "hadm_id"}, "TRUE"),
    ("admissions", "dischtime", _code("HOSPITAL_DISCHARGE", "discharge_location"),
     {"hadm_id": "hadm_id"}, "TRUE"),
    ("labevents", "charttime", _code("LAB", "itemid", "valueuom"),
     {"num": "valuenum", "text": "value", "hadm_id": "hadm_id", "priority": "priority"}, "TRUE"),
    ("diagnoses_icd d JOIN admissions a USING (hadm_id, subject_id)", "a.dischtime",
     _code("DIAGNOSIS//ICD", "d.icd_version", "d.icd_code"), {"hadm_id": "hadm_id"}, "TRUE"),
    ("procedures_icd", "chartdate", _code("PROCEDURE//ICD", "icd_version", "icd_code"),
     {"hadm_id": "hadm_id"}, "TRUE"),
    ("prescriptions", "starttime", _code("MEDICATION//START", "drug"),
     {"route": "route", "doses_per_24_hrs": "doses_per_24_hrs", "poe_id": "poe_id"},
     f"{RX_ORDER_SQL} AND starttime IS NOT NULL"),
    ("prescriptions", "stoptime", _code("MEDICATION//STOP", "drug"), {"poe_id": "poe_id"},
     f"{RX_ORDER_SQL} AND stoptime IS NOT NULL"),
)  # fmt: skip
_EMAR_ROW = ("emar", "charttime", _code("MEDICATION", "medication", "event_txt"),
             {"hadm_id": "hadm_id", "emar_id": "emar_id", "emar_seq": "emar_seq"}, "TRUE")  # fmt: skip


def _sources(has_emar: bool) -> list[str]:
    rows = _ROWS + ((_EMAR_ROW,) if has_emar else ())
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


def mimic_to_meds(hosp_dir: Path, out_dir: Path, dataset_name: str = "mimic-fixture") -> Path:
    """Write a MIMIC-derived-MEDS-shaped dataset (module docstring) from a hosp directory.

    Args:
        hosp_dir: MIMIC-IV-shaped directory (holding ``hosp/`` or the hosp folder itself).
        out_dir: MEDS dataset root to (re)create, atomically.
        dataset_name: ``dataset_name`` in metadata/dataset.json.

    Returns:
        ``out_dir`` with ``data/held_out/0.parquet`` (sorted by subject, then time, static
        rows first) and ``metadata/{codes.parquet, dataset.json, subject_splits.parquet}``.
    """
    hosp_dir, out_dir = Path(hosp_dir), Path(out_dir)
    con = open_hosp(hosp_dir)
    has_emar = _open_emar(con, hosp_dir)
    union = "\nUNION ALL\n".join(_sources(has_emar))
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
    subjects = con.sql("SELECT DISTINCT subject_id FROM fixture_data ORDER BY 1").to_arrow_table()
    with atomic_path(out_dir) as tmp:
        (tmp / "data" / DEFAULT_SPLIT).mkdir(parents=True)
        (tmp / "metadata").mkdir()
        pq.write_table(data, tmp / "data" / DEFAULT_SPLIT / "0.parquet")
        parents = pa.array([[] for _ in range(codes.num_rows)], pa.list_(pa.string()))
        pq.write_table(
            pa.table([codes["code"], codes["description"], parents], schema=CODES_SCHEMA),
            tmp / "metadata" / "codes.parquet",
        )
        ids = subjects["subject_id"].cast(pa.int64())
        splits = pa.array([DEFAULT_SPLIT] * len(ids))
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


if __name__ == "__main__":  # python -m clinlib.data.sources.meds_fixture <hosp dir> <MEDS out dir>
    import sys

    if len(sys.argv) != 3:
        sys.exit(
            "usage: python -m clinlib.data.sources.meds_fixture <mimic hosp dir> <meds out dir>"
        )
    print(mimic_to_meds(Path(sys.argv[1]), Path(sys.argv[2])))
