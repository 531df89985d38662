"""Event windows and cohort rules at the value just inside and just outside, worked out by hand,
through the DuckDB path and, independently, the pandas implementation.

Event windows (clinlib.data.events): a lab or prescription without hadm_id joins the admission
whose window [admittime - 1 day, dischtime] holds it — both ends inclusive. Patient 1 of
tests/hosp_fixture.py has admissions 101 (2150-01-01 08:00 .. 2150-01-04 12:00) and 102
(2150-01-31 09:00 .. 2150-02-02 10:00); the rows below sit on and one second past each end.

Cohort rules (clinlib.data.cohort): >= 1 index code; >= 2 index-code rows in one disease;
last admittime - first admittime > 7 days; >= 5 panel labs with a value; >= 2 medication
orders. Six patients, each on one side of one rule.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from clinlib.data.cohort import select_cohort
from clinlib.data.cohort_pandas import extract_events_pandas, select_cohort_pandas
from clinlib.data.events import extract_events
from clinlib.data.schema import HOSP_TABLES
from tests import hosp_fixture


def _con(tables: dict[str, pd.DataFrame]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for name, df in tables.items():
        con.register(name, df)
    return con


def _csv_dir(tables: dict[str, pd.DataFrame], root: Path) -> Path:
    hosp = root / "hosp"
    hosp.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        out = df.copy()
        for col, t in HOSP_TABLES[name].items():
            if t == "TIMESTAMP":
                out[col] = out[col].dt.strftime("%Y-%m-%d %H:%M:%S")
            elif t == "DATE":
                out[col] = out[col].dt.strftime("%Y-%m-%d")
        with gzip.open(hosp / f"{name}.csv.gz", "wt", newline="") as fh:
            out.to_csv(fh, index=False)
    return hosp


def _fixture_tables() -> dict[str, pd.DataFrame]:
    return {k: v for k, v in hosp_fixture.build().items() if not k.startswith("_")}


def _append(tables: dict, name: str, rows: list[dict]) -> None:
    extra = hosp_fixture._complete(name, pd.DataFrame(rows))
    tables[name] = pd.concat([tables[name], extra], ignore_index=True)


def _lab(lid: int, itemid: int, t: str, v: float, uom: str) -> dict:
    return dict(labevent_id=lid, subject_id=1, hadm_id=None, specimen_id=lid, itemid=itemid,
                charttime=pd.Timestamp(t), value=str(v), valuenum=v, valueuom=uom)  # fmt: skip


def _rx(pid: int, drug: str, t: str) -> dict:
    return dict(subject_id=1, hadm_id=None, pharmacy_id=pid, starttime=pd.Timestamp(t),
                stoptime=pd.Timestamp(t) + pd.Timedelta(days=1), drug=drug, dose_val_rx="1",
                dose_unit_rx="mg", route="PO", drug_type="MAIN")  # fmt: skip


# (event id, time, expected hadm_id or None = no event)
WINDOW_LABS = [
    (9101, 50931, "2150-01-04 12:00:00", 101),  # glucose at 101's dischtime: inside
    (9102, 50971, "2150-01-04 12:00:01", None),  # potassium one second later: no visit
    (9103, 50983, "2150-01-30 09:00:00", 102),  # sodium at 102's admittime - 1 day: inside
    (9104, 51006, "2150-01-30 08:59:59", None),  # BUN one second earlier: no visit
]
WINDOW_RX = [
    (9201, "Aspirin", "2150-01-04 12:00:00", 101),
    (9202, "Heparin", "2150-01-04 12:00:01", None),
    (9203, "Warfarin", "2150-01-30 09:00:00", 102),
    (9204, "Lisinopril", "2150-01-30 08:59:59", None),
]
UNITS = {50931: "mg/dL", 50971: "mEq/L", 50983: "mEq/L", 51006: "mg/dL"}
# Physiologically plausible values, so the cohort stage's plausibility screen
# (clinlib.data.plausibility) keeps every row and only the window decides.
VALUES = {50931: 100.0, 50971: 4.0, 50983: 140.0, 51006: 15.0}


@pytest.fixture(scope="module")
def window_tables() -> dict[str, pd.DataFrame]:
    tables = _fixture_tables()
    _append(tables, "labevents", [_lab(i, item, t, VALUES[item], UNITS[item])
                                  for i, item, t, _ in WINDOW_LABS])  # fmt: skip
    _append(tables, "prescriptions", [_rx(p, d, t) for p, d, t, _ in WINDOW_RX])
    return tables


def _check_windows(events: pd.DataFrame) -> None:
    by_id = events.set_index("event_id")
    for lid, _item, t, hadm in WINDOW_LABS:
        eid = f"LAB-{lid}"
        if hadm is None:
            assert eid not in by_id.index, (eid, t)
        else:
            assert by_id.loc[eid, "hadm_id"] == hadm, (eid, t)
            assert by_id.loc[eid, "visit_idx"] == (0 if hadm == 101 else 1)
    for pid, _drug, t, hadm in WINDOW_RX:
        eid = f"RX-{pid}"
        if hadm is None:
            assert eid not in by_id.index, (eid, t)
        else:
            assert by_id.loc[eid, "hadm_id"] == hadm, (eid, t)


def test_window_ends_are_inclusive_in_sql(window_tables):
    _check_windows(extract_events(_con(window_tables), [1]))


def test_window_ends_are_inclusive_in_pandas(window_tables, tmp_path):
    hosp = _csv_dir(window_tables, tmp_path)
    pand = extract_events_pandas(hosp, [1])
    _check_windows(pand)
    duck = extract_events(_con(window_tables), [1])
    pd.testing.assert_frame_equal(duck, pand, check_dtype=False)


def test_a_lab_with_hadm_id_is_never_moved_by_the_window(window_tables):
    # the fixture's direct rows keep their own admission whatever the window would say
    tables = {k: v.copy() for k, v in window_tables.items()}
    _append(tables, "labevents", [{**_lab(9105, 51222, "2150-06-01 00:00", 10.0, "g/dL"),
                                   "hadm_id": 101}])  # fmt: skip
    ev = extract_events(_con(tables), [1]).set_index("event_id")
    assert ev.loc["LAB-9105", "hadm_id"] == 101


# --------------------------------------------------------------------------- cohort rules

GAP = pd.Timedelta(days=7)
JUST_OVER = GAP + pd.Timedelta(seconds=1)
T0 = pd.Timestamp("2150-01-01 00:00")


def _patient(sid: int, *, codes=2, gap=JUST_OVER, labs=5, meds=2,
             icd="25000") -> dict[str, list[dict]]:  # fmt: skip
    """A diabetes patient exactly at every rule's edge on its passing side (2 index codes,
    admissions 7 days + 1 s apart, 5 panel labs, 2 orders), with one knob moved."""
    h1, h2 = sid * 10 + 1, sid * 10 + 2
    adm = [dict(subject_id=sid, hadm_id=h, admittime=t, dischtime=t + pd.Timedelta(days=1),
                admission_type="EW EMER.", discharge_location="HOME")
           for h, t in ((h1, T0), (h2, T0 + gap))]  # fmt: skip
    dx = [dict(subject_id=sid, hadm_id=(h1, h2)[i % 2], seq_num=1, icd_code=icd, icd_version=9)
          for i in range(codes)]  # fmt: skip
    if codes < 1:  # a non-index code keeps the patient's diagnosis table non-empty
        dx = [dict(subject_id=sid, hadm_id=h1, seq_num=1, icd_code="J189", icd_version=10)]
    lab = [dict(labevent_id=sid * 100 + i, subject_id=sid, hadm_id=h1, specimen_id=sid * 100 + i,
                itemid=50983, charttime=T0 + pd.Timedelta(hours=i + 1), value="140",
                valuenum=140.0, valueuom="mEq/L") for i in range(labs)]  # fmt: skip
    rx = [dict(subject_id=sid, hadm_id=h1, pharmacy_id=sid * 100 + i, drug="Metformin",
               drug_type="MAIN", starttime=T0 + pd.Timedelta(hours=1),
               stoptime=T0 + pd.Timedelta(days=1), dose_val_rx="500", dose_unit_rx="mg",
               route="PO") for i in range(meds)]  # fmt: skip
    return {"admissions": adm, "diagnoses_icd": dx, "labevents": lab, "prescriptions": rx}


COHORT_PATIENTS = {
    1: {},  # passes every rule at its edge
    2: {"codes": 0},  # no index code -> out at step 1
    3: {"codes": 1},  # one index-code row -> out at step 2
    4: {"gap": GAP},  # admissions exactly 7 days apart -> out at step 3
    5: {"labs": 4},  # 4 panel labs -> out at step 4
    6: {"meds": 1},  # 1 order -> out at step 5
}
# every patient passes the steps before its own: 6, 5, 4, 3, 2, 1
EXPECTED_FUNNEL = [6, 5, 4, 3, 2, 1]


@pytest.fixture(scope="module")
def cohort_tables() -> dict[str, pd.DataFrame]:
    rows: dict[str, list[dict]] = {"admissions": [], "diagnoses_icd": [], "labevents": [],
                                   "prescriptions": []}  # fmt: skip
    for sid, knobs in COHORT_PATIENTS.items():
        for table, r in _patient(sid, **knobs).items():
            rows[table] += r
    base = _fixture_tables()
    tables = {name: hosp_fixture._complete(name, pd.DataFrame(r)) for name, r in rows.items()}
    patients = [dict(subject_id=s, gender="F", anchor_age=60, anchor_year=2150)
                for s in COHORT_PATIENTS]  # fmt: skip
    tables["patients"] = hosp_fixture._complete("patients", pd.DataFrame(patients))
    for name in ("d_labitems", "d_icd_diagnoses", "d_icd_procedures"):
        tables[name] = base[name]
    tables["procedures_icd"] = base["procedures_icd"].iloc[0:0]
    return tables


def test_cohort_rules_at_their_edges_in_sql(cohort_tables):
    result = select_cohort(_con(cohort_tables), per_disease=3, seed=0)
    assert result.attrition["n_patients"].tolist()[:6] == EXPECTED_FUNNEL
    assert result.eligible["subject_id"].tolist() == [1]


def test_cohort_rules_at_their_edges_in_pandas(cohort_tables, tmp_path):
    result = select_cohort_pandas(_csv_dir(cohort_tables, tmp_path), per_disease=3, seed=0)
    assert result.attrition["n_patients"].tolist()[:6] == EXPECTED_FUNNEL
    assert result.eligible["subject_id"].tolist() == [1]
