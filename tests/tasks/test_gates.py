"""Validation gates L0–L4, the independent L2 recomputation and the L5 audit sheet's evidence
(paper Appendix A; L5 sampling and scoring: tests/tasks/test_audit.py).

The raw data is tests/hosp_fixture.py plus a few rows for patient 1 (``EXTRA`` below). After
the kit's documented extraction rules patient 1 has (worked out by hand):

  visits   101 = visit 0, 2150-01-01 08:00 .. 01-04 12:00, EW EMER. (an "er" encounter)
           102 = visit 1, 2150-01-31 09:00 .. 02-02 10:00, ELECTIVE
  LAB-1001 creatinine 1.9 mg/dL  2150-01-02 14:00  abnormal (the 06:00 1.1 of that day is
           dropped: abnormal first), ref 0.5-1.2
  LAB-1003 LDL 150 (measured itemid wins over calculated)     2150-01-03
  LAB-9001 glucose 200 abnormal   2150-01-01 10:00  (added)
  LAB-1005 glucose 180            2150-01-31 07:00  (no hadm_id; attached to 102 by the
           1-day window; value '___' -> "180")
  LAB-9002 creatinine 2.3 abnormal 2150-02-01 06:00 (added; 10:00 2.0 normal dropped)
  LAB-9004 potassium 4.0           2150-02-01 08:00 (added; "missed" by the dialogue)
  RX-5001  MetFORMIN (Glucophage)  start 2150-01-02 09:00 (101); RX-5002 Insulin (102)
  DX       101: 25000, 4019 (ICD-9); 102: 25000, 25040 (ICD-9), N183 (ICD-10, added)
Patient 7: I129 x2 + I10 (2 distinct codes).
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from clinlib.core.config import build_dir
from clinlib.data.events import extract_events
from clinlib.data.schema import HOSP_TABLES
from clinlib.data.sources.mimic import open_hosp
from clinlib.tasks import audit, gates, recompute
from clinlib.tasks.answers import ANSWER_FORMATS
from clinlib.tasks.base import ABSTAIN, QUESTION_COLUMNS
from tests import hosp_fixture

FMT = ANSWER_FORMATS


def _lab(lid, sid, hadm, itemid, t, v, uom, flag=None, lo=None, hi=None):
    return dict(
        labevent_id=lid,
        subject_id=sid,
        hadm_id=hadm,
        specimen_id=lid * 10,
        itemid=itemid,
        charttime=pd.Timestamp(t),
        value=str(v),
        valuenum=v,
        valueuom=uom,
        ref_range_lower=lo,
        ref_range_upper=hi,
        flag=flag,
    )


EXTRA_LABS = [
    _lab(9001, 1, 101, 50931, "2150-01-01 10:00", 200.0, "mg/dL", "abnormal", 70, 100),
    _lab(9002, 1, 102, 50912, "2150-02-01 06:00", 2.3, "mg/dL", "abnormal", 0.5, 1.2),
    _lab(9003, 1, 102, 50912, "2150-02-01 10:00", 2.0, "mg/dL", None, 0.5, 1.2),
    _lab(9004, 1, 102, 50971, "2150-02-01 08:00", 4.0, "mEq/L", None, 3.3, 5.1),
]
EXTRA_DX = [dict(subject_id=1, hadm_id=102, seq_num=3, icd_code="N183", icd_version=10)]
MISSED = {"LAB-9004"}


def _write(tables: dict[str, pd.DataFrame], root: Path) -> Path:
    hosp = root / "hosp"
    hosp.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        out = df.copy()
        for col, t in HOSP_TABLES[name].items():
            if t == "TIMESTAMP":
                out[col] = pd.to_datetime(out[col]).dt.strftime("%Y-%m-%d %H:%M:%S")
            elif t == "DATE":
                out[col] = pd.to_datetime(out[col]).dt.strftime("%Y-%m-%d")
        with gzip.open(hosp / f"{name}.csv.gz", "wt", newline="") as fh:
            out.to_csv(fh, index=False)
    return root


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tables = {k: v for k, v in hosp_fixture.build().items() if not k.startswith("_")}
    labs = hosp_fixture._complete("labevents", pd.DataFrame(EXTRA_LABS))
    tables["labevents"] = pd.concat([tables["labevents"], labs], ignore_index=True)
    dx = hosp_fixture._complete("diagnoses_icd", pd.DataFrame(EXTRA_DX))
    tables["diagnoses_icd"] = pd.concat([tables["diagnoses_icd"], dx], ignore_index=True)
    root = _write(tables, tmp_path_factory.mktemp("raw"))
    # read through the real MIMIC loader once, then keep the tables in memory (every
    # run_gates call re-queries them; re-parsing the CSVs each time only costs time)
    views = open_hosp(root)
    con = duckdb.connect()
    for name in HOSP_TABLES:
        df = views.execute(f"SELECT * FROM {name}").df()
        con.register(f"_{name}", df)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
    events = extract_events(con, [1, 7, 8])
    coverage = pd.DataFrame(
        {
            "subject_id": events["subject_id"],
            "event_id": events["event_id"],
            "kind": events["kind"],
            "status": ["missed" if e in MISSED else "covered" for e in events["event_id"]],
        }
    )
    return {"con": con, "events": events, "coverage": coverage}


def _q(qid, task, subtype, sids, question, gold, anchors, meta, **kw) -> dict:
    row = {
        "qid": f"{task}-{qid}",
        "task": task,
        "subtype": subtype,
        "subject_ids": list(sids),
        "question": question,
        "gold": gold,
        "options": kw.get("options", []),
        "anchor_event_ids": list(anchors),
        "evidence_turns": [f"{sids[0]}:1"],
        "disease": kw.get("disease", "diabetes"),
        "tertile": "low",
        "template_id": 0,
        "injection": kw.get("injection", ""),
        "meta": json.dumps(meta),
    }
    return row


T3_TEXT = "Physician noted: Creatinine of 1.9 mg/dL is consistent with Diabetes mellitus."
T5_TEXT = "Physician noted: the patient has never been diagnosed with hypertension."
OPTS = ["Metformin", "Lisinopril", "Atorvastatin", "Warfarin"]
OPTIONS_BLOCK = "\nOptions:\n" + "\n".join(f"{'ABCD'[i]}. {o}" for i, o in enumerate(OPTS)) + "\n"


def good_rows() -> list[dict]:
    """One hand-checked question per task (T9 twice), golds worked out in the docstring."""
    return [
        _q(
            "t1",
            "T1",
            "abnormal",
            [1],
            "What was the patient's Creatinine on 2150-01-02? " + FMT["T1"],
            "1.9 mg/dL",
            ["LAB-1001"],
            {"subject_id": 1, "lab": "creatinine", "date": "2150-01-02"},
        ),
        # first = visit 101's earliest KEPT value 1.9 (not the dropped 1.1); r = 0.4/1.9 = 0.21
        _q(
            "t2",
            "T2",
            "2_visits",
            [1],
            "Across the encounters of 2150-01-01 and 2150-01-31, how did the patient's "
            "Creatinine change (increased, decreased or stable)? " + FMT["T2"],
            "increased;moderate",
            ["LAB-1001", "LAB-9002"],
            {"subject_id": 1, "lab": "creatinine", "hadm_ids": [101, 102]},
        ),
        _q(
            "t3",
            "T3",
            "Y-er",
            [1],
            "In the encounter that began on 2150-01-01, did the clinician explicitly attribute "
            "the Creatinine result of 1.9 mg/dL to diabetes? " + FMT["T3"],
            "yes",
            ["LAB-1001", "DX-101-1"],
            {
                "subject_id": 1,
                "hadm_id": 101,
                "lab_event_id": "LAB-1001",
                "dx_code": "25000",
                "dx_version": 9,
            },
            injection=json.dumps({"kind": "t3", "text": T3_TEXT, "subject_id": 1}),
        ),
        _q(
            "t4",
            "T4",
            "ckd",
            [1],
            "At the encounter that began on 2150-01-31, chronic kidney disease was coded for the "
            "first time. Which earlier abnormal lab results are evidence for it? " + FMT["T4"],
            "LAB-1001",
            ["DX-102-3", "LAB-1001"],
            {"subject_id": 1, "family": "ckd", "dx_hadm_id": 102},
        ),
        _q(
            "t5",
            "T5",
            "controlled_dx_presence",
            [1],
            "Does the chart contain a self-contradictory statement about the diagnosis of "
            "hypertension in the encounter that began on 2150-01-01? " + FMT["T5"],
            "yes",
            ["DX-101-2"],
            {
                "subject_id": 1,
                "hadm_id": 101,
                "kind": "diagnosis",
                "code": "4019",
                "icd_version": 9,
                "statement": T5_TEXT,
            },
            injection=json.dumps({"kind": "t5", "text": T5_TEXT, "subject_id": 1}),
        ),
        # patient 1: 4 distinct (version, code) pairs; patient 7: I129, I10 -> 2 -> "A"
        _q(
            "t6",
            "T6",
            "a_n_diagnoses",
            [1, 7],
            "Patients A and B both have diabetes. Which patient has more distinct diagnosis "
            "codes? " + FMT["T6"],
            "A",
            ["DX-101-1", "DX-701-1"],
            {"subject_ids": [1, 7], "value_a": 4, "value_b": 2},
        ),
        _q(
            "t7",
            "T7",
            "medication",
            [1],
            "Which medication was started during the encounter that began on 2150-01-01?"
            + OPTIONS_BLOCK
            + FMT["T7"],
            "A",
            ["RX-5001"],
            {"subject_id": 1, "hadm_id": 101},
            options=OPTS,
        ),
        # before LAB-9001 200, after LAB-1005 180 (29 days later): r = -0.10 -> decreased, S-
        _q(
            "t8",
            "T8",
            "S-",
            [1],
            "After MetFORMIN (Glucophage) was started on 2150-01-02, did the patient's Glucose "
            "go up, go down or stay about the same at least 7 days later? " + FMT["T8"],
            "decreased",
            ["RX-5001", "LAB-9001", "LAB-1005"],
            {
                "subject_id": 1,
                "rx_event_id": "RX-5001",
                "lab": "glucose",
                "before": {"value": 200.0},
                "after": {"value": 180.0},
            },
        ),
        _q(
            "t9a",
            "T9",
            "lab",
            [1],
            "What was the patient's Potassium on 2150-02-01? " + FMT["T9"],
            ABSTAIN,
            ["LAB-9004"],
            {"subject_id": 1, "lab": "potassium", "date": "2150-02-01"},
        ),
        _q(
            "t9b",
            "T9",
            "lab-unmeasured",
            [1],
            "What was the patient's Sodium on 2150-01-02? " + FMT["T9"],
            ABSTAIN,
            [],
            {"subject_id": 1, "lab": "sodium", "date": "2150-01-02"},
        ),
    ]


def frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(QUESTION_COLUMNS))
    for col, t in QUESTION_COLUMNS.items():
        if t == "string":
            df[col] = df[col].astype("string")
    return df


def run(world, rows, coverage=None) -> pd.DataFrame:
    return gates.run_gates(
        frame(rows),
        events=world["events"],
        coverage=world["coverage"] if coverage is None else coverage,
        raw_con=world["con"],
    )


def cell(g: pd.DataFrame, gate: str, task: str) -> pd.Series:
    return g[(g["gate"] == gate) & (g["task"] == task)].iloc[0]


def replace(rows: list[dict], target: str, **changes) -> list[dict]:
    return [({**r, **changes} if r["qid"] == target else r) for r in rows]


# --------------------------------------------------------------------------- clean set


def test_hand_checked_set_passes_every_hard_gate(world):
    g = run(world, good_rows())
    assert list(g.columns) == list(gates.GATE_COLUMNS)
    assert len(g) == 5 * 9  # every gate x every task
    hard = g[g["severity"] == "hard"]
    assert hard["passed"].all(), gates.gate_report(g)
    assert (hard["n_failed"] == 0).all()
    assert cell(g, "L2", "T9")["n_checked"] == 2
    gates.check_gates(g)  # soft L4 warnings never raise
    # L4 is soft and warns on exactly two tasks of this ten-question set. With one question
    # per task (two for T9) no stratum, disease or patient cap applies (each needs at least
    # as many questions as strata, 4 diseases, 20 questions); only the event-type mixes do:
    # T7's single question is a medication (100% > 65%), both T9 questions are labs (LAB-9004
    # and the anchorless one, which counts as a lab: 100% > 90%).
    l4 = g[g["gate"] == "L4"].set_index("task")
    assert set(l4["severity"]) == {"soft"}
    failed = l4[~l4["passed"]]
    assert failed["detail"].to_dict() == {
        "T7": "medication share 100% outside 35%-65%",
        "T9": "lab share 100% outside 60%-90%",
    }
    assert failed["n_failed"].tolist() == [1, 1] and failed["n_checked"].tolist() == [1, 1]
    assert (l4.loc[l4["passed"], "n_checked"] == 0).all()
    assert "PASS" in gates.gate_report(g) and "WARN" in gates.gate_report(g)


def test_list_columns_survive_a_parquet_round_trip(world, tmp_path):
    path = tmp_path / "q.parquet"
    frame(good_rows()).to_parquet(path)
    g = gates.run_gates(
        pd.read_parquet(path),
        events=world["events"],
        coverage=world["coverage"],
        raw_con=world["con"],
    )
    assert g.loc[g["severity"] == "hard", "passed"].all(), gates.gate_report(g)


# --------------------------------------------------------------------------- L2


WRONG_GOLDS = [
    ("T1-t1", "T1", "1.1 mg/dL", "1.9 mg/dL"),  # the value de-duplication drops
    ("T2-t2", "T2", "increased;strong", "increased;moderate"),  # first taken as 1.1
    ("T4-t4", "T4", "LAB-1001;LAB-1003", "LAB-1001"),  # LDL is no CKD evidence
    ("T6-t6", "T6", "B", "A"),
    ("T7-t7", "T7", "B", "A"),
    ("T8-t8", "T8", "similar", "decreased"),
]


def test_l2_catches_wrong_golds(world):
    rows = good_rows()
    for qid, _, bad_gold, _ in WRONG_GOLDS:
        rows = replace(rows, qid, gold=bad_gold)
    rows = replace(rows, "T4-t4", anchor_event_ids=["DX-102-3", "LAB-1001", "LAB-1003"])
    g = run(world, rows)
    for _, task, _, recomputed in WRONG_GOLDS:
        row = cell(g, "L2", task)
        assert (row["n_failed"], row["passed"]) == (1, False)
        assert f"recomputed {recomputed!r}" in row["detail"]
    for task in ("T3", "T5", "T9"):
        assert cell(g, "L2", task)["passed"]
    with pytest.raises(gates.GateError, match="6 hard validation gate") as err:
        gates.check_gates(g)
    assert "L2 gold recompute / T1: 1 of 1 failed (threshold < 0.5%)" in str(err.value)


def test_l2_catches_wrong_anchor_and_distractor_in_record(world):
    rows = replace(good_rows(), "T1-t1", anchor_event_ids=["LAB-1002"])
    # a distractor the patient actually received (Insulin, admission 102) makes T7 ambiguous
    opts = ["Metformin", "Insulin", "Atorvastatin", "Warfarin"]
    block = "\nOptions:\n" + "\n".join(f"{'ABCD'[i]}. {o}" for i, o in enumerate(opts))
    rows = replace(
        rows,
        "T7-t7",
        options=opts,
        question="Which medication was started on 2150-01-01?" + block + "\n" + FMT["T7"],
    )
    g = run(world, rows)
    assert "anchors ['LAB-1002'] but recomputed ['LAB-1001']" in cell(g, "L2", "T1")["detail"]
    assert "distractor(s) ['Insulin'] appear in the record" in cell(g, "L2", "T7")["detail"]


def test_l2_checks_t3_class_and_t5_contradiction(world):
    rows = replace(good_rows(), "T3-t3", subtype="Y-admit")  # 101 is EW EMER.: an er visit
    rows = replace(rows, "T5-t5", gold="no")  # the injection denies a coded diagnosis
    g = run(world, rows)
    assert "subtype 'Y-admit' but raw class 'Y-er'" in cell(g, "L2", "T3")["detail"]
    assert "gold 'no' but recomputed 'yes'" in cell(g, "L2", "T5")["detail"]


def test_l2_t9_fails_when_the_fact_is_stated(world):
    cov = world["coverage"].copy()
    cov.loc[cov["event_id"] == "LAB-9004", "status"] = "covered"
    g = run(world, good_rows(), coverage=cov)
    assert "is stated in the dialogue" in cell(g, "L2", "T9")["detail"]
    assert "anchor LAB-9004 is covered, not missed" in cell(g, "L1", "T9")["detail"]


def test_l2_reports_missing_meta(world):
    rows = replace(good_rows(), "T1-t1", meta=json.dumps({"subject_id": 1, "lab": "creatinine"}))
    assert "meta lacks 'date'" in cell(run(world, rows), "L2", "T1")["detail"]


# --------------------------------------------------------------------------- L1


def test_l1_flags_an_uncovered_anchor(world):
    cov = world["coverage"].copy()
    cov.loc[cov["event_id"] == "LAB-1001", "status"] = "missed"
    g = run(world, good_rows(), coverage=cov)
    for task in ("T1", "T2", "T3", "T4"):
        row = cell(g, "L1", task)
        assert (row["n_failed"], row["passed"]) == (1, False)
        assert "anchor LAB-1001 is missed, not covered" in row["detail"]
    assert cell(g, "L1", "T5")["passed"]


def test_l1_never_measured_must_be_unmeasured(world):
    # creatinine WAS measured on 2150-01-02 (LAB-1001)
    meta = {"subject_id": 1, "lab": "creatinine", "date": "2150-01-02"}
    rows = replace(good_rows(), "T9-t9b", meta=json.dumps(meta))
    row = cell(run(world, rows), "L1", "T9")
    assert row["n_failed"] == 1 and "has an event on 2150-01-02" in row["detail"]


def test_l1_anchor_of_another_patient(world):
    # coverage says LAB-1010 is a covered event of patient 8, not of the question's patient 1
    rows = replace(good_rows(), "T1-t1", anchor_event_ids=["LAB-1010"])
    cov = world["coverage"].copy()
    extra = pd.DataFrame(
        {"subject_id": [8], "event_id": ["LAB-1010"], "kind": ["lab"], "status": ["covered"]}
    )
    cov = pd.concat([cov[cov["event_id"] != "LAB-1010"], extra], ignore_index=True)
    row = cell(run(world, rows, coverage=cov), "L1", "T1")
    assert "belongs to subject 8, not [1]" in row["detail"]


# --------------------------------------------------------------------------- L3


@pytest.mark.parametrize(
    ("qid", "task", "question", "reason"),
    [
        (
            "T1-t1",
            "T1",
            "What was the Creatinine (1.9) on 2150-01-02? " + FMT["T1"],
            "gold value",
        ),
        (
            "T2-t2",
            "T2",
            "Did the Creatinine increase moderately between 2150-01-01 and 2150-01-31? "
            + FMT["T2"],
            "gold direction 'increased'",
        ),
        (
            "T4-t4",
            "T4",
            "Is LAB-1001 evidence for chronic kidney disease? " + FMT["T4"],
            "gold event id LAB-1001",
        ),
        (
            "T3-t3",
            "T3",
            "Given '" + T3_TEXT + "', did the clinician attribute it? " + FMT["T3"],
            "'Physician noted:' marker",
        ),
        (
            "T6-t6",
            "T6",
            "Patient A has 4 codes. Who has more distinct diagnosis codes? " + FMT["T6"],
            "computed value(s) ['4']",
        ),
        (
            "T7-t7",
            "T7",
            "Was metformin started on 2150-01-01?" + OPTIONS_BLOCK + FMT["T7"],
            "names the answer 'metformin'",
        ),
        (
            "T8-t8",
            "T8",
            "Glucose was 200 before metformin; did it go up or down? " + FMT["T8"],
            "before/after value(s) ['200']",
        ),
        (
            "T9-t9b",
            "T9",
            "What was the patient's Sodium on 2150-01-02, if recorded? " + FMT["T9"],
            "abstention cue(s) ['if recorded']",
        ),
    ],
)
def test_l3_catches_leaks(qid, task, question, reason):
    by_task = gates.gate_l3(frame(replace(good_rows(), qid, question=question)))
    n, fails = by_task[task]
    assert len(fails) == 1 and fails[0][0] == qid and reason in fails[0][1]
    assert all(not f for t, (_, f) in by_task.items() if t != task)


def test_a_leak_blocks_the_set(world):
    q = "What was the Creatinine (1.9) on 2150-01-02? " + FMT["T1"]
    g = run(world, replace(good_rows(), "T1-t1", question=q))
    with pytest.raises(gates.GateError, match=r"L3 no gold leakage / T1: 1 of 1 failed"):
        gates.check_gates(g)


def test_l3_allows_listed_choices_dates_and_rule_parameters():
    # all three directions listed is a list of choices, not a leak; the 5% rule parameter and
    # a date containing the value's digits are not the value; the format's example is removed
    q = {
        "task": "T2",
        "gold": "stable;none",
        "question": "Was the trend increased, decreased or stable? " + FMT["T2"],
    }
    assert gates.leak(q) is None
    q = {"task": "T1", "gold": "13 mg/dL", "question": "Glucose on 2150-01-13? " + FMT["T1"]}
    assert gates.leak(q) is None
    q = {"task": "T1", "gold": "1.3 mg/dL", "question": "Creatinine on 2150-01-02? " + FMT["T1"]}
    assert gates.leak(q) is None  # the format's own example "1.3 mg/dL" is not the stem
    q = {
        "task": "T6",
        "gold": "A",
        "meta": json.dumps({"value_a": 5.0, "value_b": 7.0}),
        "question": "Answer similar if within 5% of each other. " + FMT["T6"],
    }
    assert gates.leak(q) is None


# --------------------------------------------------------------------------- L0


@pytest.mark.parametrize(
    ("qid", "changes", "reason"),
    [
        ("T1-t1", {"gold": "1.9mg/dL"}, "not '<value_text> <unit>'"),
        ("T7-t7", {"options": OPTS[:3]}, "needs four non-empty options"),
        ("T7-t7", {"options": ["Metformin", "metformin", "Warfarin", "Aspirin"]}, "not distinct"),
        ("T2-t2", {"gold": "up;moderate"}, "not '<increased"),
        ("T1-t1", {"tertile": "mid"}, "tertile 'mid'"),
        ("T6-t6", {"subject_ids": [1, 1]}, "needs 2 distinct patient(s)"),
        ("T1-t1", {"options": ["x"]}, "must have no options"),
        ("T1-t1", {"meta": "not json"}, "meta is not JSON"),
        ("T1-t1", {"evidence_turns": ["turn 3"]}, "are not '<subject>:<turn>'"),
        ("T1-t1", {"qid": "T2-t1"}, "is not 'T1-<hash>'"),
    ],
)
def test_l0_schema_errors(qid, changes, reason):
    by_task = gates.gate_l0(frame(replace(good_rows(), qid, **changes)))
    n, fails = by_task[qid.split("-")[0]]
    assert len(fails) == 1 and reason in fails[0][1]
    assert sum(len(f) for _, f in by_task.values()) == 1


def test_a_schema_error_blocks_the_set(world):
    g = run(world, replace(good_rows(), "T7-t7", options=OPTS[:3]))
    row = cell(g, "L0", "T7")
    assert (row["n_checked"], row["n_failed"], row["passed"]) == (1, 1, False)
    with pytest.raises(gates.GateError, match=r"L0 schema / T7: 1 of 1 failed"):
        gates.check_gates(g)


def test_l0_duplicate_qid_and_missing_column(world):
    rows = good_rows()
    rows[1] = {**rows[1], "qid": rows[0]["qid"], "task": "T1"}
    row = cell(run(world, rows), "L0", "T1")
    assert row["n_failed"] == 2 and "qid is not unique" in row["detail"]
    df = frame(good_rows()).drop(columns=["meta"])
    g = gates.run_gates(
        df, events=world["events"], coverage=world["coverage"], raw_con=world["con"]
    )
    assert not g.loc[g["task"] == "T1", "passed"].any()
    assert "missing column(s) meta" in cell(g, "L0", "T1")["detail"]
    with pytest.raises(gates.GateError, match="missing column"):
        gates.check_gates(g)


def test_bad_inputs_get_a_clear_error(world):
    with pytest.raises(gates.GateInputError, match="event_coverage: missing column.*status"):
        gates.run_gates(
            frame(good_rows()),
            events=world["events"],
            coverage=world["coverage"].drop(columns=["status"]),
            raw_con=world["con"],
        )


# --------------------------------------------------------------------------- recompute


def test_independent_extraction_matches_the_kits_events(world):
    raw = recompute.load_raw(world["con"], [1, 7, 8])
    ev = world["events"]
    labs = ev[ev["kind"] == "lab"].set_index("event_id")
    assert set(raw.labs["event_id"]) == set(labs.index)
    mine = raw.labs.set_index("event_id")
    assert (mine.loc[labs.index, "value_text"] == labs["value_text"]).all()
    assert (mine.loc[labs.index, "hadm_id"] == labs["hadm_id"]).all()
    assert set(raw.rx["event_id"]) == set(ev.loc[ev["kind"] == "medication", "event_id"])
    assert set(raw.dx["event_id"]) == set(ev.loc[ev["kind"] == "diagnosis", "event_id"])
    assert mine.loc["LAB-1005", "value_text"] == "180" and mine.loc["LAB-1005", "hadm_id"] == 102
    assert (1, "creatinine", "2150-02-01") in raw.lab_days  # the wrong-unit row counts here


@pytest.mark.parametrize(
    ("first", "last", "expected"),
    [
        (1.0, 1.0499, "stable;none"),
        (1.0, 1.05, "increased;weak"),  # exactly 5%: not < STABLE_REL
        (100, 114.99, "increased;weak"),
        (100, 115, "increased;moderate"),  # exactly 15% (float division would say 0.1499..)
        (100, 130, "increased;strong"),
        (1.9, 2.3, "increased;moderate"),
        (2.0, 1.4, "decreased;strong"),
        (0.1, 0.07, "decreased;strong"),
    ],
)
def test_trend_thresholds_are_exact(first, last, expected):
    assert recompute.trend_gold(first, last) == expected


def test_t8_bins_and_t6_similarity():
    assert recompute.t8_gold(200, 180) == ("decreased", "S-")
    assert recompute.t8_gold(100, 104) == ("similar", "0")
    assert recompute.t8_gold(100, 140) == ("increased", "L+")
    assert recompute.compare_values(100, 95) == "similar"  # |5| <= 5% of 100
    assert recompute.compare_values(100, 94.9) == "A"
    assert recompute.compare_values(Decimal("0.3"), Decimal("0.6")) == "B"
    with pytest.raises(ZeroDivisionError):
        recompute.change_bin(0, 1)


def test_audit_evidence_spells_out_anchors(world):
    rows = frame(good_rows())
    text = audit.evidence_text(rows.iloc[0].to_dict(), events=world["events"])
    assert "LAB-1001 [2150-01-02 14:00] Creatinine = 1.9 mg/dL (abnormal)" in text
    text = audit.evidence_text(rows.iloc[2].to_dict())
    assert "injected: " + T3_TEXT in text


# --------------------------------------------------------------------------- built sets

QUICK = build_dir("quick")


def test_quick_build_passes_the_hard_gates(quick_built):
    q = pd.read_parquet(QUICK / "questions.parquet")
    g = gates.run_gates(q, "quick")
    assert gates.failed_hard(g).empty, gates.gate_report(g)


def test_l1_refuses_questions_built_on_excluded_rows_with_zero_tolerance(world):
    """Issue 26 §1: a question whose anchors or gold source rows (meta event ids / hadm_ids)
    touch a row the plausibility screen excluded fails L1, even one in 201 (< L1's 1%)."""
    base = good_rows()
    t1 = next(r for r in base if r["qid"] == "T1-t1")
    many = [{**t1, "qid": f"T1-copy{i:03d}"} for i in range(200)]
    excl = pd.DataFrame(
        {"table": ["admissions"], "rule": ["discharge_before_admission"], "key": ["102"],
         "subject_id": [1], "field": ["dischtime"], "value": ["2150-01-30 00:00:00"]}
    )  # fmt: skip
    # no exclusions: the copies pass (they are valid questions)
    g = gates.run_gates(frame(base + many), events=world["events"],
                        coverage=world["coverage"], raw_con=world["con"])  # fmt: skip
    assert cell(g, "L1", "T2")["passed"] and cell(g, "L1", "T1")["passed"]
    # stay 102 excluded: T2's meta names it (hadm_ids [101, 102]) -> L1 / T2 fails
    g = gates.run_gates(frame(base + many), events=world["events"], coverage=world["coverage"],
                        raw_con=world["con"], exclusions=excl)  # fmt: skip
    row = cell(g, "L1", "T2")
    assert (row["n_failed"], bool(row["passed"])) == (1, False)
    assert "built on an excluded source row: hadm:102 (discharge_before_admission)" in row["detail"]
    # a lab row excluded that one of 201 T1 questions names as a source row in its meta:
    # 1 / 201 < 1%, yet L1 / T1 fails (zero tolerance)
    lab = excl.assign(table="labevents", rule="value_out_of_bounds", key="424242")
    meta = json.dumps({**json.loads(t1["meta"]), "source": {"event_id": "LAB-424242"}})
    rows = base + many[:-1] + [{**many[-1], "meta": meta}]
    g = gates.run_gates(frame(rows), events=world["events"], coverage=world["coverage"],
                        raw_con=world["con"], exclusions=lab)  # fmt: skip
    row = cell(g, "L1", "T1")
    assert (row["n_checked"], row["n_failed"], bool(row["passed"])) == (201, 1, False)
    assert row["detail"].startswith("1 built on excluded source rows (0 allowed)")
    assert "LAB-424242 (value_out_of_bounds)" in row["detail"]
    assert cell(g, "L1", "T2")["passed"]  # stay 102 is not excluded here
    with pytest.raises(gates.GateError, match="excluded source row"):
        gates.check_gates(g)
