"""Trap facts and their gates on the real-data fixtures (issue 30 §1: derived traps "only where
the record supports them"): the MIMIC-IV-shaped hosp fixture (tests/hosp_fixture.py) and the
same data as MIMIC-derived MEDS. Patient 1's second stay gets a creatinine of 4.0 mg/dL and a
metformin order the next morning, and a potassium of 5.8 mEq/L then potassium chloride; both
derived rules must fire from the raw tables, and L2 must recompute the eGFR band there."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from clinlib.data.events import extract_events
from clinlib.tasks.recompute import load_raw
from clinlib.tasks.traps.facts import build_trap_facts, trap_dialogue
from clinlib.tasks.traps.queries import build_trap_questions
from clinlib.tasks.traps.stage import _raw_patients, _tagged_turns, gate_rows
from tests import hosp_fixture

RX = [
    dict(
        subject_id=1,
        hadm_id=102,
        pharmacy_id=pid,
        starttime=pd.Timestamp(t),
        stoptime=pd.Timestamp(t) + pd.Timedelta(days=1),
        drug=d,
        dose_val_rx=dose,
        dose_unit_rx=u,
        route="PO",
    )
    for pid, t, d, dose, u in (
        (7101, "2150-02-01 09:00", "MetFORMIN (Glucophage)", "500", "mg"),
        (7102, "2150-02-01 08:00", "Potassium Chloride", "20", "mEq"),
    )
]
LABS = [dict(labevent_id=lid, subject_id=1, hadm_id=102, specimen_id=lid * 10, itemid=item,
             charttime=pd.Timestamp(t), value=str(v), valuenum=v, valueuom=u,
             ref_range_lower=lo, ref_range_upper=hi)
        for lid, t, item, v, u, lo, hi in ((8101, "2150-02-01 06:00", 50912, 4.0, "mg/dL", 0.5, 1.2),
                                           (8102, "2150-02-01 06:00", 50971, 5.8, "mEq/L", 3.3, 5.1))]  # fmt: skip


@pytest.fixture(scope="module")
def hosp_root(tmp_path_factory) -> Path:
    return hosp_fixture.write_csv_dir(
        tmp_path_factory.mktemp("traphosp"), extra={"prescriptions": RX, "labevents": LABS}
    )


@pytest.mark.parametrize("source", ["mimic", "meds"])
def test_derived_traps_and_l2_on_the_real_data_fixtures(source, hosp_root, tmp_path):
    con = hosp_fixture.open_source(source, hosp_root, tmp_path)
    try:
        events = extract_events(con, [1])
        patients = _raw_patients(con, [1])
        raw = load_raw(con, [1])
    finally:
        con.close()
    turns = pd.DataFrame({"subject_id": 1, "visit_idx": events["visit_idx"],
                          "turn_idx": range(len(events)), "speaker": "clinician",
                          "text": "Noted.", "event_ids": [[e] for e in events["event_id"]],
                          "visit_date": events["time"].dt.strftime("%Y-%m-%d")})  # fmt: skip
    facts = build_trap_facts(turns, events, patients)
    derived = facts[facts["origin"] == "derived"]
    assert {"metformin_low_egfr", "potassium_hyperkalaemia"} <= set(derived["rule"])
    assert "anticoagulant_thrombocytopenia" not in set(derived["rule"])  # platelets normal
    cohort = pd.DataFrame({"subject_id": [1], "disease": ["diabetes"], "tertile": ["low"]})
    q = build_trap_questions(facts, events, turns, patients, cohort)
    egfr = q[q["subtype"] == "egfr"]
    assert "A" in set(egfr["gold"])  # creatinine 4.0 before the metformin order: eGFR < 30
    checks = pd.DataFrame(columns=["subject_id", "check", "severity", "passed", "detail"])
    pts = {int(r["subject_id"]): r for r in patients.to_dict("records")}
    tdial = _tagged_turns(trap_dialogue(turns, facts))
    gates = gate_rows(q, checks.astype({"passed": bool}), raw, pts, tdial).set_index(
        ["gate", "task"]
    )
    assert gates.loc[("L2", "MQ"), "n_failed"] == 0 and gates.loc[("L2", "MQ"), "n_checked"] >= 1
