"""T11 builds and passes its independent L2 recomputation on the real-data fixtures: the
MIMIC-IV-shaped hosp fixture (tests/hosp_fixture.py, read by the MIMIC loader) and the same
data as a MIMIC-derived MEDS dataset (clinlib.data.sources.meds_fixture, read by the MEDS
views). Patient 1's second stay (hadm 102, 2150-01-31 09:00 .. 02-02 10:00) gets a few
orders and labs here so that it has cuts; the generator's golds are then recomputed from the
raw tables by gate L2 and must agree, and a wrong credit must be caught.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from clinlib.data.events import extract_events
from clinlib.tasks.base import QUESTION_COLUMNS
from clinlib.tasks.gates import gate_l2
from clinlib.tasks.generators import t11
from clinlib.tasks.generators.inputs import make_inputs
from clinlib.tasks.recompute import load_raw
from tests import hosp_fixture


def _rx(pid, start, drug, dose, unit, route):
    return dict(subject_id=1, hadm_id=102, pharmacy_id=pid, starttime=pd.Timestamp(start),
                stoptime=pd.Timestamp(start) + pd.Timedelta(days=1), drug=drug,
                dose_val_rx=dose, dose_unit_rx=unit, route=route)  # fmt: skip


def _lab(lid, t, itemid, v, uom):
    return dict(labevent_id=lid, subject_id=1, hadm_id=102, specimen_id=lid * 10, itemid=itemid,
                charttime=pd.Timestamp(t), value=str(v), valuenum=v, valueuom=uom)  # fmt: skip


EXTRA_RX = [
    _rx(7001, "2150-01-31 14:00", "Lisinopril", "10", "mg", "PO"),
    _rx(7002, "2150-01-31 20:00", "Heparin", "5000", "UNIT", "SC"),
    _rx(7003, "2150-02-01 09:30", "Furosemide", "40", "mg", "IV"),
    _rx(7004, "2150-02-02 06:00", "Aspirin", "81", "mg", "PO"),
]
EXTRA_LABS = [
    _lab(8001, "2150-02-01 06:00", 50971, 4.4, "mEq/L"),
    _lab(8002, "2150-02-01 07:15", 50983, 137.0, "mEq/L"),
]


def _questions_and_l2(con):
    events = extract_events(con, [1])
    cov = pd.DataFrame({"subject_id": 1, "event_id": events["event_id"], "status": "covered",
                        "turn_idx": pd.array(range(len(events)), dtype="Int64")})  # fmt: skip
    turns = pd.DataFrame({"subject_id": 1, "visit_idx": events["visit_idx"],
                          "turn_idx": range(len(events)), "speaker": "clinician", "text": "Noted.",
                          "event_ids": [[e] for e in events["event_id"]]})  # fmt: skip
    cohort = pd.DataFrame({"subject_id": [1], "disease": ["diabetes"], "tertile": ["low"]})
    q = t11.generate(make_inputs(events, cov, turns, cohort))[list(QUESTION_COLUMNS)]
    raw = load_raw(con, [1])
    return q, lambda qs: gate_l2(qs, raw, cov).get("T11", (0, []))


@pytest.fixture(scope="module")
def hosp_root(tmp_path_factory) -> Path:
    return hosp_fixture.write_csv_dir(
        tmp_path_factory.mktemp("t11hosp"),
        extra={"prescriptions": EXTRA_RX, "labevents": EXTRA_LABS},
    )


@pytest.mark.parametrize("source", ["mimic", "meds"])
def test_builds_and_recomputes_on_the_real_data_fixtures(source, hosp_root, tmp_path):
    con = hosp_fixture.open_source(source, hosp_root, tmp_path)
    try:
        q, l2 = _questions_and_l2(con)
    finally:
        con.close()
    assert set(q["subtype"]) == {"next_action", "argument", "discharge"}
    checked, fails = l2(q)
    assert checked == len(q) and fails == []
    bad = q.copy()
    bad["gold"] = [g if "|" in g else ("B" if g == "A" else "A") for g in bad["gold"]]
    bad["gold"] = [g.replace("=0.", "=0.1") if "|" in g else g for g in bad["gold"]]
    changed = int((bad["gold"] != q["gold"]).sum())
    assert changed > 0 and len(l2(bad)[1]) == changed
