"""MEDS (Medical Event Data Standard) export and import (paper §3 "Cohort", Fig. 2 stages 1–2).

The paper's pipeline reads MIMIC-IV hosp tables. MEDS is the community format for the same
event streams, so the kit both writes its event table as MEDS (:func:`write_meds`) and runs the
cohort builder unchanged on a MEDS dataset (:func:`open_meds` registers MIMIC-shaped DuckDB
views derived from the MEDS codes).

MEDS 0.4 layout: ``data/**/*.parquet`` with core columns ``subject_id`` int64, ``time``
timestamp[us] (null for static rows), ``code`` string, ``numeric_value`` float32 and
``text_value`` string (both nullable; extra columns allowed), sorted by subject then time, each
subject in exactly one shard; ``metadata/codes.parquet`` (code, description,
parent_codes list<string>), ``metadata/dataset.json`` and ``metadata/subject_splits.parquet``.

Codes follow the MEDS-transforms MIMIC-IV conventions (``MIMIC-IV_Example/configs/
event_configs.yaml``): ``HOSPITAL_ADMISSION//<admission_type>``,
``HOSPITAL_DISCHARGE//<discharge_location>``, ``LAB//<itemid>//<valueuom>``,
``MEDICATION//<drug>//<route>``, ``DIAGNOSIS//ICD//<9|10>//<icd_code>``,
``PROCEDURE//ICD//<9|10>//<icd_code>``, ``MEDS_BIRTH``, ``MEDS_DEATH``, ``GENDER//<F|M>``; a
missing component is ``UNK``. The kit's provenance travels in extra columns: ``hadm_id``,
``event_id`` (raw-source ids), ``unit`` (medication dose unit), ``end_time`` (discharge /
stop time), ``ref_low``, ``ref_high``, ``flag``.

Medications. A MIMIC-derived MEDS dataset (MEDS-transforms) writes orders as
``MEDICATION//START//<drug>`` / ``MEDICATION//STOP//<drug>`` (from MIMIC's pharmacy table; no
dose, no hadm_id, the route in an extra ``route`` column) and eMAR administrations as
``MEDICATION//<drug>//<event_txt>``. When a dataset has START rows, they are its orders
(medication events without a dose: the dialogue says "started") and every other MEDICATION
row is an administration, not an order; without START rows, every non-STOP MEDICATION row is
an order (the kit's own export). :mod:`clinlib.data.sources.meds_fixture` builds such a dataset
from a MIMIC-shaped hosp directory.

Lab reference ranges. MIMIC-derived MEDS datasets drop ``labevents.ref_range_lower/upper`` and
``flag`` (MEDS-transforms' MIMIC-IV config keeps code, value and unit only). Without them no lab
is abnormal and the abnormal-value tasks (T3, T4) have no anchors, so when a dataset carries
none of the ``ref_low`` / ``ref_high`` / ``flag`` columns, a panel lab takes the panel's
typical range (:data:`clinlib.data.vocab.LAB_PANEL`) and is flagged ``abnormal`` outside it, as
MIMIC's own flag is; a dataset that carries any of them keeps its own values.

Reading back, ``hadm_id`` is trusted for an event kind whenever any row of that kind carries
one; otherwise admissions come from HOSPITAL_ADMISSION / HOSPITAL_DISCHARGE pairs and each event
joins the admission whose [admittime, dischtime] interval holds it (procedures by calendar
day). Ids come from ``event_id`` when every row of a kind has a well-formed one, else they are
deterministic surrogates: the row number after a stable sort by (subject_id, time, code).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from clinlib.core.io import atomic_path
from clinlib.data.schema import HOSP_TABLES
from clinlib.data.sources.mimic import SourceSchemaError
from clinlib.data.vocab import EVENT_KINDS, LAB_PANEL

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


# =========================================================================== export


def _component(values: pd.Series) -> pd.Series:
    """A code component: trimmed text, ``UNK`` when missing, no embedded ``//``."""
    text = values.astype("string").str.strip()
    text = text.mask(text == "", pd.NA).fillna(UNKNOWN)
    # '//' separates components; one inside a drug name would break parsing the code back.
    return text.str.replace(SEP, "/", regex=False)


def _check_events(events: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in EVENTS_REQUIRED if c not in events.columns]
    if missing:
        raise SourceSchemaError(
            "events table",
            column=missing[0],
            expected="clinlib.data.schema.ARTIFACTS['events'] columns",
            found="no such column",
        )
    ev = events.copy()
    for column in EVENTS_OPTIONAL:
        if column not in ev.columns:
            ev[column] = pd.NA
    kinds = ev["kind"].astype("string")
    bad = kinds[kinds.isna() | ~kinds.isin(EVENT_KINDS)]
    if len(bad):
        raise SourceSchemaError(
            "events table",
            column="kind",
            expected=" | ".join(EVENT_KINDS),
            found=f"{bad.iloc[0]!r} (event {ev.loc[bad.index[0], 'event_id']!r})",
        )
    for column in ("subject_id", "time"):
        null = ev[column].isna()
        if null.any():
            raise SourceSchemaError(
                "events table",
                column=column,
                expected="a value on every event",
                found=f"null (event {ev.loc[null.idxmax(), 'event_id']!r})",
            )
    times = pd.to_datetime(ev["time"])
    if getattr(times.dt, "tz", None) is not None:
        raise SourceSchemaError(
            "events table", column="time", expected="naive timestamps", found=str(times.dtype)
        )
    ev["time"] = times.astype("datetime64[us]")
    ev["end_time"] = pd.to_datetime(ev["end_time"]).astype("datetime64[us]")
    return ev


def _event_codes(ev: pd.DataFrame) -> pd.Series:
    """The MEDS code of every event (MEDS-transforms MIMIC-IV conventions)."""
    code = pd.Series(pd.NA, index=ev.index, dtype="string")
    kind = ev["kind"].astype("string")
    for k in ("lab", "diagnosis", "procedure", "medication"):
        null = (kind == k) & ev["code"].isna()
        if null.any():
            raise SourceSchemaError(
                "events table",
                column="code",
                expected=f"a {k} code",
                found=f"null (event {ev.loc[null.idxmax(), 'event_id']!r})",
            )
    m = kind == "admission"
    code[m] = "HOSPITAL_ADMISSION" + SEP + _component(ev.loc[m, "code"])
    m = kind == "discharge"
    code[m] = "HOSPITAL_DISCHARGE" + SEP + _component(ev.loc[m, "code"])
    m = kind == "lab"
    code[m] = "LAB" + SEP + _component(ev.loc[m, "code"]) + SEP + _component(ev.loc[m, "unit"])
    m = kind == "medication"
    code[m] = (
        "MEDICATION" + SEP + _component(ev.loc[m, "code"]) + SEP + _component(ev.loc[m, "route"])
    )
    for k, prefix in (("diagnosis", "DIAGNOSIS"), ("procedure", "PROCEDURE")):
        m = kind == k
        systems = ev.loc[m, "code_system"].astype("string")
        version = systems.map(ICD_VERSION[k])
        if version.isna().any():
            i = version.index[version.isna()][0]
            raise SourceSchemaError(
                "events table",
                column="code_system",
                expected=f"{' or '.join(ICD_VERSION[k])} for {k} events",
                found=f"{ev.loc[i, 'code_system']!r} (event {ev.loc[i, 'event_id']!r})",
            )
        code[m] = (
            f"{prefix}{SEP}ICD{SEP}"
            + version.astype("string")
            + SEP
            + _component(ev.loc[m, "code"])
        )
    return code


def _event_descriptions(ev: pd.DataFrame, code: pd.Series) -> pd.Series:
    """Per-event description candidates for codes.parquet (lab labels, ICD titles, drugs)."""
    kind = ev["kind"].astype("string")
    label = ev["label"].astype("string")
    desc = label.copy()
    m = kind == "admission"
    desc[m] = "Hospital admission: " + code[m].str.slice(len("HOSPITAL_ADMISSION//"))
    m = kind == "discharge"
    desc[m] = "Hospital discharge: " + code[m].str.slice(len("HOSPITAL_DISCHARGE//"))
    m = (kind == "medication") & ev["route"].notna()
    desc[m] = (
        label[m].fillna(ev.loc[m, "code"].astype("string"))
        + " ("
        + ev.loc[m, "route"].astype("string")
        + ")"
    )
    return desc


def _static_rows(patients: pd.DataFrame, subjects: pd.Index) -> pd.DataFrame:
    """MEDS_BIRTH / GENDER / MEDS_DEATH rows for the subjects that have events."""
    for column in ("subject_id", "gender", "anchor_age", "anchor_year"):
        if column not in patients.columns:
            raise SourceSchemaError(
                "patients table",
                column=column,
                expected=HOSP_TABLES["patients"][column],
                found="no such column",
            )
    p = patients[patients["subject_id"].isin(subjects)].drop_duplicates("subject_id")
    frames = []
    # MIMIC shifts dates per patient and gives age at anchor_year, so the birth year is
    # anchor_year - anchor_age (as MEDS-transforms' pre-MEDS step computes it).
    known = p.dropna(subset=["anchor_age", "anchor_year"])
    birth_year = known["anchor_year"].astype("int64") - known["anchor_age"].astype("int64")
    frames.append(
        pd.DataFrame(
            {
                "subject_id": known["subject_id"].astype("int64").to_numpy(),
                "time": pd.to_datetime(pd.DataFrame({"year": birth_year, "month": 1, "day": 1}))
                .astype("datetime64[us]")
                .to_numpy(),
                "code": BIRTH_CODE,
                "description": "Birth",
            }
        )
    )
    g = p[p["gender"].notna()]
    frames.append(
        pd.DataFrame(
            {
                "subject_id": g["subject_id"].astype("int64").to_numpy(),
                "time": pd.Series(pd.NaT, index=g.index, dtype="datetime64[us]").to_numpy(),
                "code": (GENDER_PREFIX + _component(g["gender"])).to_numpy(),
                "description": ("Gender: " + _component(g["gender"])).to_numpy(),
            }
        )
    )
    if "dod" in p.columns:
        d = p[p["dod"].notna()]
        frames.append(
            pd.DataFrame(
                {
                    "subject_id": d["subject_id"].astype("int64").to_numpy(),
                    "time": pd.to_datetime(d["dod"]).astype("datetime64[us]").to_numpy(),
                    "code": DEATH_CODE,
                    "description": "Death",
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _meds_frame(ev: pd.DataFrame, patients: pd.DataFrame | None) -> pd.DataFrame:
    """The kit's events (plus static rows) as one MEDS frame, sorted, with a description."""
    code = _event_codes(ev)
    kind = ev["kind"].astype("string")
    valued = kind.isin(["lab", "medication"])
    frame = pd.DataFrame(
        {
            "subject_id": ev["subject_id"].astype("int64"),
            "time": ev["time"],
            "code": code,
            "numeric_value": pd.to_numeric(ev["value"], errors="coerce").where(valued),
            "text_value": ev["value_text"].astype("string").where(valued),
            "hadm_id": ev["hadm_id"].astype("Int64"),
            "event_id": ev["event_id"].astype("string"),
            "unit": ev["unit"].astype("string"),
            "end_time": ev["end_time"],
            "ref_low": pd.to_numeric(ev["ref_low"], errors="coerce"),
            "ref_high": pd.to_numeric(ev["ref_high"], errors="coerce"),
            "flag": ev["flag"].astype("string"),
            "description": _event_descriptions(ev, code),
        }
    )
    if patients is not None:
        static = _static_rows(patients, pd.Index(frame["subject_id"].unique()))
        frame = pd.concat([static, frame], ignore_index=True)
    # Static rows lack the event columns: restore the dtypes the concat widened.
    frame["numeric_value"] = frame["numeric_value"].astype("float32")
    frame["hadm_id"] = frame["hadm_id"].astype("Int64")
    for column in ("code", "text_value", "event_id", "unit", "flag", "description"):
        frame[column] = frame[column].astype("string")
    for column in ("time", "end_time"):
        frame[column] = frame[column].astype("datetime64[us]")
    # Deterministic whatever the input row order: static rows (null time) first per subject.
    return frame.sort_values(
        ["subject_id", "time", "code", "event_id"], na_position="first", kind="stable"
    ).reset_index(drop=True)


def _codes_table(frame: pd.DataFrame) -> pa.Table:
    first = (
        frame[["code", "description"]]
        .dropna(subset=["description"])
        .drop_duplicates("code")
        .set_index("code")["description"]
    )
    codes = sorted(frame["code"].unique())
    parents = []
    for c in codes:
        parts = c.split(SEP)
        key = (parts[0], parts[2]) if len(parts) >= 4 and parts[1] == "ICD" else None
        parents.append([ICD_PARENT[key].format(SEP.join(parts[3:]))] if key in ICD_PARENT else [])
    return pa.table(
        {
            "code": codes,
            "description": [first.get(c) for c in codes],
            "parent_codes": parents,
        },
        schema=CODES_SCHEMA,
    )


def _etl_version() -> str:
    try:
        return importlib_metadata.version("clintrace-kit")
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


def _looks_like_meds(path: Path) -> bool:
    return (path / "metadata" / "dataset.json").exists() or not any(path.iterdir())


def write_meds(
    events: pd.DataFrame,
    out_dir: Path,
    patients: pd.DataFrame | None = None,
    dataset_name: str = "clintrace-synthetic",
    shard_size: int = DEFAULT_SHARD_SIZE,
    splits: Mapping[int, str] | None = None,
    dataset_version: str = "1.0",
) -> Path:
    """Export the kit's events table as a MEDS 0.4 dataset (written atomically).

    Args:
        events: events table (columns as ``clinlib.data.schema.ARTIFACTS["events"]``; at least
            event_id, subject_id, hadm_id, time, kind, code, code_system).
        out_dir: dataset root to create (replaced if it already holds a MEDS dataset).
        patients: optional MIMIC ``patients`` rows (subject_id, gender, anchor_age,
            anchor_year, dod) for MEDS_BIRTH / GENDER / MEDS_DEATH rows of the exported subjects.
        dataset_name: ``dataset_name`` in metadata/dataset.json.
        shard_size: subjects per data shard.
        splits: subject_id -> split name; default every subject ``held_out``.
        dataset_version: ``dataset_version`` in metadata/dataset.json.

    Returns:
        ``out_dir``, holding data/<split>/<n>.parquet and metadata/{codes.parquet,
        dataset.json, subject_splits.parquet}.

    Raises:
        SourceSchemaError: a missing events column, an unknown kind or code system, a null
            subject/time/code; ValueError if ``out_dir`` is a non-empty non-MEDS directory.
    """
    out_dir = Path(out_dir)
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    if out_dir.exists() and (not out_dir.is_dir() or not _looks_like_meds(out_dir)):
        raise ValueError(f"{out_dir} exists and is not a MEDS dataset; refusing to replace it")
    frame = _meds_frame(_check_events(events), patients)
    subjects = sorted(int(s) for s in frame["subject_id"].unique())
    split_of = {s: DEFAULT_SPLIT for s in subjects}
    if splits is not None:
        unknown = [s for s in subjects if s not in splits]
        if unknown:
            raise ValueError(f"splits has no entry for subject_id {unknown[0]}")
        split_of = {s: str(splits[s]) for s in subjects}
    with atomic_path(out_dir) as tmp:
        (tmp / "metadata").mkdir(parents=True)
        data = frame.drop(columns="description")
        for split in sorted(set(split_of.values())):
            members = [s for s in subjects if split_of[s] == split]
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", split):
                raise ValueError(f"split name {split!r} is not a plain folder name")
            (tmp / "data" / split).mkdir(parents=True)
            for n, start in enumerate(range(0, len(members), shard_size)):
                chunk = data[data["subject_id"].isin(members[start : start + shard_size])]
                table = pa.Table.from_pandas(chunk, schema=DATA_SCHEMA, preserve_index=False)
                pq.write_table(table, tmp / "data" / split / f"{n}.parquet")
        pq.write_table(_codes_table(frame), tmp / "metadata" / "codes.parquet")
        pq.write_table(
            pa.table(
                {"subject_id": subjects, "split": [split_of[s] for s in subjects]},
                schema=SPLITS_SCHEMA,
            ),
            tmp / "metadata" / "subject_splits.parquet",
        )
        dataset = {
            "dataset_name": dataset_name,
            "dataset_version": dataset_version,
            "etl_name": ETL_NAME,
            "etl_version": _etl_version(),
            "meds_version": MEDS_VERSION,
            "created_at": datetime.now(UTC).isoformat(),
            "raw_source_id_columns": ["hadm_id", "event_id"],
            "code_modifier_columns": ["unit"],
            "other_extension_columns": ["end_time", "ref_low", "ref_high", "flag"],
        }
        (tmp / "metadata" / "dataset.json").write_text(json.dumps(dataset, indent=2) + "\n")
    return out_dir


# =========================================================================== validation


def _natural_key(path: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.as_posix())]


def meds_shards(meds_dir: Path) -> list[Path]:
    """The data shards of a MEDS dataset (``data/**/*.parquet``), in natural path order.

    Args:
        meds_dir: MEDS dataset root.

    Returns:
        Shard paths.

    Raises:
        SourceSchemaError: no ``data/`` folder or no parquet shard in it.
    """
    data = Path(meds_dir) / "data"
    if not data.is_dir():
        raise SourceSchemaError(data, expected="a MEDS data/ folder", found="no such folder")
    shards = sorted((p for p in data.rglob("*.parquet") if p.is_file()), key=_natural_key)
    if not shards:
        raise SourceSchemaError(data, expected="data/**/*.parquet shards", found="none")
    return shards


def _is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _core_type_ok(column: str, t: pa.DataType) -> bool:
    if column == "subject_id":
        return pa.types.is_int64(t)
    if column == "time":
        return pa.types.is_timestamp(t) and t.unit == "us" and t.tz is None
    if column == "code":
        return _is_text(t)
    if column == "numeric_value":
        return pa.types.is_float32(t) or pa.types.is_null(t)
    if column == "text_value":
        return _is_text(t) or pa.types.is_null(t)
    raise ValueError(column)


CORE_EXPECTED = {
    "subject_id": "int64",
    "time": "timestamp[us]",
    "code": "string",
    "numeric_value": "float32",
    "text_value": "string",
}


def _read_schema(path: Path) -> pa.Schema:
    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as err:
        raise SourceSchemaError(path, expected="a readable parquet file", found=str(err)) from None


def _check_schemas(shards: list[Path]) -> set[str]:
    """Check every shard's core columns; return the union of column names."""
    names: set[str] = set()
    for path in shards:
        schema = _read_schema(path)
        for column, expected in CORE_EXPECTED.items():
            if column not in schema.names:
                if column in ("numeric_value", "text_value"):  # optional in MEDS 0.4
                    continue
                raise SourceSchemaError(
                    path, column=column, expected=expected, found="no such column"
                )
            found = schema.field(column).type
            if not _core_type_ok(column, found):
                raise SourceSchemaError(path, column=column, expected=expected, found=str(found))
        names.update(schema.names)
    return names


def _lit(text: str | Path) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def _scan(shards: list[Path], columns: str = "*") -> str:
    files = "[" + ", ".join(_lit(p) for p in shards) + "]"
    return (
        f"(SELECT {columns} FROM read_parquet({files}, filename=true, "
        f"file_row_number=true, union_by_name=true))"
    )


def _check_data(con: duckdb.DuckDBPyConnection, shards: list[Path]) -> None:
    """Non-null subject/code, sort order within shards, one shard per subject."""
    scan = _scan(shards, "filename, file_row_number, subject_id, time, code")
    row = con.execute(
        f"SELECT filename, file_row_number, subject_id IS NULL FROM {scan} "
        "WHERE subject_id IS NULL OR code IS NULL ORDER BY filename, file_row_number LIMIT 1"
    ).fetchone()
    if row:
        column = "subject_id" if row[2] else "code"
        raise SourceSchemaError(
            row[0], column=column, expected="non-null", found=f"null in row {row[1]}"
        )
    row = con.execute(
        f"""
        SELECT filename, r, subject_id, time, ps, pt FROM (
            SELECT filename, file_row_number AS r, subject_id, time,
                   lag(subject_id) OVER w AS ps, lag(time) OVER w AS pt
            FROM {scan}
            WINDOW w AS (PARTITION BY filename ORDER BY file_row_number)
        )
        WHERE subject_id < ps
           OR (subject_id = ps AND ((time IS NULL AND pt IS NOT NULL) OR time < pt))
        ORDER BY filename, r LIMIT 1
        """
    ).fetchone()
    if row:
        filename, r, sid, t, ps, pt = row
        column = "subject_id" if sid < ps else "time"
        raise SourceSchemaError(
            filename,
            column=column,
            expected="rows sorted by subject_id, then time (static rows first)",
            found=f"row {r} (subject {sid}, time {t}) after (subject {ps}, time {pt})",
        )
    row = con.execute(
        f"SELECT subject_id, list(DISTINCT filename ORDER BY filename) FROM {scan} "
        "GROUP BY subject_id HAVING count(DISTINCT filename) > 1 ORDER BY subject_id LIMIT 1"
    ).fetchone()
    if row:
        raise SourceSchemaError(
            row[1][0],
            column="subject_id",
            expected="each subject in exactly one shard",
            found=f"subject {row[0]} also in {', '.join(row[1][1:])}",
        )


def read_meds(meds_dir: Path) -> pd.DataFrame:
    """Read and validate a MEDS dataset's data shards.

    Args:
        meds_dir: MEDS dataset root.

    Returns:
        All rows in shard order: subject_id int64, time datetime64[us], code string,
        numeric_value float32, text_value string, then any extra columns.

    Raises:
        SourceSchemaError: naming the shard and column on a missing column, a wrong type, a
            null subject_id / code, unsorted subject/time, or a subject split across shards.
    """
    shards = meds_shards(meds_dir)
    _check_schemas(shards)
    _check_data(duckdb.connect(), shards)
    tables = [pq.read_table(p) for p in shards]
    table = pa.concat_tables(tables, promote_options="permissive")
    df = table.to_pandas()
    for column in ("numeric_value", "text_value"):
        if column not in df.columns:
            df[column] = pd.NA
    df["subject_id"] = df["subject_id"].astype("int64")
    df["time"] = df["time"].astype("datetime64[us]")
    df["code"] = df["code"].astype("string")
    df["numeric_value"] = df["numeric_value"].astype("float32")
    df["text_value"] = df["text_value"].astype("string")
    core = list(CORE_EXPECTED)
    return df[core + [c for c in df.columns if c not in core]]


# =========================================================================== MIMIC-shaped views


def _kind_sql(has_starts: bool = False) -> str:
    # STOP rows (MEDS-transforms' MEDICATION//STOP//<drug>) mark an order's end, not a new order.
    # With START rows (orders, from MIMIC's pharmacy table) every other MEDICATION row is an
    # eMAR administration (MEDICATION//<drug>//<event_txt>), not a new order.
    medication = (
        "starts_with(code, 'MEDICATION//START//')"
        if has_starts
        else "starts_with(code, 'MEDICATION//') AND NOT starts_with(code, 'MEDICATION//STOP//')"
    )
    return f"""CASE
        WHEN starts_with(code, 'HOSPITAL_ADMISSION//') THEN 'admission'
        WHEN starts_with(code, 'HOSPITAL_DISCHARGE//') THEN 'discharge'
        WHEN starts_with(code, 'LAB//') THEN 'lab'
        WHEN {medication} THEN 'medication'
        WHEN starts_with(code, 'DIAGNOSIS//ICD//') THEN 'diagnosis'
        WHEN starts_with(code, 'PROCEDURE//ICD//') THEN 'procedure'
    END"""


def _data_view_sql(shards: list[Path], names: set[str], has_starts: bool = False) -> str:
    select = [
        "CAST(subject_id AS BIGINT) AS subject_id",
        "CAST(time AS TIMESTAMP) AS time",
        "CAST(code AS VARCHAR) AS code",
        "CAST(numeric_value AS FLOAT) AS numeric_value"
        if "numeric_value" in names
        else "CAST(NULL AS FLOAT) AS numeric_value",
        "CAST(text_value AS VARCHAR) AS text_value"
        if "text_value" in names
        else "CAST(NULL AS VARCHAR) AS text_value",
    ]
    for column, dtype in EXTRA_COLUMNS.items():
        # TRY_CAST: a third-party extra column of an odd type must not break the core views.
        source = f'TRY_CAST("{column}" AS {dtype})' if column in names else f"CAST(NULL AS {dtype})"
        select.append(f"{source} AS {column}")
    kind = _kind_sql(has_starts)
    select += ["filename AS meds_shard", "file_row_number AS meds_row", f"{kind} AS kind"]
    return f"SELECT {', '.join(select)} FROM {_scan(shards)}"


def _codes_view_sql(meds_dir: Path) -> str:
    path = Path(meds_dir) / "metadata" / "codes.parquet"
    if not path.exists():
        return "SELECT CAST(NULL AS VARCHAR) AS code, CAST(NULL AS VARCHAR) AS description LIMIT 0"
    schema = _read_schema(path)
    if "code" not in schema.names:
        raise SourceSchemaError(path, column="code", expected="string", found="no such column")
    for column in ("code", "description"):
        if column in schema.names and not (
            _is_text(schema.field(column).type) or pa.types.is_null(schema.field(column).type)
        ):
            raise SourceSchemaError(
                path, column=column, expected="string", found=str(schema.field(column).type)
            )
    description = "CAST(description AS VARCHAR)" if "description" in schema.names else "NULL"
    return (
        f"SELECT CAST(code AS VARCHAR) AS code, {description} AS description "
        f"FROM read_parquet({_lit(path)})"
    )


def _profile(con: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    """Per kind: rows, whether hadm_id is present, whether every event_id yields an id."""
    cases = " ".join(
        f"WHEN {_lit(k)} THEN TRY_CAST(regexp_extract(event_id, {_lit(p)}, 1) AS INTEGER)"
        for k, p in EVENT_ID_PATTERN.items()
    )
    rows = con.execute(
        f"""
        SELECT kind, count(*), count(hadm_id),
               count(CASE kind {cases} END), max(hadm_id), min(hadm_id)
        FROM meds_data WHERE kind IS NOT NULL GROUP BY kind
        """
    ).fetchall()
    return {
        kind: {
            "rows": n,
            "hadm": n_hadm > 0,
            "ids": kind in EVENT_ID_PATTERN and n_ids == n,
            "hadm_range": (lo, hi),
        }
        for kind, n, n_hadm, n_ids, hi, lo in rows
    }


def _check_id_ranges(con: duckdb.DuckDBPyConnection, profile: dict, shards: list[Path]) -> None:
    """MIMIC-shaped views hold ids as INTEGER: refuse ids that would overflow."""
    lo, hi = con.execute("SELECT min(subject_id), max(subject_id) FROM meds_data").fetchone()
    for column, (a, b) in [("subject_id", (lo, hi))] + [
        ("hadm_id", p["hadm_range"]) for p in profile.values()
    ]:
        for v in (a, b):
            if v is not None and not -INT32_MAX - 1 <= v <= INT32_MAX:
                raise SourceSchemaError(
                    shards[0].parent,
                    column=column,
                    expected="ids within INTEGER range (MIMIC-shaped views)",
                    found=str(v),
                )


def _assign_hadm_sql(kind: str, trusted: bool, by_day: bool = False) -> str:
    """Rows of ``kind`` with their admission id ``hid``.

    Trusted: the hadm_id column as is (NULL = outside any admission, like MIMIC's outpatient
    labs). Otherwise the admission whose [admittime, dischtime] holds the row's time — by
    calendar day for date-only rows (procedure chartdate is midnight of the admission day).
    """
    if trusted:
        return f"SELECT *, hadm_id AS hid FROM meds_data WHERE kind = {_lit(kind)}"
    key = "time + INTERVAL 1 DAY - INTERVAL 1 MICROSECOND" if by_day else "time"
    inside = (
        "CAST(e.time AS DATE) <= CAST(a.dischtime AS DATE)" if by_day else "e.time <= a.dischtime"
    )
    return f"""
        SELECT e.* EXCLUDE (key_time),
               CASE WHEN a.dischtime IS NULL OR {inside} THEN a.hadm_id END AS hid
        FROM (SELECT *, {key} AS key_time FROM meds_data WHERE kind = {_lit(kind)}) e
        ASOF LEFT JOIN meds_admission_spans a
          ON e.subject_id = a.subject_id AND e.key_time >= a.admittime"""


def _surrogate(partition: str = "") -> str:
    over = f"PARTITION BY {partition} " if partition else ""
    return f"row_number() OVER ({over}ORDER BY subject_id, time, code, meds_shard, meds_row)"


def _id_sql(kind: str, profile: dict, partition: str = "") -> str:
    if profile.get(kind, {}).get("ids"):
        return f"TRY_CAST(regexp_extract(event_id, {_lit(EVENT_ID_PATTERN[kind])}, 1) AS INTEGER)"
    return _surrogate(partition)


def _mimic_select(table: str, provided: dict[str, str], source: str) -> str:
    """All HOSP_TABLES columns of ``table`` in order: provided expressions, else typed NULL."""
    cols = [f"CAST({provided.get(c, 'NULL')} AS {t}) AS {c}" for c, t in HOSP_TABLES[table].items()]
    return f"SELECT {', '.join(cols)} FROM ({source})"


def _admission_spans_sql(profile: dict) -> str:
    dis_trusted = profile.get("discharge", {}).get("hadm", False)
    # A discharge without hadm_id closes the latest admission that started before it.
    dis_hadm = (
        "SELECT dis_hadm_id AS hid, * FROM dis"
        if dis_trusted
        else """SELECT i.hid, d.* FROM dis d ASOF JOIN ids i
                ON d.subject_id = i.subject_id AND d.dischtime >= i.admittime"""
    )
    return f"""
    WITH adm AS (
        SELECT subject_id, time AS admittime, hadm_id, end_time, code, meds_shard, meds_row,
               nullif(nullif(split_part(code, '//', 2), ''), 'UNK') AS admission_type,
               nullif(nullif(split_part(code, '//', 3), ''), 'UNK') AS admission_location
        FROM meds_data WHERE kind = 'admission' AND time IS NOT NULL
    ),
    ids AS (
        -- Admissions without hadm_id get ids after the largest real one, in stable order.
        SELECT *, coalesce(hadm_id, (SELECT coalesce(max(hadm_id), 0) FROM adm)
                  + row_number() OVER (ORDER BY subject_id, admittime, code, meds_shard,
                                       meds_row)) AS hid
        FROM adm
    ),
    dis AS (
        SELECT subject_id, time AS dischtime, hadm_id AS dis_hadm_id, code AS dis_code,
               meds_shard AS dis_shard, meds_row AS dis_row,
               nullif(nullif(substr(code, 21), ''), 'UNK') AS discharge_location
        FROM meds_data WHERE kind = 'discharge' AND time IS NOT NULL
    ),
    dis_hadm AS ({dis_hadm}),
    dis_first AS (
        SELECT * FROM (
            SELECT *, row_number() OVER (
                PARTITION BY hid ORDER BY dischtime, dis_code, dis_shard, dis_row) AS rn
            FROM dis_hadm WHERE hid IS NOT NULL
        ) WHERE rn = 1
    )
    SELECT i.subject_id, i.hid AS hadm_id, i.admittime,
           coalesce(d.dischtime, i.end_time) AS dischtime,
           i.admission_type, i.admission_location, d.discharge_location
    FROM ids i LEFT JOIN dis_first d ON d.hid = i.hid
    """


# float32 -> its shortest decimal text -> DOUBLE: 1.2f reads back as 1.2.
VALUE_AS_DOUBLE = "CAST(CAST(numeric_value AS VARCHAR) AS DOUBLE)"


def _panel_ranges_sql(ranges_given: bool) -> tuple[str, dict[str, str]]:
    """A JOIN clause and the labevents range/flag columns (module docstring, "Lab reference
    ranges"): the dataset's own when it has any, else the panel's typical range."""
    own = {"ref_range_lower": "ref_low", "ref_range_upper": "ref_high", "flag": "flag"}
    if ranges_given:
        return "", own
    rows = ", ".join(
        f"({itemid}, {'NULL' if lab.ref_low is None else lab.ref_low}, "
        f"{'NULL' if lab.ref_high is None else lab.ref_high})"
        for lab in LAB_PANEL
        for itemid in lab.itemids
    )
    join = (
        f"LEFT JOIN (SELECT * FROM (VALUES {rows}) AS p(p_itemid, p_low, p_high)) p "
        "ON p.p_itemid = itemid"
    )
    flag = f"CASE WHEN {VALUE_AS_DOUBLE} < p_low OR {VALUE_AS_DOUBLE} > p_high THEN 'abnormal' END"
    return join, {
        "ref_range_lower": "CAST(p_low AS DOUBLE)",
        "ref_range_upper": "CAST(p_high AS DOUBLE)",
        "flag": flag,
    }


def _views_sql(profile: dict, ranges_given: bool = True) -> dict[str, str]:
    def trusted(kind: str) -> bool:
        return profile.get(kind, {}).get("hadm", False)

    range_join, range_columns = _panel_ranges_sql(ranges_given)
    views = {}
    views["patients"] = _mimic_select(
        "patients",
        {
            "subject_id": "subject_id",
            "gender": "gender",
            "anchor_age": "year(first_time) - year(birth)",
            "anchor_year": "year(first_time)",
            "dod": "dod",
        },
        """
        SELECT subject_id,
               min(CASE WHEN starts_with(code, 'GENDER//') THEN substr(code, 9) END) AS gender,
               min(CASE WHEN code = 'MEDS_BIRTH' THEN time END) AS birth,
               min(CASE WHEN code = 'MEDS_DEATH' THEN time END) AS dod,
               min(CASE WHEN code NOT IN ('MEDS_BIRTH', 'MEDS_DEATH') THEN time END)
                   AS first_time
        FROM meds_data GROUP BY subject_id
        """,
    )
    views["admissions"] = _mimic_select(
        "admissions",
        {
            c: c
            for c in (
                "subject_id",
                "hadm_id",
                "admittime",
                "dischtime",
                "admission_type",
                "admission_location",
                "discharge_location",
            )
        },
        "SELECT * FROM meds_admission_spans",
    )
    views["labevents"] = _mimic_select(
        "labevents",
        {
            "labevent_id": "labevent_id",
            "subject_id": "subject_id",
            "hadm_id": "hid",
            "itemid": "itemid",
            "charttime": "time",
            "value": "text_value",
            "valuenum": VALUE_AS_DOUBLE,
            "valueuom": "valueuom",
            **range_columns,
        },
        f"""
        SELECT *, {_id_sql("lab", profile)} AS labevent_id FROM (
            SELECT *, TRY_CAST(split_part(code, '//', 2) AS INTEGER) AS itemid,
                   nullif(nullif(regexp_extract(code, '^LAB//[^/]*//(.*)$', 1), ''), 'UNK')
                       AS valueuom
            FROM ({_assign_hadm_sql("lab", trusted("lab"))})
        ) {range_join} WHERE itemid IS NOT NULL
        """,
    )
    views["prescriptions"] = _mimic_select(
        "prescriptions",
        {
            "subject_id": "subject_id",
            "hadm_id": "hid",
            "pharmacy_id": "pharmacy_id",
            "starttime": "time",
            "stoptime": "end_time",
            "drug": "drug",
            "dose_val_rx": "coalesce(text_value, CAST(numeric_value AS VARCHAR))",
            "dose_unit_rx": "unit",
            "route": "coalesce(code_route, route)",
        },
        f"""
        SELECT *, {_id_sql("medication", profile)} AS pharmacy_id FROM (
            SELECT *,
                   nullif(CASE WHEN starts_with(code, 'MEDICATION//START//') THEN substr(code, 20)
                               WHEN contains(substr(code, 13), '//')
                                   THEN regexp_extract(substr(code, 13), '^(.*)//', 1)
                               ELSE substr(code, 13) END, 'UNK') AS drug,
                   CASE WHEN starts_with(code, 'MEDICATION//START//')
                             OR NOT contains(substr(code, 13), '//') THEN NULL
                        ELSE nullif(nullif(regexp_extract(substr(code, 13), '^.*//(.*)$', 1),
                                           ''), 'UNK') END AS code_route
            FROM ({_assign_hadm_sql("medication", trusted("medication"))})
        )
        """,
    )
    for table, kind, prefix, by_day in (
        ("diagnoses_icd", "diagnosis", "DIAGNOSIS", False),
        ("procedures_icd", "procedure", "PROCEDURE", True),
    ):
        provided = {
            "subject_id": "subject_id",
            "hadm_id": "hid",
            "seq_num": "seq_num",
            "icd_code": "icd_code",
            "icd_version": "icd_version",
        }
        if by_day:
            provided["chartdate"] = "CAST(time AS DATE)"
        views[table] = _mimic_select(
            table,
            provided,
            f"""
            SELECT *, {_id_sql(kind, profile, partition="subject_id, hid")} AS seq_num FROM (
                SELECT *, TRY_CAST(split_part(code, '//', 3) AS SMALLINT) AS icd_version,
                       regexp_extract(code, '^{prefix}//ICD//[^/]*//(.*)$', 1) AS icd_code
                FROM ({_assign_hadm_sql(kind, trusted(kind), by_day=by_day)})
            )
            """,
        )
    views["d_labitems"] = _mimic_select(
        "d_labitems",
        {"itemid": "itemid", "label": "label"},
        """
        SELECT TRY_CAST(split_part(c.code, '//', 2) AS INTEGER) AS itemid,
               min(m.description) AS label
        FROM (SELECT DISTINCT code FROM meds_data WHERE kind = 'lab'
              UNION SELECT code FROM meds_codes WHERE starts_with(code, 'LAB//')) c
        LEFT JOIN meds_codes m ON m.code = c.code
        GROUP BY 1 HAVING itemid IS NOT NULL
        """,
    )
    for table, prefix, kind in (
        ("d_icd_diagnoses", "DIAGNOSIS", "diagnosis"),
        ("d_icd_procedures", "PROCEDURE", "procedure"),
    ):
        views[table] = _mimic_select(
            table,
            {"icd_code": "icd_code", "icd_version": "icd_version", "long_title": "long_title"},
            f"""
            SELECT regexp_extract(c.code, '^{prefix}//ICD//[^/]*//(.*)$', 1) AS icd_code,
                   TRY_CAST(split_part(c.code, '//', 3) AS SMALLINT) AS icd_version,
                   min(m.description) AS long_title
            FROM (SELECT DISTINCT code FROM meds_data WHERE kind = '{kind}'
                  UNION SELECT code FROM meds_codes WHERE starts_with(code, '{prefix}//ICD//')) c
            LEFT JOIN meds_codes m ON m.code = c.code
            GROUP BY 1, 2 HAVING icd_version IS NOT NULL
            """,
        )
    return views


def open_meds(
    meds_dir: Path, con: duckdb.DuckDBPyConnection | None = None, validate: bool = True
) -> duckdb.DuckDBPyConnection:
    """Register MIMIC-shaped hosp VIEWS derived from a MEDS dataset's codes.

    Args:
        meds_dir: MEDS dataset root (data/**/*.parquet, optional metadata/codes.parquet).
        con: connection to register the views in (default: a new in-memory one).
        validate: also check sort order, non-null subject/code and one shard per subject
            (a scan of three columns); the shard schemas are always checked.

    Returns:
        The connection, with the nine ``HOSP_TABLES`` views (all their columns, MIMIC types;
        NULL where MEDS has no counterpart) plus ``meds_data`` (all rows, with ``kind``,
        ``meds_shard``, ``meds_row``), ``meds_codes`` and ``meds_admission_spans``.

    Raises:
        SourceSchemaError: naming the shard and column on a schema or data violation.
    """
    meds_dir = Path(meds_dir)
    shards = meds_shards(meds_dir)
    names = _check_schemas(shards)
    codes_sql = _codes_view_sql(meds_dir)
    con = duckdb.connect() if con is None else con
    if validate:
        _check_data(con, shards)
    starts = con.execute(
        f"SELECT count(*) FROM {_scan(shards, 'code')} "
        "WHERE starts_with(code, 'MEDICATION//START//')"
    ).fetchone()[0]
    view = _data_view_sql(shards, names, has_starts=starts > 0)
    con.execute(f"CREATE OR REPLACE VIEW meds_data AS {view}")
    con.execute(f"CREATE OR REPLACE VIEW meds_codes AS {codes_sql}")
    profile = _profile(con)
    _check_id_ranges(con, profile, shards)
    con.execute(f"CREATE OR REPLACE VIEW meds_admission_spans AS {_admission_spans_sql(profile)}")
    ranges_given = bool(names & {"ref_low", "ref_high", "flag"})
    for table, sql in _views_sql(profile, ranges_given).items():
        con.execute(f"CREATE OR REPLACE VIEW {table} AS {sql}")
    return con
