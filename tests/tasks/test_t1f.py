"""T1F Lab-F rejection questions (clinlib.tasks.generators.t1f) on a hand-built patient.

Patient 9002, two visits. v1 (hadm 9201) holds Potassium 4.1 (02-01 06:00) and 4.6 (02-02
06:00), both covered, and one Sodium (a single measurement: no T1R series, no question);
v0 holds Potassium 3.9 and 4.0 on two days but the second is missed by the dialogue (not
eligible). So exactly one question: "the third Potassium measurement of the second hospital
stay", gold insufficient information, anchors the two v1 values. The reference reader
abstains on the full dialogue (correct); the eager reader answers v1's last value, 4.6 mEq/L,
an over-answer scored wrong.
"""

from __future__ import annotations

import json

import pandas as pd

from clinlib.data.schema import ARTIFACTS
from clinlib.tasks import score
from clinlib.tasks.base import ABSTAIN
from clinlib.tasks.gates.content import leak
from clinlib.tasks.generators import t1f
from clinlib.tasks.generators.inputs import make_inputs

SID = 9002


def _ev(eid, v, t, kind, **kw):
    row = dict.fromkeys(ARTIFACTS["events"])
    row.update(event_id=eid, subject_id=SID, hadm_id=9200 + v, visit_idx=v, time=t, kind=kind, **kw)
    return row


def _k(eid, v, t, value, code="50971", label="Potassium"):
    return _ev(eid, v, t, "lab", code=code, label=label, value=value, value_text=str(value),
               unit="mEq/L")  # fmt: skip


def _events() -> pd.DataFrame:
    rows = [
        _ev("ADM-9200", 0, "2150-01-01 08:00", "admission", code="URGENT"),
        _k("LAB-1", 0, "2150-01-01 06:00", 3.9),
        _k("LAB-2", 0, "2150-01-02 06:00", 4.0),
        _ev("ADM-9201", 1, "2150-02-01 05:00", "admission", code="URGENT"),
        _k("LAB-3", 1, "2150-02-01 06:00", 4.1),
        _k("LAB-4", 1, "2150-02-02 06:00", 4.6),
        _k("LAB-5", 1, "2150-02-01 07:00", 139.0, code="50983", label="Sodium"),
    ]
    df = pd.DataFrame(rows, columns=list(ARTIFACTS["events"]))
    df["time"] = pd.to_datetime(df["time"])
    return df


def test_one_rejection_question_by_hand():
    ev = _events()
    status = ["missed" if e == "LAB-2" else "covered" for e in ev["event_id"]]
    cov = pd.DataFrame({"subject_id": SID, "event_id": ev["event_id"], "status": status,
                        "turn_idx": pd.array(range(len(ev)), dtype="Int64")})  # fmt: skip
    turns = pd.DataFrame({"subject_id": SID, "visit_idx": ev["visit_idx"],
                          "turn_idx": range(len(ev)), "speaker": "clinician", "text": "Noted.",
                          "event_ids": [[e] for e in ev["event_id"]]})  # fmt: skip
    cohort = pd.DataFrame({"subject_id": [SID], "disease": ["ckd"], "tertile": ["low"]})
    q = t1f.generate(make_inputs(ev, cov, turns, cohort))
    assert len(q) == 1
    row = q.iloc[0]
    assert "third Potassium" in row["question"] and "second hospital stay" in row["question"]
    assert row["gold"] == ABSTAIN and list(row["anchor_event_ids"]) == ["LAB-3", "LAB-4"]
    meta = json.loads(row["meta"])
    assert (meta["position"], meta["n_in_visit"], meta["visit_idx"]) == (3, 2, 1)
    assert leak(row.to_dict()) is None
    assert "states a number" in leak(
        {**row.to_dict(), "question": "The third Potassium of visit 2?"}
    )


def test_rejection_is_scored_like_t9():
    assert score("T1F", "insufficient information", ABSTAIN).correct
    over = score("T1F", "4.6 mEq/L", ABSTAIN)
    assert not over.correct and over.parsed == "4.6 mEq/L"  # a hallucinated value
    assert score("T1F", "The record does not mention a third measurement.", ABSTAIN,
                 lenient=True).correct  # fmt: skip


def test_l2_recomputes_the_rejections_and_catches_an_existing_measurement(quick_temporal):
    """Gate L2 on quick's T1F set: every question recomputes from the raw tables; asking for
    a measurement the stay does hold, miscounting the stay or stating a value as gold fails."""
    from clinlib.data.build import load, open_source, source_spec
    from clinlib.tasks.extended import load_questions
    from clinlib.tasks.gates import gate_l2
    from clinlib.tasks.recompute import load_raw

    qs = load_questions(quick_temporal, ["T1F"])
    qs = qs[qs["task"] == "T1F"].head(4).reset_index(drop=True)
    con = open_source(source_spec(quick_temporal))
    try:
        raw = load_raw(con, {int(s) for ids in qs["subject_ids"] for s in ids})
    finally:
        con.close()
    coverage = load("event_coverage", quick_temporal)

    def fails(frame: pd.DataFrame) -> list[tuple[str, str]]:
        return gate_l2(frame, raw, coverage).get("T1F", (0, []))[1]

    assert len(qs) == 4 and fails(qs) == []

    exists = qs.copy()  # the asked rank is the stay's last measurement: it exists
    exists["meta"] = [json.dumps({**(m := json.loads(s)), "position": m["n_in_visit"]})
                      for s in qs["meta"]]  # fmt: skip
    assert len(f := fails(exists)) == 4 and all("asked the" in why for _, why in f)
    miscount = qs.copy()
    miscount["meta"] = [json.dumps({**(m := json.loads(s)), "n_in_visit": m["n_in_visit"] + 1,
                                    "position": m["position"] + 1})
                        for s in qs["meta"]]  # fmt: skip
    assert len(fails(miscount)) == 4
    stated = qs.assign(gold="4.6 mEq/L")
    assert len(f := fails(stated)) == 4 and all("but recomputed" in why for _, why in f)
