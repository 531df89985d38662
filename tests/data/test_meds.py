"""Tests for clinlib.data.sources.meds: events -> MEDS -> MIMIC-shaped views, and MEDS validation.

Expected view contents are derived from the input events frame with plain pandas (an independent
path), or worked out by hand where ids are derived (the no-hadm_id / no-event_id case).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from clinlib.data.schema import ARTIFACTS, HOSP_TABLES
from clinlib.data.sources.meds import meds_shards, open_meds, read_meds, write_meds
from clinlib.data.sources.meds.format import ID_TYPES
from clinlib.data.sources.mimic import SourceSchemaError, describe_source

T = pd.Timestamp
COLS = list(ARTIFACTS["events"])


def event(eid, sid, hadm, time, kind, code, system, label=None, value=None, text=None,
          unit=None, lo=None, hi=None, flag=None, route=None, end=None):  # fmt: skip
    return dict(
        event_id=eid, subject_id=sid, hadm_id=hadm, visit_idx=0, time=T(time), kind=kind,
        code=code, code_system=system, label=label, value=value, value_text=text, unit=unit,
        ref_low=lo, ref_high=hi, flag=flag, route=route,
        end_time=T(end) if end else pd.NaT, source="test",
    )  # fmt: skip


def make_events() -> pd.DataFrame:
    rows = [
        # subject 1, admission 100 and 101; an outpatient lab between them (hadm_id null)
        event("ADM-100", 1, 100, "2180-01-01 10:00", "admission", "EW EMER.", "admission_type",
              "Admission", end="2180-01-05 12:00"),
        event("DIS-100", 1, 100, "2180-01-05 12:00", "discharge", "HOME", "discharge_location",
              "Discharge"),
        event("LAB-7", 1, 100, "2180-01-02 06:00", "lab", "50912", "itemid", "Creatinine",
              1.2, "1.2", "mg/dL", 0.5, 1.2),
        event("LAB-8", 1, 100, "2180-01-03 06:00", "lab", "50912", "itemid", "Creatinine",
              5.0, "___", "mg/dL", 0.5, 1.2, "abnormal"),
        event("RX-55", 1, 100, "2180-01-02 08:00", "medication", "Metformin", "drug",
              "Metformin", 500.0, "500", "mg", route="PO", end="2180-01-04 08:00"),
        event("RX-56", 1, 100, "2180-01-02 09:00", "medication", "Morphine Sulfate", "drug",
              "Morphine Sulfate", None, "50-100", "mcg", route="IV", end="2180-01-02 21:00"),
        event("DX-100-1", 1, 100, "2180-01-05 12:00", "diagnosis", "25000", "ICD9-CM",
              "Diabetes mellitus without mention of complication"),
        event("DX-100-2", 1, 100, "2180-01-05 12:00", "diagnosis", "0066", "ICD9-CM",
              "Amebic lung abscess"),
        event("PX-100-1", 1, 100, "2180-01-01 00:00", "procedure", "0040", "ICD9-PCS",
              "Procedure on single vessel"),
        event("LAB-10", 1, None, "2180-02-01 09:00", "lab", "50931", "itemid", "Glucose",
              99.0, "99", "mg/dL", 70.0, 100.0),
        event("ADM-101", 1, 101, "2180-03-01 08:00", "admission", "URGENT", "admission_type",
              "Admission", end="2180-03-03 09:00"),
        event("DIS-101", 1, 101, "2180-03-03 09:00", "discharge", None, "discharge_location",
              "Discharge"),
        event("LAB-9", 1, 101, "2180-03-02 07:30", "lab", "51003", "itemid", "Troponin T",
              0.02, "0.02", "ng/mL", None, 0.01, "abnormal"),
        event("RX-57", 1, 101, "2180-03-01 09:00", "medication", "Heparin", "drug", "Heparin",
              5000.0, "5000", "UNIT", route=None),
        event("DX-101-1", 1, 101, "2180-03-03 09:00", "diagnosis", "E119", "ICD10-CM",
              "Type 2 diabetes mellitus without complications"),
        event("PX-101-1", 1, 101, "2180-03-02 00:00", "procedure", "02HV33Z", "ICD10-PCS",
              "Insertion of Infusion Device into Superior Vena Cava, Percutaneous Approach"),
        # subject 2, one admission
        event("ADM-200", 2, 200, "2160-11-21 01:56", "admission", "EW EMER.", "admission_type",
              "Admission", end="2160-11-25 14:52"),
        event("DIS-200", 2, 200, "2160-11-25 14:52", "discharge", "CHRONIC/LONG TERM ACUTE CARE",
              "discharge_location", "Discharge"),
        event("LAB-20", 2, 200, "2160-11-22 06:00", "lab", "50893", "itemid", "Calcium, Total",
              8.9, "8.9", "mg/dL", 8.4, 10.3),
        event("DX-200-1", 2, 200, "2160-11-25 14:52", "diagnosis", "I10", "ICD10-CM",
              "Essential (primary) hypertension"),
    ]  # fmt: skip
    df = pd.DataFrame(rows, columns=COLS)
    df["hadm_id"] = df["hadm_id"].astype("Int64")
    for c in ("value", "ref_low", "ref_high"):
        df[c] = df[c].astype("float64")
    for c in ("time", "end_time"):
        df[c] = df[c].astype("datetime64[us]")
    return df


PATIENTS = pd.DataFrame(
    {
        "subject_id": [1, 2, 3],  # subject 3 has no events: not exported
        "gender": ["F", "M", "F"],
        "anchor_age": [52, 72, 40],
        "anchor_year": [2180, 2160, 2150],
        "dod": [pd.NaT, T("2161-01-02"), pd.NaT],
    }
)


@pytest.fixture()
def events() -> pd.DataFrame:
    return make_events()


@pytest.fixture()
def meds_dir(tmp_path: Path, events: pd.DataFrame) -> Path:
    return write_meds(events, tmp_path / "meds", patients=PATIENTS)


def query(con: duckdb.DuckDBPyConnection, sql: str) -> pd.DataFrame:
    df = con.execute(sql).df()
    for c in df.columns:
        if pd.api.types.is_datetime64_any_dtype(df[c]):
            df[c] = df[c].astype("datetime64[us]")
    return df


def of_kind(events: pd.DataFrame, kind: str) -> pd.DataFrame:
    return events[events["kind"] == kind]


def ids(series: pd.Series, pos: int) -> list[int]:
    return [int(s.split("-")[pos]) for s in series]


# --------------------------------------------------------------------------- round trip


def test_round_trip_reproduces_the_source_facts(meds_dir: Path, events: pd.DataFrame) -> None:
    con = open_meds(meds_dir)

    adm, dis = of_kind(events, "admission"), of_kind(events, "discharge")
    got = query(con, "SELECT * FROM admissions ORDER BY hadm_id")
    assert got["hadm_id"].tolist() == adm["hadm_id"].tolist()
    assert got["admittime"].tolist() == adm["time"].tolist()
    assert got["dischtime"].tolist() == dis["time"].tolist()
    assert got["admission_type"].tolist() == adm["code"].tolist()
    assert got["discharge_location"].isna().tolist() == dis["code"].isna().tolist()
    assert got["discharge_location"].dropna().tolist() == dis["code"].dropna().tolist()

    labs = of_kind(events, "lab").assign(labevent_id=lambda d: ids(d["event_id"], 1))
    labs = labs.sort_values("labevent_id")
    got = query(con, "SELECT * FROM labevents ORDER BY labevent_id")
    assert got["labevent_id"].tolist() == labs["labevent_id"].tolist()
    assert got["hadm_id"].astype("Int64").tolist() == labs["hadm_id"].tolist()  # NA kept
    assert got["itemid"].tolist() == [int(c) for c in labs["code"]]
    assert got["charttime"].tolist() == labs["time"].tolist()
    assert got["value"].tolist() == labs["value_text"].tolist()
    # float32 storage, but the shortest-decimal read-back gives the source doubles exactly
    assert got["valuenum"].tolist() == labs["value"].tolist()
    assert got["valueuom"].tolist() == labs["unit"].tolist()
    pd.testing.assert_series_equal(
        got["ref_range_lower"], labs["ref_low"].reset_index(drop=True), check_names=False
    )
    pd.testing.assert_series_equal(
        got["ref_range_upper"], labs["ref_high"].reset_index(drop=True), check_names=False
    )
    assert got["flag"].isna().tolist() == labs["flag"].isna().tolist()

    rx = of_kind(events, "medication").assign(pharmacy_id=lambda d: ids(d["event_id"], 1))
    rx = rx.sort_values("pharmacy_id")
    got = query(con, "SELECT * FROM prescriptions ORDER BY pharmacy_id")
    assert got["pharmacy_id"].tolist() == rx["pharmacy_id"].tolist()
    assert got["hadm_id"].tolist() == rx["hadm_id"].tolist()
    assert got["drug"].tolist() == rx["code"].tolist()
    assert got["route"].isna().tolist() == rx["route"].isna().tolist()
    assert got["route"].dropna().tolist() == rx["route"].dropna().tolist()
    assert got["dose_val_rx"].tolist() == rx["value_text"].tolist()  # "50-100" stays text
    assert got["dose_unit_rx"].tolist() == rx["unit"].tolist()
    assert got["starttime"].tolist() == rx["time"].tolist()
    assert got["stoptime"].tolist() == rx["end_time"].tolist()

    for table, kind in (("diagnoses_icd", "diagnosis"), ("procedures_icd", "procedure")):
        src = of_kind(events, kind).assign(
            hadm=lambda d: ids(d["event_id"], 1), seq=lambda d: ids(d["event_id"], 2)
        )
        src = src.sort_values(["hadm", "seq"])
        got = query(con, f"SELECT * FROM {table} ORDER BY hadm_id, seq_num")
        assert got["hadm_id"].tolist() == src["hadm"].tolist()
        assert got["seq_num"].tolist() == src["seq"].tolist()
        assert got["icd_code"].tolist() == src["code"].tolist()  # "0066" keeps its zeros
        assert got["icd_version"].tolist() == [
            9 if s.startswith("ICD9") else 10 for s in src["code_system"]
        ]
        if table == "procedures_icd":
            assert got["chartdate"].tolist() == [t.normalize() for t in src["time"]]

    d_lab = query(con, "SELECT itemid, label FROM d_labitems ORDER BY itemid")
    expected = of_kind(events, "lab").drop_duplicates("code").sort_values("code")
    assert d_lab["itemid"].tolist() == sorted(int(c) for c in expected["code"])
    assert dict(zip(d_lab["itemid"], d_lab["label"], strict=True)) == {
        int(c): lab for c, lab in zip(expected["code"], expected["label"], strict=True)
    }
    titles = query(con, "SELECT * FROM d_icd_diagnoses")
    src = of_kind(events, "diagnosis")
    assert dict(zip(titles["icd_code"], titles["long_title"], strict=True)) == dict(
        zip(src["code"], src["label"], strict=True)
    )


def test_views_have_the_mimic_columns_and_types(meds_dir: Path) -> None:
    con = open_meds(meds_dir)
    for table, columns in HOSP_TABLES.items():
        described = con.execute(f"DESCRIBE {table}").fetchall()
        assert [r[0] for r in described] == list(columns), table
        # MIMIC's types, except ids held as BIGINT (content ids are 60-bit: ID_TYPES)
        assert [r[1] for r in described] == [
            ID_TYPES.get(c, {"REAL": "FLOAT"}.get(t, t)) for c, t in columns.items()
        ], table
    assert set(describe_source(con)["table"]) == set(HOSP_TABLES)


def test_patients_from_static_rows(meds_dir: Path) -> None:
    con = open_meds(meds_dir)
    got = query(con, "SELECT * FROM patients ORDER BY subject_id")
    assert got["subject_id"].tolist() == [1, 2]  # subject 3 had no events
    assert got["gender"].tolist() == ["F", "M"]
    # MEDS keeps the birth year, not MIMIC's anchor: anchor_year - anchor_age is preserved.
    assert (got["anchor_year"] - got["anchor_age"]).tolist() == [2180 - 52, 2160 - 72]
    assert got["anchor_year"].tolist() == [2180, 2160]  # year of the first event
    assert pd.isna(got.loc[0, "dod"]) and got.loc[1, "dod"] == T("2161-01-02")


# --------------------------------------------------------------------------- MEDS layout


def test_files_follow_meds(meds_dir: Path, events: pd.DataFrame) -> None:
    shards = meds_shards(meds_dir)
    assert [p.relative_to(meds_dir).as_posix() for p in shards] == ["data/held_out/0.parquet"]
    schema = pq.read_schema(shards[0])
    assert schema.field("subject_id").type == pa.int64()
    assert schema.field("time").type == pa.timestamp("us")
    assert schema.field("code").type == pa.string()
    assert schema.field("numeric_value").type == pa.float32()
    assert pa.types.is_large_string(schema.field("text_value").type)
    assert {"hadm_id", "event_id"} <= set(schema.names)

    table = pq.read_table(shards[0])
    n_static = 2 + 2 + 1  # birth x2, gender x2, death x1
    assert table.num_rows == len(events) + n_static
    sid = table["subject_id"].to_numpy()
    t = table["time"].to_pandas()
    assert (np.diff(sid) >= 0).all()
    for s in (1, 2):
        ts = t[sid == s]
        first_timed = ts.notna().idxmax()
        assert ts.loc[:first_timed].iloc[:-1].isna().all()  # static rows first
        assert ts.dropna().is_monotonic_increasing
    codes = set(table["code"].to_pylist())
    assert {
        "HOSPITAL_ADMISSION//EW EMER.",
        "HOSPITAL_DISCHARGE//UNK",  # null discharge_location
        "LAB//50912//mg/dL",
        "MEDICATION//Metformin//PO",
        "MEDICATION//Heparin//UNK",
        "DIAGNOSIS//ICD//9//0066",
        "DIAGNOSIS//ICD//10//E119",
        "PROCEDURE//ICD//10//02HV33Z",
        "MEDS_BIRTH",
        "MEDS_DEATH",
        "GENDER//F",
    } <= codes
    gender = table.filter(pc.starts_with(table["code"], "GENDER//"))
    assert gender["time"].null_count == gender.num_rows
    lab8 = table.filter(pc.equal(table["event_id"], "LAB-8")).to_pylist()[0]
    assert lab8["numeric_value"] == 5.0 and lab8["text_value"] == "___"

    meta = pq.read_table(meds_dir / "metadata" / "codes.parquet")
    assert meta.schema.field("parent_codes").type == pa.list_(pa.string())
    assert set(meta["code"].to_pylist()) == codes
    by_code = {r["code"]: r for r in meta.to_pylist()}
    assert by_code["LAB//50912//mg/dL"]["description"] == "Creatinine"
    assert by_code["DIAGNOSIS//ICD//9//0066"]["parent_codes"] == ["ICD9CM/0066"]
    assert by_code["PROCEDURE//ICD//10//02HV33Z"]["parent_codes"] == ["ICD10PCS/02HV33Z"]
    assert by_code["PROCEDURE//ICD//9//0040"]["parent_codes"] == ["ICD9Proc/0040"]

    info = json.loads((meds_dir / "metadata" / "dataset.json").read_text())
    assert {"dataset_name", "dataset_version", "etl_name", "etl_version", "meds_version",
            "created_at"} <= set(info)  # fmt: skip
    assert info["dataset_name"] == "clintrace-synthetic"
    splits = pq.read_table(meds_dir / "metadata" / "subject_splits.parquet")
    assert splits.schema == pa.schema([("subject_id", pa.int64()), ("split", pa.string())])
    assert splits.to_pydict() == {"subject_id": [1, 2], "split": ["held_out", "held_out"]}


def test_export_ignores_input_row_order(tmp_path: Path, events: pd.DataFrame) -> None:
    a = read_meds(write_meds(events, tmp_path / "a", patients=PATIENTS))
    shuffled = events.sample(frac=1.0, random_state=7).reset_index(drop=True)
    b = read_meds(write_meds(shuffled, tmp_path / "b", patients=PATIENTS))
    pd.testing.assert_frame_equal(a, b)


def test_shards_and_splits(tmp_path: Path, events: pd.DataFrame) -> None:
    out = write_meds(events, tmp_path / "m", shard_size=1, splits={1: "train", 2: "tuning"})
    names = [p.relative_to(out).as_posix() for p in meds_shards(out)]
    assert names == ["data/train/0.parquet", "data/tuning/0.parquet"]
    df = read_meds(out)
    assert (
        df.groupby("subject_id").size().to_dict() == events.groupby("subject_id").size().to_dict()
    )
    assert str(df["time"].dtype) == "datetime64[us]" and str(df["numeric_value"].dtype) == "float32"
    # the same facts as the single-shard dataset
    one = open_meds(write_meds(events, tmp_path / "one"))
    many = open_meds(out)
    for table in ("admissions", "labevents", "prescriptions", "diagnoses_icd"):
        pd.testing.assert_frame_equal(
            query(one, f"SELECT * FROM {table} ORDER BY ALL"),
            query(many, f"SELECT * FROM {table} ORDER BY ALL"),
        )


def test_rewrite_replaces_a_meds_dir_but_not_other_dirs(tmp_path: Path, events: pd.DataFrame):
    out = write_meds(events, tmp_path / "m")
    write_meds(events[events["subject_id"] == 2], out)
    assert read_meds(out)["subject_id"].unique().tolist() == [2]
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(ValueError, match="not a MEDS dataset"):
        write_meds(events, other)
    assert (other / "keep.txt").exists()


# --------------------------------------------------------------------------- derived ids


def strip_columns(meds_dir: Path, drop: tuple[str, ...]) -> None:
    for shard in meds_shards(meds_dir):
        table = pq.read_table(shard)
        pq.write_table(table.drop_columns([c for c in drop if c in table.schema.names]), shard)


def test_without_hadm_and_event_id_admissions_and_ids_are_derived(meds_dir: Path) -> None:
    strip_columns(meds_dir, ("hadm_id", "event_id", "end_time"))
    con = open_meds(meds_dir)
    adm = query(con, "SELECT * FROM admissions ORDER BY subject_id, admittime")
    # Derived hadm ids are content ids (families module); discharges pair with their admission.
    assert adm["hadm_id"].is_unique and (adm["hadm_id"] > 2**31).all()
    hadm = dict(enumerate(adm["hadm_id"], start=1))  # 1, 2, 3 in (subject, admittime) order
    assert adm["subject_id"].tolist() == [1, 1, 2]
    assert adm["admittime"].tolist() == [T("2180-01-01 10:00"), T("2180-03-01 08:00"),
                                         T("2160-11-21 01:56")]  # fmt: skip
    assert adm["dischtime"].tolist() == [T("2180-01-05 12:00"), T("2180-03-03 09:00"),
                                         T("2160-11-25 14:52")]  # fmt: skip
    assert adm["discharge_location"].tolist()[0] == "HOME"
    assert pd.isna(adm["discharge_location"].tolist()[1])

    labs = query(con, "SELECT * FROM labevents ORDER BY subject_id, charttime")
    assert labs["charttime"].tolist() == [T("2180-01-02 06:00"), T("2180-01-03 06:00"),
                                          T("2180-02-01 09:00"), T("2180-03-02 07:30"),
                                          T("2160-11-22 06:00")]  # fmt: skip
    assert labs["labevent_id"].is_unique  # content ids, checked for stability elsewhere
    # inside admission 1, inside 1, between admissions (outpatient), inside 2, inside 3
    assert labs["hadm_id"].astype("Int64").tolist() == [hadm[1], hadm[1], pd.NA, hadm[2], hadm[3]]

    rx = query(con, "SELECT * FROM prescriptions ORDER BY subject_id, starttime")
    assert rx["drug"].tolist() == ["Metformin", "Morphine Sulfate", "Heparin"]
    assert rx["hadm_id"].tolist() == [hadm[1], hadm[1], hadm[2]]
    assert rx["stoptime"].isna().all()  # end_time was dropped

    dx = query(con, "SELECT * FROM diagnoses_icd ORDER BY subject_id, icd_version, seq_num")
    # seq_num per admission by (time, code): "0066" sorts before "25000"
    assert list(zip(dx["hadm_id"], dx["seq_num"], dx["icd_code"], strict=True)) == [
        (hadm[1], 1, "0066"),
        (hadm[1], 2, "25000"),
        (hadm[2], 1, "E119"),
        (hadm[3], 1, "I10"),
    ]
    px = query(con, "SELECT * FROM procedures_icd ORDER BY subject_id, chartdate")
    # chartdate midnight precedes admittime 10:00 but is the admission day
    assert px["hadm_id"].tolist() == [hadm[1], hadm[2]]
    assert px["icd_code"].tolist() == ["0040", "02HV33Z"]

    again = open_meds(meds_dir)
    order = "ORDER BY subject_id, charttime"
    pd.testing.assert_frame_equal(labs, query(again, f"SELECT * FROM labevents {order}"))


def test_meds_transforms_style_codes(tmp_path: Path) -> None:
    """Third-party MEDS: admission code with location, START/STOP medication rows, no extras."""
    rows = [
        (5, None, "GENDER//M", None, None),
        (5, T("2150-01-01"), "MEDS_BIRTH", None, None),
        (5, T("2200-01-01 08:00"), "HOSPITAL_ADMISSION//URGENT//EMERGENCY ROOM", None, None),
        (5, T("2200-01-01 09:00"), "LAB//50912//UNK", 2.0, "2.0"),
        (5, T("2200-01-01 10:00"), "MEDICATION//START//Aspirin", None, None),
        (5, T("2200-01-02 10:00"), "MEDICATION//STOP//Aspirin", None, None),
        (5, T("2200-01-03 08:00"), "DIAGNOSIS//ICD//10//I10", None, None),
        (5, T("2200-01-03 08:00"), "HOSPITAL_DISCHARGE//HOME", None, None),
    ]
    table = pa.table(
        {
            "subject_id": pa.array([r[0] for r in rows], pa.int64()),
            "time": pa.array([r[1] for r in rows], pa.timestamp("us")),
            "code": pa.array([r[2] for r in rows], pa.string()),
            "numeric_value": pa.array([r[3] for r in rows], pa.float32()),
            "text_value": pa.array([r[4] for r in rows], pa.string()),
        }
    )
    (tmp_path / "m" / "data").mkdir(parents=True)
    pq.write_table(table, tmp_path / "m" / "data" / "0.parquet")
    con = open_meds(tmp_path / "m")
    adm = con.execute(
        "SELECT hadm_id, admission_type, admission_location, discharge_location, dischtime "
        "FROM admissions"
    ).fetchall()
    # No hadm_id: the admission's id is the first 60 bits of the md5 of its row's content
    # (families.CONTENT_COLUMNS as JSON), worked out here with hashlib.
    content = ["5", "2200-01-01 08:00:00", "HOSPITAL_ADMISSION//URGENT//EMERGENCY ROOM"]
    key = json.dumps(content + [None] * 9, separators=(",", ":"))
    hid = int(hashlib.md5(key.encode()).hexdigest()[:15], 16)
    assert adm == [(hid, "URGENT", "EMERGENCY ROOM", "HOME", T("2200-01-03 08:00").to_pydatetime())]
    assert con.execute("SELECT drug, route, hadm_id FROM prescriptions").fetchall() == [
        ("Aspirin", None, hid)
    ]
    lab = con.execute("SELECT itemid, valuenum, valueuom, hadm_id FROM labevents").fetchall()
    assert lab == [(50912, 2.0, None, hid)]
    assert con.execute("SELECT count(*) FROM d_labitems WHERE label IS NULL").fetchone()[0] == 1
    assert con.execute("SELECT gender, anchor_year - anchor_age FROM patients").fetchall() == [
        ("M", 2150)
    ]


# --------------------------------------------------------------------------- violations


def both_raise(meds_dir: Path, *fragments: str) -> None:
    for reader in (read_meds, open_meds):
        with pytest.raises(SourceSchemaError) as info:
            reader(meds_dir)
        for fragment in fragments:
            assert fragment in str(info.value), (reader.__name__, str(info.value))


def rewrite(shard: Path, fn) -> None:
    pq.write_table(fn(pq.read_table(shard)), shard)


def test_missing_code_column(meds_dir: Path) -> None:
    shard = meds_shards(meds_dir)[0]
    rewrite(shard, lambda t: t.drop_columns(["code"]))
    both_raise(meds_dir, str(shard), "'code'", "no such column")


def test_time_in_nanoseconds_is_refused(meds_dir: Path) -> None:
    shard = meds_shards(meds_dir)[0]
    ns = pa.timestamp("ns")
    rewrite(shard, lambda t: t.set_column(1, pa.field("time", ns), t["time"].cast(ns)))
    both_raise(meds_dir, str(shard), "'time'", "timestamp[us]", "timestamp[ns]")


def test_numeric_value_float64_is_refused(meds_dir: Path) -> None:
    shard = meds_shards(meds_dir)[0]
    idx = pq.read_schema(shard).get_field_index("numeric_value")
    rewrite(
        shard,
        lambda t: t.set_column(
            idx, pa.field("numeric_value", pa.float64()), t["numeric_value"].cast(pa.float64())
        ),
    )
    both_raise(meds_dir, str(shard), "'numeric_value'", "float32", "double")


def test_unsorted_rows(meds_dir: Path) -> None:
    shard = meds_shards(meds_dir)[0]
    rewrite(shard, lambda t: t.take(list(range(t.num_rows - 1, -1, -1))))
    both_raise(meds_dir, str(shard), "sorted by subject_id, then time")


def test_unsorted_time_within_subject(meds_dir: Path) -> None:
    shard = meds_shards(meds_dir)[0]

    # swap two timed rows of subject 1 (rows 4 and 5: distinct times)
    def swap(t: pa.Table) -> pa.Table:
        order = list(range(t.num_rows))
        order[4], order[5] = order[5], order[4]
        return t.take(order)

    times = pq.read_table(shard)["time"].to_pylist()
    assert times[4] < times[5]
    rewrite(shard, swap)
    both_raise(meds_dir, str(shard), "column 'time'", "row 5")


def test_subject_split_across_shards(tmp_path: Path, events: pd.DataFrame) -> None:
    out = write_meds(events, tmp_path / "m", shard_size=1)
    first, second = meds_shards(out)
    t1, t2 = pq.read_table(first), pq.read_table(second)
    # one more row of subject 2 in the first shard (still sorted there)
    pq.write_table(pa.concat_tables([t1, t2.slice(0, 1)]), first)
    both_raise(out, "subject 2", "each subject in exactly one shard", str(second))


def test_null_code(meds_dir: Path) -> None:
    shard = meds_shards(meds_dir)[0]
    idx = pq.read_schema(shard).get_field_index("code")

    def null_one(t: pa.Table) -> pa.Table:
        codes = t["code"].to_pylist()
        codes[3] = None
        return t.set_column(idx, "code", pa.array(codes, pa.string()))

    rewrite(shard, null_one)
    both_raise(meds_dir, str(shard), "'code'", "null in row 3")


def test_no_data_folder(tmp_path: Path, meds_dir: Path) -> None:
    shutil.rmtree(meds_dir / "data")
    both_raise(meds_dir, "data", "no such folder")


# --------------------------------------------------------------------------- bad events input


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (lambda e: e.drop(columns="code_system"), ("'code_system'", "no such column")),
        (lambda e: e.assign(kind=e["kind"].replace("lab", "vital")), ("'kind'", "'vital'")),
        (
            lambda e: e.assign(code_system=e["code_system"].replace("ICD10-PCS", "CPT")),
            ("'code_system'", "'CPT'", "PX-101-1"),
        ),
        (
            lambda e: e.assign(time=e["time"].mask(e["event_id"] == "LAB-9")),
            ("'time'", "LAB-9"),
        ),
        (
            lambda e: e.assign(code=e["code"].mask(e["event_id"] == "DX-200-1")),
            ("'code'", "DX-200-1"),
        ),
    ],
)
def test_bad_events_are_refused(tmp_path: Path, events: pd.DataFrame, change, fragments) -> None:
    with pytest.raises(SourceSchemaError) as info:
        write_meds(change(events), tmp_path / "m")
    for fragment in fragments:
        assert fragment in str(info.value)
    assert not (tmp_path / "m").exists()


# --------------------------------------------------------------------------- with the kit


def test_kit_events_survive_a_meds_round_trip(tmp_path: Path) -> None:
    """hosp CSVs -> cohort -> events -> MEDS -> views -> events: the same event table."""
    from clinlib.data.cohort import select_cohort
    from clinlib.data.events import extract_events
    from clinlib.data.sources.mimic import open_hosp
    from tests import hosp_fixture

    hosp = open_hosp(hosp_fixture.write_csv_dir(tmp_path / "mimic"))
    cohort = select_cohort(hosp, per_disease=10, seed=0).cohort
    subjects = cohort["subject_id"].tolist()
    events = extract_events(hosp, subjects)
    assert len(events) > 0
    meds = open_meds(write_meds(events, tmp_path / "meds"))
    again = extract_events(meds, subjects)
    pd.testing.assert_frame_equal(events, again)
