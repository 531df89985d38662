"""The T10 generator on a hand-built patient (LongMedBench "Temporal reasoning"; docs/design.md
"T10"), golds and clips worked out by hand.

Patient 9001 (diabetes / low), six visits v0..v5, hadm 9100+v, admitted 2150-(v+1)-01 08:00,
discharged 2150-(v+1)-03 12:00 (to DISCHARGED_TO[v]); each visit has an abnormal glucose 150+10v at 09:00
on the admission day and the diagnosis "Type 2 diabetes mellitus" (+ "Essential
hypertension" from v2 on).
  v1 also: Metformin 02-01 10:00, Heparin 02-01 22:15 (missed by the dialogue), Insulin and
     Aspirin both 02-02 07:30 (they share a minute: never cloze items), Hemodialysis
     procedure 02-02 -> the only visit with three interventions alone at their minute: one
     cloze question, items Metformin < Heparin < Hemodialysis.
  v5 also: the diagnosis "Follow-up exam 3/14", which states a date: the window v1..v5 leaks
     and is dropped, so the only sorting window is v0..v4.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from clinlib.data.schema import ARTIFACTS
from clinlib.eval.readers.order import answer_order
from clinlib.tasks.answers.order import split_order
from clinlib.tasks.generators import t10
from clinlib.tasks.generators.inputs import make_inputs

SID = 9001
# distinct discharge halves for v2..v4 (identical clips would make the order ambiguous)
DISCHARGED_TO = ["HOME", "HOME", "HOME HEALTH CARE", "SKILLED NURSING FACILITY", "REHAB", "HOME"]


def _ev(eid, v, t, kind, **kw):
    row = dict.fromkeys(ARTIFACTS["events"])
    row.update(event_id=eid, subject_id=SID, hadm_id=9100 + v, visit_idx=v, time=t, kind=kind, **kw)
    return row


def _events() -> pd.DataFrame:
    rows = []
    for v in range(6):
        m = v + 1
        rows += [
            _ev(f"ADM-{9100 + v}", v, f"2150-0{m}-01 08:00", "admission",
                code="EW EMER." if v == 0 else "URGENT", label="Admission"),
            _ev(f"DIS-{9100 + v}", v, f"2150-0{m}-03 12:00", "discharge",
                code=DISCHARGED_TO[v], label="Discharge"),
            _ev(f"LAB-{v}", v, f"2150-0{m}-01 09:00", "lab", code="50931", label="Glucose",
                value=150.0 + 10 * v, value_text=str(150 + 10 * v), unit="mg/dL",
                flag="abnormal"),
            _ev(f"DX-{9100 + v}-1", v, f"2150-0{m}-03 12:00", "diagnosis", code="E119",
                label="Type 2 diabetes mellitus"),
        ]  # fmt: skip
        if v >= 2:
            rows.append(_ev(f"DX-{9100 + v}-2", v, f"2150-0{m}-03 12:00", "diagnosis",
                            code="I10", label="Essential hypertension"))  # fmt: skip
    rows += [
        _ev("RX-1", 1, "2150-02-01 10:00", "medication", label="Metformin", value_text="500",
            unit="mg", route="PO"),
        _ev("RX-2", 1, "2150-02-01 22:15", "medication", label="Heparin", value_text="5000",
            unit="UNIT", route="SC"),
        _ev("RX-3", 1, "2150-02-02 07:30", "medication", label="Insulin", value_text="10",
            unit="UNIT", route="SC"),
        _ev("RX-4", 1, "2150-02-02 07:30", "medication", label="Aspirin", value_text="81",
            unit="mg", route="PO"),
        _ev("PX-9101-1", 1, "2150-02-02", "procedure", code="3995", label="Hemodialysis"),
        _ev("DX-9105-3", 5, "2150-06-03 12:00", "diagnosis", code="Z09",
            label="Follow-up exam 3/14"),
    ]  # fmt: skip
    df = pd.DataFrame(rows, columns=list(ARTIFACTS["events"]))
    df["time"] = pd.to_datetime(df["time"], format="ISO8601")
    return df


def _generate(ev: pd.DataFrame) -> pd.DataFrame:
    covered = ev["kind"].isin(["admission", "discharge"]).tolist()
    cov = pd.DataFrame({
        "subject_id": SID, "event_id": ev["event_id"],
        "status": ["covered" if c else "missed" for c in covered],
        "turn_idx": pd.array([i if c else None for i, c in enumerate(covered)], dtype="Int64"),
    })  # fmt: skip
    turns = pd.DataFrame({
        "subject_id": SID, "visit_idx": ev["visit_idx"], "turn_idx": range(len(ev)),
        "speaker": "clinician", "text": "Noted.", "event_ids": [[e] for e in ev["event_id"]],
    })  # fmt: skip
    cohort = pd.DataFrame({"subject_id": [SID], "disease": ["diabetes"], "tertile": ["low"]})
    return t10.generate(make_inputs(ev, cov, turns, cohort))


@pytest.fixture(scope="module")
def cands() -> pd.DataFrame:
    return _generate(_events())


def test_qid_hashes_the_whole_question(cands):
    ev = _events()
    ev.loc[ev["event_id"] == "RX-1", "route"] = "PO/NG"  # the same events, rendered otherwise
    again = _generate(ev).set_index("subtype")["qid"]
    before = cands.set_index("subtype")["qid"]
    assert again["visit_cloze"] != before["visit_cloze"]  # RX-1 is a cloze item
    assert again["visit_sorting"] == before["visit_sorting"]  # clips name drugs only


def _items(row) -> list[str]:
    return [str(x) for x in row["options"]]


def test_candidates(cands):
    assert cands["subtype"].value_counts().to_dict() == {
        "visit_cloze": 1,
        "visit_sorting": 1,
        "joint_sorting": 1,
        "visit_sorting_notes": 1,
    }


def test_visit_cloze_by_hand(cands):
    row = cands[cands["subtype"] == "visit_cloze"].iloc[0]
    by_time = [
        "2150-02-01 10:00 medication: Metformin 500 mg PO",
        "2150-02-01 22:15 medication: Heparin 5000 UNIT SC",
        "2150-02-02 00:00 procedure: Hemodialysis",
    ]
    items = _items(row)
    assert sorted(items) == sorted(by_time) and items != by_time  # shuffled
    assert [items[ord(x) - 65] for x in split_order(row["gold"])] == by_time
    visit = row["question"].split("\nA. ")[0]
    assert "2150-02-02 07:30 medication: Insulin 10 UNIT SC" in visit
    assert "2150-02-01 09:00 labs: Glucose 160 mg/dL (abnormal)" in visit
    assert not any(item in visit for item in by_time)
    assert sorted(row["anchor_event_ids"]) == ["PX-9101-1", "RX-1", "RX-2"]
    assert json.loads(row["meta"])["hadm_id"] == 9101


def test_visit_cloze_insertion_gold_by_hand(cands):
    # remaining lines: [1] 08:00 admission, [2] 09:00 labs, [3] 02-02 07:30 Insulin,
    # [4] 07:30 Aspirin, [5] 02-03 12:00 discharge, [6] its diagnosis; all three removed
    # events (02-01 10:00, 02-01 22:15, 02-02 00:00) go after line 2, in time order
    row = cands[cands["subtype"] == "visit_cloze"].iloc[0]
    meta = json.loads(row["meta"])
    gold = split_order(row["gold"])
    assert meta["n_lines"] == 6
    assert meta["insertion"] == ",".join(f"{x}:2" for x in gold)
    assert "[2] 2150-02-01 09:00 labs: Glucose 160 mg/dL (abnormal)" in row["question"]
    assert "[3] 2150-02-02 07:30 medication: Insulin 10 UNIT SC" in row["question"]
    # the timestamp rule inserts each after the last line stamped before it
    assert answer_order(row["question"]) == ", ".join(f"{x}:2" for x in gold)


V1_ADMISSION = (
    "Admission type: URGENT. Abnormal results on the admission day: Glucose 160 mg/dL "
    "(abnormal). Medications started on the admission day: Metformin, Heparin."
)
V1_DISCHARGE = (
    "Diagnoses: Type 2 diabetes mellitus. Procedures: Hemodialysis. Medications started "
    "later in the stay: Insulin, Aspirin. Discharged to: HOME."
)


def test_visit_sorting_by_hand(cands):
    row = cands[cands["subtype"] == "visit_sorting"].iloc[0]
    hadms = json.loads(row["meta"])["hadm_ids"]
    assert sorted(hadms) == [9100, 9101, 9102, 9103, 9104]  # v0..v4, never v5
    assert [hadms[ord(x) - 65] for x in split_order(row["gold"])] == sorted(hadms)
    items = _items(row)
    assert items[hadms.index(9101)] == f"{V1_ADMISSION} {V1_DISCHARGE}"
    assert items[hadms.index(9100)].startswith("Admission type: EW EMER. Abnormal")


def test_joint_sorting_by_hand(cands):
    row = cands[cands["subtype"] == "joint_sorting"].iloc[0]
    clips = [tuple(c) for c in json.loads(row["meta"])["clips"]]
    items = _items(row)
    assert items[clips.index((9101, "admission"))] == V1_ADMISSION
    assert items[clips.index((9101, "discharge"))] == V1_DISCHARGE
    ordered = [clips[ord(x) - 65] for x in split_order(row["gold"])]
    assert ordered == [(h, half) for h in range(9100, 9105) for half in ("admission", "discharge")]


V1_NOTE = (
    "Admission type URGENT. Abnormal results on the admission day: Glucose 160 mg/dL. "
    "Medications started on the admission day: Metformin 500 mg; Heparin 5000 UNIT. "
    "Medications started later in the stay: Insulin 10 UNIT; Aspirin 81 mg. Procedures: "
    "Hemodialysis. Discharge diagnoses: Type 2 diabetes mellitus (E119). Discharged to HOME."
)


def test_visit_sorting_from_notes_by_hand(cands):
    # the window v0..v4 again (v5's note states "3/14" too), each visit as its synthetic
    # discharge note with the dates removed; gold = the same visit order as visit sorting
    notes = cands[cands["subtype"] == "visit_sorting_notes"].iloc[0]
    events = cands[cands["subtype"] == "visit_sorting"].iloc[0]
    meta = json.loads(notes["meta"])
    order = [meta["hadm_ids"][ord(x) - 65] for x in split_order(notes["gold"])]
    assert order == [9100, 9101, 9102, 9103, 9104]
    assert sorted(meta["hadm_ids"]) == sorted(json.loads(events["meta"])["hadm_ids"])
    items = _items(notes)
    assert items[meta["hadm_ids"].index(9101)] == V1_NOTE
    assert not any(re.search(r"\d{4}-\d{2}-\d{2}", item) for item in items)
    assert "discharge-note summaries" in notes["question"]
    # reference abstains (no date); eager ranks by listed diagnoses: v0, v1 one each, v2..v4
    # two each, ties in shown order
    assert answer_order(notes["question"]) == "insufficient information"
    ranked = answer_order(notes["question"], eager=True).split(", ")
    assert [meta["hadm_ids"][ord(x) - 65] for x in ranked][:2] in ([9100, 9101], [9101, 9100])
