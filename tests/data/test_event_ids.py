"""Event ids recomputed in pure Python (issue 33 §3: the substitute for mutation testing).

The ids are derived in SQL inside Python strings (clinlib.data.events; the MEDS content ids of
clinlib.data.sources.meds.families), where mutmut cannot mutate. These tests pin them against
an independent implementation instead, on a hand-made handful of rows:

- MEDS content id (families module docstring, "Content ids"): the first 60 bits (15 hex
  digits) of the md5 of the row's :data:`CONTENT_COLUMNS` as a JSON list of texts (NULL as
  ``null``), with ``#k`` appended for the k-th exact copy (k >= 2). Recomputed below with
  ``hashlib`` and ``json``; a changed column order, a dropped field, another hash width or
  another copy suffix gives another number.
- MIMIC-shaped natural keys (events module docstring): ``ADM-<hadm_id>``, ``DIS-<hadm_id>``,
  ``LAB-<labevent_id>``, ``DX-<hadm_id>-<seq_num>``, ``PX-<hadm_id>-<seq_num>``, built here
  from the raw rows with f-strings.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clinlib.data.events import extract_events
from clinlib.data.sources.meds import open_meds
from clinlib.data.sources.meds.families import CONTENT_COLUMNS
from tests import hosp_fixture

T = pd.Timestamp

# The content columns in the order the docstring gives them, spelt out here (not imported), so
# a reordered or shortened CONTENT_COLUMNS fails below.
ORDER = ("subject_id", "time", "code", "numeric_value", "text_value", "hadm_id", "unit",
         "end_time", "ref_low", "ref_high", "flag", "route")  # fmt: skip
TYPES = {"subject_id": pa.int64(), "time": pa.timestamp("us"), "code": pa.string(),
         "numeric_value": pa.float32(), "text_value": pa.string(), "hadm_id": pa.int64(),
         "unit": pa.string(), "end_time": pa.timestamp("us"), "ref_low": pa.float64(),
         "ref_high": pa.float64(), "flag": pa.string(), "route": pa.string()}  # fmt: skip

ADMIT = dict(subject_id=5, time=T("2200-01-01 08:00"),
             code="HOSPITAL_ADMISSION//URGENT//EMERGENCY ROOM")  # fmt: skip
LAB = dict(subject_id=5, time=T("2200-01-01 09:00"), code="LAB//50912//mg/dL",
           numeric_value=2.5, text_value="2.5", unit="mg/dL", ref_low=0.5, ref_high=1.2,
           flag="abnormal")  # fmt: skip
ORDER_ROW = dict(subject_id=5, time=T("2200-01-01 10:00"), code="MEDICATION//START//Aspirin",
                 numeric_value=81.0, text_value="81", unit="mg", route="PO",
                 end_time=T("2200-01-02 10:00"))  # fmt: skip
ROWS = [
    dict(subject_id=5, time=None, code="GENDER//M"),
    dict(subject_id=5, time=T("2150-01-01"), code="MEDS_BIRTH"),
    ADMIT,
    LAB,
    ORDER_ROW,
    dict(subject_id=5, time=T("2200-01-03 08:00"), code="DIAGNOSIS//ICD//10//I10"),
    dict(subject_id=5, time=T("2200-01-03 08:00"), code="HOSPITAL_DISCHARGE//HOME"),
]


def _text(value) -> str:
    """A value as DuckDB's CAST(... AS VARCHAR) writes it, for the types used here."""
    if isinstance(value, pd.Timestamp):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)  # int 5 -> '5', float 2.5 -> '2.5', 81.0 -> '81.0', text as is


def content_id(row: dict, k: int = 1) -> int:
    """The docstring's rule, in Python: md5 of the JSON list of texts, first 15 hex digits."""
    key = json.dumps([None if row.get(c) is None else _text(row[c]) for c in ORDER],
                     separators=(",", ":"))  # fmt: skip
    if k > 1:
        key += f"#{k}"
    return int(hashlib.md5(key.encode()).hexdigest()[:15], 16)


def write_meds(root: Path, rows: list[dict]) -> Path:
    """``rows`` as a one-shard MEDS dataset (sorted by subject, then time: static rows first)."""
    rows = sorted(rows, key=lambda r: (r["subject_id"], r["time"] is not None, r["time"] or T(0)))
    table = pa.table({c: pa.array([r.get(c) for r in rows], t) for c, t in TYPES.items()})
    (root / "data").mkdir(parents=True)
    (root / "metadata").mkdir()
    pq.write_table(table, root / "data" / "0.parquet")
    codes = pa.table({"code": ["DIAGNOSIS//ICD//10//I10"], "description": ["Hypertension"]})
    pq.write_table(codes, root / "metadata" / "codes.parquet")
    return root


def _ids(con: duckdb.DuckDBPyConnection, sql: str) -> list[int]:
    return sorted(int(r[0]) for r in con.execute(sql).fetchall())


def test_the_content_columns_are_the_documented_ones():
    assert CONTENT_COLUMNS == ORDER


def test_meds_content_ids_match_a_python_md5(tmp_path: Path) -> None:
    con = open_meds(write_meds(tmp_path / "m", ROWS))
    lab, order, adm = content_id(LAB), content_id(ORDER_ROW), content_id(ADMIT)
    assert _ids(con, "SELECT labevent_id FROM labevents") == [lab]
    assert _ids(con, "SELECT pharmacy_id FROM prescriptions") == [order]
    assert _ids(con, "SELECT hadm_id FROM admissions") == [adm]
    assert all(0 <= i < 2**60 for i in (lab, order, adm))
    # the event table's ids are built from them
    ev = extract_events(con, [5])
    assert sorted(ev["event_id"]) == sorted(
        [f"ADM-{adm}", f"DIS-{adm}", f"LAB-{lab}", f"RX-{order}", f"DX-{adm}-1"]
    )


def test_every_content_field_and_a_given_hadm_id_enter_the_id(tmp_path: Path) -> None:
    """A second lab that differs from LAB in one field only gets another id, each the Python
    one; a lab with a hadm_id (a trusted extra column) hashes it too."""
    variants = [
        dict(LAB, unit="mmol/L"),
        dict(LAB, ref_high=1.3),
        dict(LAB, flag=None),
        dict(LAB, text_value="2.50"),
        dict(LAB, time=T("2200-01-01 09:01")),
    ]
    con = open_meds(write_meds(tmp_path / "m", ROWS + variants))
    got = _ids(con, "SELECT labevent_id FROM labevents")
    want = sorted(content_id(r) for r in [LAB, *variants])
    assert got == want and len(set(want)) == 6
    hadm = [dict(r, hadm_id=777) for r in ROWS if r.get("time") is not None]
    con = open_meds(write_meds(tmp_path / "h", [ROWS[0], *hadm]))
    assert _ids(con, "SELECT labevent_id FROM labevents") == [content_id(dict(LAB, hadm_id=777))]
    assert _ids(con, "SELECT hadm_id FROM admissions") == [777]  # given, not derived


def test_exact_copies_get_the_copy_suffix(tmp_path: Path) -> None:
    con = open_meds(write_meds(tmp_path / "m", ROWS + [LAB, LAB]))
    got = _ids(con, "SELECT labevent_id FROM labevents")
    assert got == sorted([content_id(LAB), content_id(LAB, 2), content_id(LAB, 3)])


# --------------------------------------------------------------------------- MIMIC-shaped


@pytest.fixture(scope="module")
def fixture_events():
    tables = {k: v for k, v in hosp_fixture.build().items() if not k.startswith("_")}
    con = duckdb.connect()
    for name, df in tables.items():
        con.register(name, df)
    return tables, extract_events(con, [1])


def test_natural_key_ids_match_the_raw_rows(fixture_events) -> None:
    """ADM / DIS / DX / PX ids of subject 1 rebuilt from the raw tables with f-strings."""
    tables, ev = fixture_events
    adm = tables["admissions"]
    hadms = [int(h) for h in adm.loc[adm["subject_id"] == 1, "hadm_id"]]
    want = {f"ADM-{h}" for h in hadms} | {f"DIS-{h}" for h in hadms}
    for table, prefix in (("diagnoses_icd", "DX"), ("procedures_icd", "PX")):
        t = tables[table]
        t = t[(t["subject_id"] == 1) & t["hadm_id"].isin(hadms)]
        want |= {
            f"{prefix}-{int(h)}-{int(s)}" for h, s in zip(t["hadm_id"], t["seq_num"], strict=True)
        }
    got = set(ev.loc[ev["kind"].isin(["admission", "discharge", "diagnosis", "procedure"]),
                     "event_id"])  # fmt: skip
    assert any(i.startswith("DX-") for i in want) and any(i.startswith("PX-") for i in want)
    assert got == want


def test_lab_ids_are_the_kept_rows_labevent_ids(fixture_events) -> None:
    tables, ev = fixture_events
    labs = ev[ev["kind"] == "lab"]
    raw = tables["labevents"].set_index("labevent_id")
    assert len(labs) > 0
    for eid, time, code in zip(labs["event_id"], labs["time"], labs["code"], strict=True):
        assert eid.startswith("LAB-")
        row = raw.loc[int(eid[4:])]  # the id's number is the source row's labevent_id
        assert pd.Timestamp(row["charttime"]) == time and str(row["itemid"]) == code
