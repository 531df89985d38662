"""Tests for clinlib.data.sources.mimic: lazy, typed DuckDB views over MIMIC-IV hosp files.

The fixture writes tiny MIMIC-shaped hosp tables by hand, with the real-data quirks the reference
doc lists (doubled quotes inside quoted values, multi-line comments, value '___' with a valid
valuenum, labevents without hadm_id, dose ranges, ndc '0', text codes with leading zeros).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from clinlib.data.schema import HOSP_TABLES, REQUIRED
from clinlib.data.sources.mimic import (
    SourceSchemaError,
    describe_source,
    hosp_table_paths,
    open_hosp,
)

CSV = {
    "patients": """subject_id,gender,anchor_age,anchor_year,anchor_year_group,dod
10000001,F,52,2180,2014 - 2016,2181-09-09
10000002,M,72,2160,2017 - 2019,
""",
    "admissions": (
        "subject_id,hadm_id,admittime,dischtime,deathtime,admission_type,admit_provider_id,"
        "admission_location,discharge_location,insurance,language,marital_status,race,"
        "edregtime,edouttime,hospital_expire_flag\n"
        "10000001,20000001,2180-05-06 22:23:00,2180-05-08 17:15:00,,URGENT,P1AAAA,"
        "TRANSFER FROM HOSPITAL,HOME,Other,ENGLISH,WIDOWED,WHITE,,,0\n"
        "10000001,20000002,2180-06-26 18:27:00,2180-06-27 18:49:00,,EW EMER.,P2BBBB,"
        "EMERGENCY ROOM,,Medicaid,ENGLISH,WIDOWED,WHITE,2180-06-26 15:54:00,"
        "2180-06-26 21:31:00,0\n"
        "10000002,20000003,2160-11-21 01:56:00,2160-11-25 14:52:00,,EW EMER.,P3CCCC,"
        '"WALK-IN/SELF REFERRAL",CHRONIC/LONG TERM ACUTE CARE,Medicare,ENGLISH,MARRIED,WHITE,,,0\n'
    ),
    "labevents": (
        "labevent_id,subject_id,hadm_id,specimen_id,itemid,order_provider_id,charttime,"
        "storetime,value,valuenum,valueuom,ref_range_lower,ref_range_upper,flag,priority,"
        "comments\n"
        "1,10000001,20000001,101,50912,,2180-05-07 05:00:00,2180-05-07 06:00:00,1.2,1.2,mg/dL,"
        "0.5,1.2,,ROUTINE,\n"
        "2,10000001,,102,51003,,2180-04-01 09:00:00,2180-04-01 10:00:00,___,0.02,ng/mL,0,0.01,"
        'abnormal,STAT,"VERIFIED, ""1 NRBC"" PRESENT.  CHECKED"\n'
        "3,10000001,20000001,103,50931,P9ZZZZ,2180-05-07 05:00:00,,___,140,mg/dL,70,100,"
        'abnormal,,"Line one\nline two"\n'
        "4,10000002,20000003,104,50893,,2160-11-22 06:00:00,,8.9,8.9,mg/dL,8.4,10.3,,ROUTINE,"
        '"<0.01"\n'
    ),
    "d_labitems": """itemid,label,fluid,category
50912,Creatinine,Blood,Chemistry
51003,Troponin T,Blood,Chemistry
50931,Glucose,Blood,Chemistry
50893,"Calcium, Total",Blood,Chemistry
""",
    "prescriptions": (
        "subject_id,hadm_id,pharmacy_id,poe_id,poe_seq,order_provider_id,starttime,stoptime,"
        "drug_type,drug,formulary_drug_cd,gsn,ndc,prod_strength,form_rx,dose_val_rx,"
        "dose_unit_rx,form_val_disp,form_unit_disp,doses_per_24_hrs,route\n"
        "10000001,20000001,501,10000001-20,20,P1AAAA,2180-05-06 23:00:00,2180-05-08 17:00:00,"
        "MAIN,Metformin,METF500,004245,00904516561,500mg Tablet,,500,mg,1,TAB,2,PO\n"
        "10000001,20000001,502,10000001-21,21,P1AAAA,2180-05-07 01:00:00,2180-05-07 09:00:00,"
        'MAIN,Morphine Sulfate,MORP2I,,0,"2mg/1mL Syringe",,50-100,mcg,1,SYR,,IV\n'
        "10000002,20000003,503,,,,2160-11-21 03:00:00,,BASE,"
        '"Sodium Chloride 0.9%  Flush",NACLFLUSH,,0,10 mL Syringe,,3,mL,1,SYR,3,IV\n'
    ),
    "diagnoses_icd": """subject_id,hadm_id,seq_num,icd_code,icd_version
10000001,20000001,1,0066,9
10000001,20000001,2,25000,9
10000002,20000003,1,E119,10
""",
    "d_icd_diagnoses": """icd_code,icd_version,long_title
0066,9,Amebic lung abscess
25000,9,"Diabetes mellitus without mention of complication, type II or unspecified type"
E119,10,Type 2 diabetes mellitus without complications
""",
    "procedures_icd": """subject_id,hadm_id,seq_num,chartdate,icd_code,icd_version
10000001,20000001,1,2180-05-07,0040,9
10000002,20000003,1,2160-11-22,02HV33Z,10
""",
    "d_icd_procedures": """icd_code,icd_version,long_title
0040,9,Procedure on single vessel
02HV33Z,10,"Insertion of Infusion Device into Superior Vena Cava, Percutaneous Approach"
""",
}

# DuckDB reports REAL as FLOAT.
DUCKDB_NAME = {"REAL": "FLOAT"}


def write_hosp(root: Path, tables: dict[str, str] = CSV, suffix: str = ".csv.gz") -> Path:
    """Write the given CSV texts as <root>/hosp/<table><suffix>; returns root."""
    hosp = root / "hosp"
    hosp.mkdir(parents=True, exist_ok=True)
    for table, text in tables.items():
        path = hosp / f"{table}{suffix}"
        if suffix == ".csv.gz":
            with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
                handle.write(text)
        else:
            path.write_text(text, encoding="utf-8")
    return root


def with_table(table: str, text: str) -> dict[str, str]:
    return {**CSV, table: text}


@pytest.fixture()
def hosp_root(tmp_path: Path) -> Path:
    return write_hosp(tmp_path / "mimiciv")


def column_types(con: duckdb.DuckDBPyConnection, view: str) -> dict[str, str]:
    return {name: dtype for name, dtype, *_ in con.execute(f"DESCRIBE {view}").fetchall()}


# --------------------------------------------------------------------------- views and types


def test_every_table_is_a_typed_view(hosp_root: Path) -> None:
    con = open_hosp(hosp_root)
    for table, columns in HOSP_TABLES.items():
        types = column_types(con, table)
        assert list(types) == list(columns), table
        for column, expected in columns.items():
            assert types[column] == DUCKDB_NAME.get(expected, expected), (table, column)


def test_views_are_lazy(hosp_root: Path) -> None:
    con = open_hosp(hosp_root)
    views = dict(
        con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()
    )
    assert set(views) == set(HOSP_TABLES)
    assert "read_csv" in views["labevents"]
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0] == 0


def test_mimic_quirks_parse(hosp_root: Path) -> None:
    con = open_hosp(hosp_root)
    labs = con.execute(
        "SELECT labevent_id, hadm_id, value, valuenum, comments FROM labevents ORDER BY 1"
    ).df()
    # Doubled quotes inside a quoted field (mimic-code #1881) and an embedded newline.
    assert labs.loc[1, "comments"] == 'VERIFIED, "1 NRBC" PRESENT.  CHECKED'
    assert labs.loc[2, "comments"] == "Line one\nline two"
    assert labs.loc[3, "comments"] == "<0.01"
    # '___' in value with a valid valuenum; a row without hadm_id (outpatient draw).
    assert labs.loc[1, "value"] == "___" and labs.loc[1, "valuenum"] == pytest.approx(0.02)
    assert labs.loc[2, "value"] == "___" and labs.loc[2, "valuenum"] == 140.0
    assert pd.isna(labs.loc[1, "hadm_id"]) and labs.loc[0, "hadm_id"] == 20000001
    rx = con.execute("SELECT pharmacy_id, ndc, gsn, dose_val_rx, drug FROM prescriptions").df()
    rx = rx.set_index("pharmacy_id")
    assert rx.loc[501, "ndc"] == "00904516561" and rx.loc[501, "gsn"] == "004245"
    assert rx.loc[502, "ndc"] == "0" and rx.loc[502, "dose_val_rx"] == "50-100"
    assert rx.loc[503, "drug"] == "Sodium Chloride 0.9%  Flush"
    codes = con.execute("SELECT icd_code FROM diagnoses_icd ORDER BY seq_num, icd_code").df()
    assert "0066" in set(codes["icd_code"])
    title = con.execute(
        "SELECT long_title FROM diagnoses_icd JOIN d_icd_diagnoses USING (icd_code, icd_version) "
        "WHERE icd_code = '25000'"
    ).fetchone()[0]
    assert title.startswith("Diabetes mellitus without mention of complication, type II")
    assert con.execute("SELECT label FROM d_labitems WHERE itemid = 50893").fetchone()[0] == (
        "Calcium, Total"
    )
    adm = con.execute(
        "SELECT admission_location, discharge_location FROM admissions WHERE hadm_id = 20000003"
    ).fetchone()
    assert adm == ("WALK-IN/SELF REFERRAL", "CHRONIC/LONG TERM ACUTE CARE")
    assert con.execute(
        "SELECT discharge_location IS NULL FROM admissions WHERE hadm_id = 20000002"
    ).fetchone()[0]


def test_plain_csv_and_hosp_folder_given_directly(tmp_path: Path) -> None:
    root = write_hosp(tmp_path / "m", suffix=".csv")
    con = open_hosp(root / "hosp")
    assert con.execute("SELECT count(*) FROM labevents").fetchone()[0] == 4
    assert set(hosp_table_paths(root).values()) == {root / "hosp" / f"{t}.csv" for t in HOSP_TABLES}


def test_parquet_matches_csv(tmp_path: Path, hosp_root: Path) -> None:
    csv_con = open_hosp(hosp_root)
    pq_hosp = tmp_path / "pq" / "hosp"
    pq_hosp.mkdir(parents=True)
    for table in HOSP_TABLES:
        csv_con.execute(f"COPY (SELECT * FROM {table}) TO '{pq_hosp / table}.parquet'")
    pq_con = open_hosp(tmp_path / "pq")
    assert all(str(p).endswith(".parquet") for p in hosp_table_paths(tmp_path / "pq").values())
    for table in HOSP_TABLES:
        assert column_types(pq_con, table) == column_types(csv_con, table)
        order = ", ".join(f"{i + 1}" for i in range(len(HOSP_TABLES[table])))
        a = csv_con.execute(f"SELECT * FROM {table} ORDER BY {order}").df()
        b = pq_con.execute(f"SELECT * FROM {table} ORDER BY {order}").df()
        pd.testing.assert_frame_equal(a, b)


def test_parquet_types_are_cast_to_mimic_types(tmp_path: Path) -> None:
    """int64 ids / float64 ages in parquet are accepted and exposed with HOSP_TABLES types."""
    hosp = tmp_path / "hosp"
    hosp.mkdir()
    pd.DataFrame(
        {
            "subject_id": pd.Series([1, 2], dtype="int64"),
            "gender": ["F", "M"],
            "anchor_age": [50.0, 60.0],
            "anchor_year": pd.Series([2180, 2170], dtype="int64"),
            "dod": [None, None],  # an all-null column (arrow type null)
        }
    ).to_parquet(hosp / "patients.parquet")
    con = open_hosp(tmp_path, tables=["patients"])
    types = column_types(con, "patients")
    assert types == {
        "subject_id": "INTEGER",
        "gender": "VARCHAR",
        "anchor_age": "SMALLINT",
        "anchor_year": "SMALLINT",
        "dod": "DATE",
    }
    assert con.execute("SELECT sum(anchor_age) FROM patients").fetchone()[0] == 110


def test_parquet_folder_of_parts(tmp_path: Path) -> None:
    part_dir = tmp_path / "hosp" / "d_labitems.parquet"
    part_dir.mkdir(parents=True)
    pd.DataFrame({"itemid": [50912], "label": ["Creatinine"]}).to_parquet(part_dir / "a.parquet")
    pd.DataFrame({"itemid": [50971], "label": ["Potassium"]}).to_parquet(part_dir / "b.parquet")
    con = open_hosp(tmp_path, tables=["d_labitems"])
    rows = con.execute("SELECT itemid, label FROM d_labitems ORDER BY itemid").fetchall()
    assert rows == [(50912, "Creatinine"), (50971, "Potassium")]


def test_v3_extra_columns_are_tolerated(tmp_path: Path) -> None:
    # A v3.x-style file: an extra column in the middle, another at the end, upper-case header.
    admissions = (
        "SUBJECT_ID,HADM_ID,ADMIT_PROVIDER_ID,NEW_FLAG,ADMITTIME,DISCHTIME,ADMISSION_TYPE,"
        "EXTRA_NOTE\n"
        "10000001,20000001,P1,yes,2180-05-06 22:23:00,2180-05-08 17:15:00,URGENT,x\n"
    )
    root = write_hosp(tmp_path, with_table("admissions", admissions))
    con = open_hosp(root)
    types = column_types(con, "admissions")
    assert types["admittime"] == "TIMESTAMP" and types["hadm_id"] == "INTEGER"
    assert types["new_flag"] == "VARCHAR" and types["extra_note"] == "VARCHAR"
    row = con.execute("SELECT hadm_id, admission_type, new_flag FROM admissions").fetchone()
    assert row == (20000001, "URGENT", "yes")


def test_describe_source(hosp_root: Path) -> None:
    con = open_hosp(hosp_root)
    desc = describe_source(con)
    assert list(desc.columns) == ["table", "rows"]
    assert list(desc["table"]) == list(HOSP_TABLES)
    expected = {t: text.count("\n") - 1 for t, text in CSV.items()}
    expected["labevents"] = 4  # one comment spans two lines
    assert dict(zip(desc["table"], desc["rows"], strict=True)) == expected


def test_tables_subset(hosp_root: Path) -> None:
    con = open_hosp(hosp_root, tables=["patients", "admissions"])
    assert set(describe_source(con)["table"]) == {"patients", "admissions"}
    with pytest.raises(ValueError, match="unknown hosp table"):
        open_hosp(hosp_root, tables=["chartevents"])


# --------------------------------------------------------------------------- schema errors


def error_of(root: Path, **kwargs) -> SourceSchemaError:
    with pytest.raises(SourceSchemaError) as info:
        open_hosp(root, **kwargs)
    assert isinstance(info.value, ValueError)
    return info.value


def test_non_numeric_valuenum_names_file_column_type_and_value(tmp_path: Path) -> None:
    bad = CSV["labevents"].replace(",0.02,ng/mL", ",abc,ng/mL")
    err = error_of(write_hosp(tmp_path, with_table("labevents", bad)))
    assert err.file.endswith("labevents.csv.gz") and err.column == "valuenum"
    msg = str(err)
    assert "labevents.csv.gz" in msg and "'valuenum'" in msg and "DOUBLE" in msg
    assert "'abc'" in msg


def test_non_date_admittime(tmp_path: Path) -> None:
    bad = CSV["admissions"].replace("2180-06-26 18:27:00", "26/06/2180 6pm")
    err = error_of(write_hosp(tmp_path, with_table("admissions", bad)))
    msg = str(err)
    assert "admissions.csv.gz" in msg and "'admittime'" in msg and "TIMESTAMP" in msg
    assert "26/06/2180 6pm" in msg


def test_missing_required_column(tmp_path: Path) -> None:
    lines = CSV["diagnoses_icd"].splitlines()
    dropped = "\n".join(",".join(line.split(",")[:-1]) for line in lines) + "\n"
    err = error_of(write_hosp(tmp_path, with_table("diagnoses_icd", dropped)))
    msg = str(err)
    assert err.column == "icd_version"
    assert "diagnoses_icd.csv.gz" in msg and "SMALLINT" in msg and "no such column" in msg


def test_missing_file(tmp_path: Path) -> None:
    tables = {t: v for t, v in CSV.items() if t != "prescriptions"}
    err = error_of(write_hosp(tmp_path, tables))
    msg = str(err)
    assert "prescriptions.csv.gz" in msg and "prescriptions.parquet" in msg
    assert "no such file" in msg and "pharmacy_id" in msg  # names the columns it needs


def test_parquet_code_stored_as_number_is_refused(tmp_path: Path) -> None:
    hosp = tmp_path / "hosp"
    hosp.mkdir()
    pd.DataFrame(
        {"subject_id": [1], "hadm_id": [2], "seq_num": [1], "icd_code": [66], "icd_version": [9]}
    ).to_parquet(hosp / "diagnoses_icd.parquet")
    with pytest.raises(SourceSchemaError) as info:
        open_hosp(tmp_path, tables=["diagnoses_icd"])
    msg = str(info.value)
    assert "diagnoses_icd.parquet" in msg and "'icd_code'" in msg
    assert "VARCHAR" in msg and "int64" in msg


def test_parquet_missing_required_column(tmp_path: Path) -> None:
    hosp = tmp_path / "hosp"
    hosp.mkdir()
    pd.DataFrame({"itemid": [50912]}).to_parquet(hosp / "d_labitems.parquet")
    with pytest.raises(SourceSchemaError, match=r"d_labitems\.parquet: column 'label'"):
        open_hosp(tmp_path, tables=["d_labitems"])


def test_malformed_csv_row_is_a_schema_error(tmp_path: Path) -> None:
    bad = CSV["d_labitems"] + "50000,Too,many,fields,here\n"
    err = error_of(write_hosp(tmp_path, with_table("d_labitems", bad)))
    assert "d_labitems.csv.gz" in str(err)


def test_type_check_is_bounded_by_sample_rows(tmp_path: Path) -> None:
    # The bad value sits on the 4th data row: a 2-row sample misses it, the default catches it.
    bad = CSV["labevents"].replace(",8.9,mg/dL", ",n/a,mg/dL")
    root = write_hosp(tmp_path, with_table("labevents", bad))
    open_hosp(root, sample_rows=2)
    assert error_of(root).column == "valuenum"


def test_failed_open_registers_nothing(tmp_path: Path) -> None:
    bad = CSV["procedures_icd"].replace("2180-05-07", "someday")
    root = write_hosp(tmp_path, with_table("procedures_icd", bad))
    con = duckdb.connect()
    with pytest.raises(SourceSchemaError, match="chartdate"):
        open_hosp(root, con=con)
    assert con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone()[0] == 0


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(SourceSchemaError, match="MIMIC-IV directory"):
        open_hosp(tmp_path / "nowhere")


def test_required_columns_are_in_the_fixture() -> None:
    # Guards the fixture itself: every REQUIRED column appears in its header.
    for table, required in REQUIRED.items():
        header = CSV[table].splitlines()[0].split(",")
        assert set(required) <= set(header), table
