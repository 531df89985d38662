"""A MIMIC-IV-shaped hosp fixture with real drug-name shapes, for T6 / T7 / T8 and their L2
recompute (tests/data/test_drugnames.py; docs/real-data.md).

Two diabetes patients, every event covered by the dialogue. Drug names are real MIMIC-IV
spellings: qualifiers in parentheses, tall-man lettering, a trailing space, a double dash,
a double space, a strength in the name, and three spellings of metformin in one patient
(two in one admission). Three orders carry BASE diluent rows on their pharmacy_id ("NS",
"Bag", "D5W", "0.9% Sodium Chloride"; one BASE row listed before its MAIN row). The events
table is extracted from the MAIN rows only (one event per pharmacy order, as the events stage
makes it); the L2 recompute reads every raw row.

11  v0 hadm 1101  2150-01-01 08:00 .. 01-05 12:00  EW EMER.
        labs  01-01 09:00 glucose 250 H, HbA1c 9.0 H, potassium 5.9 H; 01-02 06:00 K 3.2 L
        rx    7001 MetFORMIN (Glucophage)                        01-01 10:00
              7002 Insulin (Regular) for Hyperkalemia (+ NS, Bag) 01-01 11:00
              7003 Potassium Chloride Replacement (Critical Care and Oncology)  [trailing space]
                   (+ 0.9% Sodium Chloride, listed first)        01-02 10:00
              7004 Metformin                                     01-03 08:00
              7005 HYDROmorphone (Dilaudid)                      01-03 09:00
              7006 Heparin (Porcine) (+ D5W)                     01-03 10:00
              7007 OxyCODONE--Acetaminophen (5mg-325mg)          01-03 11:00
              7008 Sodium Chloride 0.9%  Flush                   01-03 12:00
        dx    E119, E875
    v1 hadm 1102  2150-03-01 08:00 .. 03-04 12:00  ELECTIVE
        labs  03-01 09:00 glucose 180 H, HbA1c 8.1 H, potassium 4.2
        rx    7009 metFORMIN XR (Glucophage XR)                  03-01 10:00
        dx    E119, I10
12  v0 hadm 1201  2150-02-01 08:00 .. 02-03 12:00  URGENT
        labs  02-01 09:00 glucose 240 H, HbA1c 7.0 H, potassium 4.0, BUN 40 H
        rx    7101 glipiZIDE                                     02-01 10:00
              7102 OxyCODONE (Immediate Release)  [trailing space] 02-01 11:00
              7103 Lisinopril 10 mg Tab                          02-01 12:00
              7104 Furosemide 40 mg (its strength = the BUN)     02-01 13:00
        dx    E119
    v1 hadm 1202  2150-05-01 08:00 .. 05-03 12:00  ELECTIVE
        labs  05-01 09:00 glucose 200 H, HbA1c 6.6 H, potassium 4.4, BUN 30 H
        dx    E119, N183
"""

from __future__ import annotations

import duckdb
import pandas as pd

from clinlib.data.events import extract_events
from clinlib.data.schema import HOSP_TABLES
from tests.hosp_fixture import _complete
from tests.task_fixture import _sentence

SUBJECTS = (11, 12)
COHORT = [(11, "diabetes", "low"), (12, "diabetes", "high")]

ADMISSIONS = [
    (11, 1101, "2150-01-01 08:00", "2150-01-05 12:00", "EW EMER."),
    (11, 1102, "2150-03-01 08:00", "2150-03-04 12:00", "ELECTIVE"),
    (12, 1201, "2150-02-01 08:00", "2150-02-03 12:00", "URGENT"),
    (12, 1202, "2150-05-01 08:00", "2150-05-03 12:00", "ELECTIVE"),
]
ITEM = {
    "glucose": (50931, "mg/dL"),
    "hba1c": (50852, "%"),
    "potassium": (50971, "mEq/L"),
    "bun": (51006, "mg/dL"),
}
# (labevent_id, subject, hadm, charttime, lab, value, flag)
LABS = [
    (1, 11, 1101, "2150-01-01 09:00", "glucose", 250.0, "abnormal"),
    (2, 11, 1101, "2150-01-01 09:00", "hba1c", 9.0, "abnormal"),
    (3, 11, 1101, "2150-01-01 09:00", "potassium", 5.9, "abnormal"),
    (4, 11, 1101, "2150-01-02 06:00", "potassium", 3.2, "abnormal"),
    (5, 11, 1102, "2150-03-01 09:00", "glucose", 180.0, "abnormal"),
    (6, 11, 1102, "2150-03-01 09:00", "hba1c", 8.1, "abnormal"),
    (7, 11, 1102, "2150-03-01 09:00", "potassium", 4.2, None),
    (11, 12, 1201, "2150-02-01 09:00", "glucose", 240.0, "abnormal"),
    (12, 12, 1201, "2150-02-01 09:00", "hba1c", 7.0, "abnormal"),
    (13, 12, 1201, "2150-02-01 09:00", "potassium", 4.0, None),
    (14, 12, 1202, "2150-05-01 09:00", "glucose", 200.0, "abnormal"),
    (15, 12, 1202, "2150-05-01 09:00", "hba1c", 6.6, "abnormal"),
    (16, 12, 1202, "2150-05-01 09:00", "potassium", 4.4, None),
    (17, 12, 1201, "2150-02-01 09:00", "bun", 40.0, "abnormal"),
    (18, 12, 1202, "2150-05-01 09:00", "bun", 30.0, "abnormal"),
]
# (pharmacy_id, subject, hadm, starttime, drug_type, drug, dose, unit, route), in table order
PRESCRIPTIONS = [
    (7001, 11, 1101, "2150-01-01 10:00", "MAIN", "MetFORMIN (Glucophage)", "500", "mg", "PO"),
    (7002, 11, 1101, "2150-01-01 11:00", "MAIN", "Insulin (Regular) for Hyperkalemia", "10",
     "UNIT", "IV"),
    (7002, 11, 1101, "2150-01-01 11:00", "BASE", "NS", "100", "mL", "IV"),
    (7002, 11, 1101, "2150-01-01 11:00", "BASE", "Bag", "1", "BAG", "IV"),
    (7003, 11, 1101, "2150-01-02 10:00", "BASE", "0.9% Sodium Chloride", "100", "mL", "IV"),
    (7003, 11, 1101, "2150-01-02 10:00", "MAIN",
     "Potassium Chloride Replacement (Critical Care and Oncology) ", "20", "mEq", "IV"),
    (7004, 11, 1101, "2150-01-03 08:00", "MAIN", "Metformin", "500", "mg", "PO"),
    (7005, 11, 1101, "2150-01-03 09:00", "MAIN", "HYDROmorphone (Dilaudid)", "0.5", "mg", "IV"),
    (7006, 11, 1101, "2150-01-03 10:00", "MAIN", "Heparin (Porcine)", "5000", "UNIT", "SC"),
    (7006, 11, 1101, "2150-01-03 10:00", "BASE", "D5W", "250", "mL", "IV"),
    (7007, 11, 1101, "2150-01-03 11:00", "MAIN", "OxyCODONE--Acetaminophen (5mg-325mg)", "1",
     "TAB", "PO"),
    (7008, 11, 1101, "2150-01-03 12:00", "MAIN", "Sodium Chloride 0.9%  Flush", "3", "mL", "IV"),
    (7009, 11, 1102, "2150-03-01 10:00", "MAIN", "metFORMIN XR (Glucophage XR)", "1000", "mg",
     "PO"),
    (7101, 12, 1201, "2150-02-01 10:00", "MAIN", "glipiZIDE", "5", "mg", "PO"),
    (7102, 12, 1201, "2150-02-01 11:00", "MAIN", "OxyCODONE (Immediate Release) ", "5", "mg",
     "PO"),
    (7103, 12, 1201, "2150-02-01 12:00", "MAIN", "Lisinopril 10 mg Tab", "10", "mg", "PO"),
    (7104, 12, 1201, "2150-02-01 13:00", "MAIN", "Furosemide 40 mg", "40", "mg", "PO"),
]  # fmt: skip
# (subject, hadm, seq, ICD-10-CM code)
DIAGNOSES = [
    (11, 1101, 1, "E119"), (11, 1101, 2, "E875"), (11, 1102, 1, "E119"), (11, 1102, 2, "I10"),
    (12, 1201, 1, "E119"), (12, 1202, 1, "E119"), (12, 1202, 2, "N183"),
]  # fmt: skip
DX_TITLES = {
    "E119": "Type 2 diabetes mellitus without complications",
    "E875": "Hyperkalemia",
    "I10": "Essential (primary) hypertension",
    "N183": "Chronic kidney disease, stage 3 (moderate)",
}


def _frame(table: str, columns: str, rows: list[tuple]) -> pd.DataFrame:
    return _complete(table, pd.DataFrame(rows, columns=columns.split()))


def tables() -> dict[str, pd.DataFrame]:
    """The raw hosp tables (every MIMIC column; unused tables empty)."""
    out = {name: _complete(name, pd.DataFrame()) for name in HOSP_TABLES}
    out["patients"] = _frame(
        "patients",
        "subject_id gender anchor_age anchor_year",
        [(s, "F", 60, 2150) for s in SUBJECTS],
    )
    out["admissions"] = _frame(
        "admissions",
        "subject_id hadm_id admittime dischtime admission_type discharge_location",
        [(*adm, "HOME") for adm in ADMISSIONS],
    )
    out["labevents"] = _frame(
        "labevents",
        "labevent_id subject_id hadm_id specimen_id itemid charttime value valuenum valueuom flag",
        [
            (i, s, h, i, ITEM[lab][0], t, f"{v:g}", v, ITEM[lab][1], f)
            for i, s, h, t, lab, v, f in LABS
        ],
    )
    out["prescriptions"] = _frame(
        "prescriptions",
        "pharmacy_id subject_id hadm_id starttime drug_type drug dose_val_rx dose_unit_rx route",
        PRESCRIPTIONS,
    )
    out["diagnoses_icd"] = _frame(
        "diagnoses_icd",
        "subject_id hadm_id seq_num icd_code icd_version",
        [(*d, 10) for d in DIAGNOSES],
    )
    out["d_icd_diagnoses"] = _frame(
        "d_icd_diagnoses",
        "icd_code icd_version long_title",
        [(c, 10, t) for c, t in DX_TITLES.items()],
    )
    return out


def connect(only_main: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one table per hosp table (``only_main``: prescriptions without
    the BASE rows)."""
    con = duckdb.connect()
    for name, df in tables().items():
        if name == "prescriptions" and only_main:
            df = df[df["drug_type"] == "MAIN"]
        con.register(f"_{name}", df)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
        con.unregister(f"_{name}")
    return con


def artifacts() -> dict[str, pd.DataFrame]:
    """events (from the MAIN rows), coverage (everything covered), dialogues (one clinician
    turn per event, stating it the way tests/task_fixture.py does), cohort and summary."""
    events = extract_events(connect(only_main=True), list(SUBJECTS))
    turns, cov = [], []
    for sid, pev in events.groupby("subject_id", sort=True):
        t = 0
        for v, vev in pev.groupby("visit_idx", sort=True):
            date = pd.Timestamp(vev["time"].min()).strftime("%Y-%m-%d")
            for e in vev.to_dict("records"):
                text = _sentence(e)
                turns.append(dict(subject_id=sid, visit_idx=v, turn_idx=t, speaker="clinician",
                                  text=text, text_tagged=f"{text} [{e['event_id']}]",
                                  event_ids=[e["event_id"]], visit_date=date))  # fmt: skip
                cov.append(dict(subject_id=sid, event_id=e["event_id"], kind=e["kind"],
                                visit_idx=v, status="covered", reason="", turn_idx=t))  # fmt: skip
                t += 1
    cohort = pd.DataFrame(COHORT, columns=["subject_id", "disease", "tertile"])
    return {
        "events": events,
        "coverage": pd.DataFrame(cov).astype({"turn_idx": "Int64"}),
        "dialogues": pd.DataFrame(turns),
        "cohort": cohort,
        "summary": pd.DataFrame({"subject_id": list(SUBJECTS), "kept": [True, True]}),
    }
