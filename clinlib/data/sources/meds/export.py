"""Export of the kit's events table as a MEDS 0.4 dataset (paper §3 "Cohort", Fig. 2 stages
1–2): codes in the MEDS-transforms MIMIC-IV conventions, static rows, code metadata, splits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from clinlib.core.io import atomic_path
from clinlib.data.schema import HOSP_TABLES
from clinlib.data.sources.meds.format import (
    BIRTH_CODE,
    CODES_SCHEMA,
    DATA_SCHEMA,
    DEATH_CODE,
    DEFAULT_SHARD_SIZE,
    DEFAULT_SPLIT,
    ETL_NAME,
    EVENTS_OPTIONAL,
    EVENTS_REQUIRED,
    GENDER_PREFIX,
    ICD_PARENT,
    ICD_VERSION,
    MEDS_VERSION,
    SEP,
    SPLITS_SCHEMA,
    UNKNOWN,
)
from clinlib.data.sources.mimic import SourceSchemaError
from clinlib.data.vocab import EVENT_KINDS


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
