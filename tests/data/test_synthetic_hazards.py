"""The synthetic generator's planted contraindicated orders
(clinlib.data.sources.synthetic.hazards): every derived trap rule fires on a generated chunk,
every planted order is a conflict by the rule's own definition (derive_traps, the trap task's
code), the plant comes from its own stream (the base tables are unchanged by it), and the
dialogue's conflict finder names a conflict's two events and nothing on a counterexample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from clinlib.data import contraindications as ci
from clinlib.data.sources.synthetic import generate_chunk
from clinlib.data.sources.synthetic import hazards as hz

N = 1500
LABS = {51265: "Platelet Count", 50971: "Potassium", 50912: "Creatinine"}


@pytest.fixture(scope="module")
def chunk() -> dict:
    return generate_chunk(3, 0, N, N)


def _events(tables: dict) -> pd.DataFrame:
    """The three rule labs and every MAIN order as events rows (one visit per patient is
    enough: the rules read times, not visits)."""
    lab = tables["labevents"].to_pandas()
    lab = lab[lab["itemid"].isin(list(LABS)) & lab["valuenum"].notna()]
    rx = tables["prescriptions"].to_pandas()
    rx = rx[rx["drug_type"] == "MAIN"]
    labs = pd.DataFrame({
        "event_id": "LAB-" + lab["labevent_id"].astype(str), "subject_id": lab["subject_id"],
        "visit_idx": 0, "time": lab["charttime"], "kind": "lab",
        "label": lab["itemid"].map(LABS), "value": lab["valuenum"],
        "ref_high": lab["ref_range_upper"],
    })  # fmt: skip
    meds = pd.DataFrame({
        "event_id": "RX-" + rx["pharmacy_id"].astype(str), "subject_id": rx["subject_id"],
        "visit_idx": 0, "time": rx["starttime"], "kind": "medication", "label": rx["drug"],
        "value": np.nan, "ref_high": np.nan,
    })  # fmt: skip
    return pd.concat([labs, meds], ignore_index=True)


def test_every_rule_fires_on_a_generated_chunk(chunk):
    traps = ci.derive_traps(_events(chunk), chunk["patients"].to_pandas())
    fired = traps.groupby("rule").size().to_dict()
    assert set(fired) == {r.key for r in ci.RULES}, fired
    # the thrombocytopenia rule fires only through the plant: its drug is the planted drip
    drips = traps[traps["rule"] == "anticoagulant_thrombocytopenia"]["order_drug"]
    assert set(drips) == {"Heparin (Porcine)"}


def test_without_the_plant_two_rules_never_fire_and_the_base_stream_is_unchanged(
    chunk, monkeypatch
):
    monkeypatch.setattr(hz, "THROMBO_P", 0.0)
    monkeypatch.setattr(hz, "ORDER_P", dict.fromkeys(hz.ORDER_P, 0.0))
    plain = generate_chunk(3, 0, N, N)
    rules = set(ci.derive_traps(_events(plain), plain["patients"].to_pandas())["rule"])
    assert "anticoagulant_thrombocytopenia" not in rules
    assert "potassium_hyperkalaemia" not in rules
    # the plant draws from its own stream: the base tables are the same without it
    for name in ("patients", "admissions", "diagnoses_icd", "procedures_icd"):
        assert plain[name].equals(chunk[name]), name
    assert len(chunk["prescriptions"]) > len(plain["prescriptions"])


def _asof_conflicts(ev: pd.DataFrame, rule: ci.Rule, in_state) -> set[int]:
    """Patients with an order of the rule's class whose latest lab of the rule (at or before
    the order, at most max_age_days old) is in the state: pandas merge_asof, not the rule
    module's search."""
    meds = ev[(ev["kind"] == "medication") & ev["label"].map(rule.matches)]
    labs = ev[ev["label"] == rule.lab][["subject_id", "time", "value", "ref_high"]]
    m = pd.merge_asof(
        meds.sort_values("time")[["subject_id", "time"]],
        labs.sort_values("time").rename(columns={"time": "lab_time"}),
        left_on="time", right_on="lab_time", by="subject_id", direction="backward",
    )  # fmt: skip
    m = m[m["lab_time"].notna()]
    fresh = m["time"] - m["lab_time"] <= pd.Timedelta(days=rule.max_age_days)
    return set(m[fresh & in_state(m)]["subject_id"].astype(int))


def test_planted_conflicts_agree_with_an_independent_search(chunk):
    ev = _events(chunk)
    traps = ci.derive_traps(ev, chunk["patients"].to_pandas())
    checks = {
        "potassium_hyperkalaemia": lambda m: m["value"] > m["ref_high"].fillna(5.1),
        "anticoagulant_thrombocytopenia": lambda m: m["value"] < 50,
    }
    for key, in_state in checks.items():
        want = _asof_conflicts(ev, ci.RULE_BY_KEY[key], in_state)
        got = set(traps[traps["rule"] == key]["subject_id"].astype(int))
        assert want and got == want, key


def _e(eid, kind, label, time, value=None, ref_high=None):
    return {"event_id": eid, "subject_id": 1, "visit_idx": 0, "time": pd.Timestamp(time),
            "kind": kind, "label": label, "value": value, "ref_high": ref_high}  # fmt: skip


def test_conflict_event_ids_names_the_lab_and_the_order():
    events = [
        _e("LAB-1", "lab", "Creatinine", "2150-01-01 06:00", 1.0, 1.2),
        _e("LAB-2", "lab", "Creatinine", "2150-01-02 06:00", 1.4, 1.2),  # +0.4 in 24 h: AKI
        _e("RX-1", "medication", "Vancomycin", "2150-01-02 08:00"),
        _e("LAB-3", "lab", "Potassium", "2150-01-02 06:00", 5.0, 5.1),  # not above 5.1
        _e("RX-2", "medication", "Potassium Chloride", "2150-01-02 09:00"),
    ]
    assert ci.conflict_event_ids(events) == frozenset({"LAB-2", "RX-1"})
    # counterexamples: no AKI (a 0.2 rise) and no high potassium -> nothing to protect
    events[1] = _e("LAB-2", "lab", "Creatinine", "2150-01-02 06:00", 1.2, 1.2)
    assert ci.conflict_event_ids(events) == frozenset()
    # metformin needs sex and age, which the dialogue does not have: never protected here
    met = [
        _e("LAB-9", "lab", "Creatinine", "2150-01-01 06:00", 4.0, 1.2),
        _e("RX-9", "medication", "MetFORMIN (Glucophage)", "2150-01-01 09:00"),
    ]
    assert ci.conflict_event_ids(met) == frozenset()
