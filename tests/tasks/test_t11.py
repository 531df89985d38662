"""T11 decisions (LongMedBench "Task 3"; clinlib.tasks.generators.t11) on a hand-built patient,
with the time decay and every credit worked out by hand.

Patient 9001 (diabetes / low), two visits. v0 (hadm 9100, 2150-01-01 08:00 .. 01-03 12:00):
Lisinopril 10 mg PO 01-01 10:00, Atorvastatin 20 mg PO 01-02 09:00, a glucose 01-01 09:00.
v1 (hadm 9101, admitted 2150-02-01 08:00, discharged 02-03 12:00):

    09:00 02-01  LAB-10  Glucose            (context before it: admission only)
    10:00 02-01  RX-1    Metformin 500 mg PO
    22:15 02-01  RX-2    Heparin 5000 UNIT SC
    00:00 02-02  PX-9101-1 Hemodialysis     (a procedure: its chartdate at midnight)
    06:00 02-02  LAB-11  Potassium
    07:30 02-02  RX-3    Insulin 10 UNIT SC
    08:00 02-03  RX-4    Aspirin 81 mg PO   (4 h before discharge)

Cuts (lab / medication strictly inside the stay, >= 3 context events): RX-2, LAB-11, RX-3,
RX-4 (LAB-10 and RX-1 have 1 and 2 context events). Credits by hand, decay = 1 - minutes/1440:

    cut RX-2 (02-01 22:15): medication 1 (itself); procedure PX at +105 min -> 1335/1440 =
        0.92708 -> 0.9271; lab LAB-11 at +465 min -> 975/1440 = 0.67708 -> 0.6771;
        arguments: Insulin at +555 min -> 885/1440 = 0.61458 -> 0.6146; Aspirin at +2025 min
        (> 24 h) -> 0; Metformin only before the cut -> 0; v0's drugs never in v1 -> 0.
    cut LAB-11 (02-02 06:00): lab 1; medication RX-3 at +90 min -> 1350/1440 = 0.9375;
        procedure only before -> 0. No argument question: the record has only two lab
        names (one distractor, three needed).
    cut RX-3 (02-02 07:30): medication 1; lab, procedure 0; Aspirin at +1470 min -> 0.
    cut RX-4 (02-03 08:00): medication 1; everything else 0.
Discharge: RX-4 is 240 min before discharge (<= 360: yes), RX-2 / LAB-11 / RX-3 are 2265 /
1800 / 1710 min before it (no).
"""

from __future__ import annotations

import json
from fractions import Fraction

import pandas as pd
import pytest

from clinlib.data.schema import ARTIFACTS
from clinlib.tasks import score
from clinlib.tasks.answers.decision import (
    decay,
    decay_text,
    decision_gold,
    gold_decision_problem,
    split_gold,
)
from clinlib.tasks.gates.ordering import t11_leak
from clinlib.tasks.generators import t11
from clinlib.tasks.generators.inputs import make_inputs

SID = 9001


def test_decay_by_hand():
    assert decay(0) == 1
    assert decay(720) == Fraction(1, 2)
    assert decay(1440) == 0 and decay(1441) == 0 and decay(-1) == 0
    assert decay(105) == Fraction(1335, 1440)
    assert decay_text(decay(105)) == "0.9271"  # 0.927083...
    assert decay_text(decay(465)) == "0.6771"  # 0.677083...
    assert decay_text(decay(9)) == "0.9938"  # exactly 0.99375: half-up, not half-even
    assert decay_text(decay(90)) == "0.9375"


def test_gold_carries_the_credits():
    gold = decision_gold("B", {"A": decay(105), "B": Fraction(1), "C": Fraction(0)})
    assert gold == "B|A=0.9271"
    assert split_gold(gold) == ("B", {"B": 1.0, "A": 0.9271})
    assert gold_decision_problem(gold, 3) is None
    assert gold_decision_problem(gold, 1) is not None  # A/B beyond a one-option question
    assert gold_decision_problem("B|C=0.5|A=0.2500") is not None  # not in letter order
    assert gold_decision_problem("B|A=0.93") is not None  # not 4 places
    options = ["lab test", "medication order", "procedure"]
    assert score("T11", "B", gold, options).value == 1.0
    assert score("T11", "A. lab test", gold, options).value == pytest.approx(0.9271)
    assert score("T11", "A", gold, options).correct is False
    assert score("T11", "C", gold, options).value == 0.0
    assert score("T11", "D", gold, options).parse_failed  # no fourth option
    assert score("T11", "insufficient information", gold, options).value == 0.0
    lenient = score("T11", "I would order a procedure next.", gold, options, lenient=True)
    assert lenient.parsed == "C" and lenient.value == 0.0


def _ev(eid, v, t, kind, **kw):
    row = dict.fromkeys(ARTIFACTS["events"])
    row.update(event_id=eid, subject_id=SID, hadm_id=9100 + v, visit_idx=v, time=t, kind=kind, **kw)
    return row


def _med(eid, v, t, drug, dose, unit, route):
    return _ev(eid, v, t, "medication", code=drug, label=drug, value=float(dose.split("-")[0]),
               value_text=dose, unit=unit, route=route)  # fmt: skip


def _lab(eid, v, t, code, label, value, unit):
    return _ev(eid, v, t, "lab", code=code, label=label, value=value, value_text=str(value),
               unit=unit)  # fmt: skip


def events() -> pd.DataFrame:
    rows = [
        _ev("ADM-9100", 0, "2150-01-01 08:00", "admission", code="URGENT", label="Admission"),
        _ev("DIS-9100", 0, "2150-01-03 12:00", "discharge", code="HOME", label="Discharge"),
        _lab("LAB-1", 0, "2150-01-01 09:00", "50931", "Glucose", 150.0, "mg/dL"),
        _med("RX-01", 0, "2150-01-01 10:00", "Lisinopril", "10", "mg", "PO"),
        _med("RX-02", 0, "2150-01-02 09:00", "Atorvastatin", "20", "mg", "PO"),
        _ev("ADM-9101", 1, "2150-02-01 08:00", "admission", code="URGENT", label="Admission"),
        _ev("DIS-9101", 1, "2150-02-03 12:00", "discharge", code="HOME", label="Discharge"),
        _ev("DX-9101-1", 1, "2150-02-03 12:00", "diagnosis", code="E119", label="T2DM"),
        _lab("LAB-10", 1, "2150-02-01 09:00", "50931", "Glucose", 160.0, "mg/dL"),
        _med("RX-1", 1, "2150-02-01 10:00", "Metformin", "500", "mg", "PO"),
        _med("RX-2", 1, "2150-02-01 22:15", "Heparin", "5000", "UNIT", "SC"),
        _ev("PX-9101-1", 1, "2150-02-02", "procedure", code="3995", label="Hemodialysis"),
        _lab("LAB-11", 1, "2150-02-02 06:00", "50971", "Potassium", 4.1, "mEq/L"),
        _med("RX-3", 1, "2150-02-02 07:30", "Insulin", "10", "UNIT", "SC"),
        _med("RX-4", 1, "2150-02-03 08:00", "Aspirin", "81", "mg", "PO"),
    ]  # fmt: skip
    df = pd.DataFrame(rows, columns=list(ARTIFACTS["events"]))
    df["time"] = pd.to_datetime(df["time"], format="ISO8601")
    return df


def inputs(ev: pd.DataFrame):
    cov = pd.DataFrame({"subject_id": SID, "event_id": ev["event_id"], "status": "covered",
                        "turn_idx": pd.array(range(len(ev)), dtype="Int64")})  # fmt: skip
    turns = pd.DataFrame({
        "subject_id": SID, "visit_idx": ev["visit_idx"], "turn_idx": range(len(ev)),
        "speaker": "clinician", "text": "Noted.", "event_ids": [[e] for e in ev["event_id"]],
    })  # fmt: skip
    cohort = pd.DataFrame({"subject_id": [SID], "disease": ["diabetes"], "tertile": ["low"]})
    return make_inputs(ev, cov, turns, cohort)


@pytest.fixture(scope="module")
def cands() -> pd.DataFrame:
    return t11.generate(inputs(events()))


KIND_CREDITS = {  # cut -> (kind, lab, medication, procedure) credits, module docstring
    "RX-2": ("medication", "0.6771", "1", "0.9271"),
    "LAB-11": ("lab", "1", "0.9375", "0"),
    "RX-3": ("medication", "0", "1", "0"),
    "RX-4": ("medication", "0", "1", "0"),
}
ARG_CREDITS = {  # cut -> argument -> credit
    "RX-2": {"Heparin 5000 UNIT SC": "1", "Insulin 10 UNIT SC": "0.6146"},
    "RX-3": {"Insulin 10 UNIT SC": "1"},
    "RX-4": {"Aspirin 81 mg PO": "1"},
}
NAMES = {"lab test": 1, "medication order": 2, "procedure": 3}


def _expected_gold(options: list[str], credit_of) -> str:
    credits = {chr(65 + i): credit_of(o) for i, o in enumerate(options)}
    letter = next(k for k, v in credits.items() if v == "1")
    rest = [f"{k}={v}" for k, v in sorted(credits.items()) if k != letter and v != "0"]
    return "|".join([letter, *rest])


def test_candidates_by_hand(cands):
    meta = [json.loads(m) for m in cands["meta"]]
    assert {m["visit_idx"] for m in meta} == {1}  # v0 has no history: no question
    cuts = {m["cut_event_id"] for m in meta}
    assert cuts <= set(KIND_CREDITS)
    by = cands["subtype"].value_counts().to_dict()
    assert by == {"next_action": 1, "argument": 1, "discharge": 2}


def test_next_action_gold_by_hand(cands):
    row = cands[cands["subtype"] == "next_action"].iloc[0]
    cut = json.loads(row["meta"])["cut_event_id"]
    options = list(row["options"])
    assert sorted(options) == sorted(NAMES)
    assert row["gold"] == _expected_gold(options, lambda o: KIND_CREDITS[cut][NAMES[o]])
    assert list(row["anchor_event_ids"]) == [cut]


def test_every_cut_by_hand():
    """Every cut's next-action and argument gold, through the generator's own helpers."""
    inp = inputs(events())
    recs = inp.by_visit[(SID, 1)]
    pool = {"medication": {"Lisinopril 10 mg PO", "Atorvastatin 20 mg PO", "Metformin 500 mg PO",
                           "Heparin 5000 UNIT SC", "Insulin 10 UNIT SC", "Aspirin 81 mg PO"},
            "lab": {"Glucose", "Potassium"}}  # fmt: skip
    for cut_id, credits in KIND_CREDITS.items():
        cut = next(r for r in recs if r["event_id"] == cut_id)
        row = t11._next_action(inp, cut, recs, ["lab", "medication", "procedure"], 1)
        assert row["gold"] == _expected_gold(row["options"], lambda o, c=credits: c[NAMES[o]])
        arg = t11._argument(inp, cut, recs, pool, 1)
        if cut_id == "LAB-11":
            assert arg is None  # one lab distractor only
            continue
        assert len(arg["options"]) == 4
        assert arg["gold"] == _expected_gold(
            arg["options"], lambda o, c=ARG_CREDITS[cut_id]: c.get(o, "0")
        )


def test_argument_options_come_from_the_patients_record(cands):
    row = cands[cands["subtype"] == "argument"].iloc[0]
    cut = json.loads(row["meta"])["cut_event_id"]
    record = {"Lisinopril 10 mg PO", "Atorvastatin 20 mg PO", "Metformin 500 mg PO",
              "Heparin 5000 UNIT SC", "Insulin 10 UNIT SC", "Aspirin 81 mg PO"}  # fmt: skip
    assert set(row["options"]) <= record
    assert row["gold"] == _expected_gold(list(row["options"]),
                                         lambda o: ARG_CREDITS[cut].get(o, "0"))  # fmt: skip


def test_discharge_gold_and_balance(cands):
    rows = cands[cands["subtype"] == "discharge"]
    got = {
        json.loads(m)["cut_event_id"]: g for m, g in zip(rows["meta"], rows["gold"], strict=True)
    }
    assert got["RX-4"] == "A"  # yes: 4 h before discharge
    (far,) = set(got) - {"RX-4"}
    assert far in {"RX-2", "LAB-11", "RX-3"} and got[far] == "B"
    assert all(list(o) == ["yes", "no"] for o in rows["options"])


def test_the_stated_stay_ends_before_the_cut(cands):
    for row in cands.to_dict("records"):
        meta = json.loads(row["meta"])
        assert f"It is now {meta['cut_time']}" in row["question"]
        assert t11_leak(row) is None
        stay = row["question"].split("It is now")[0]
        assert "discharge" not in stay and "T2DM" not in stay
    rx2 = cands[cands["meta"].str.contains('"cut_event_id": "RX-2"')]
    for row in rx2.to_dict("records"):
        # the contextual memory: an action–feedback pair per event, stamped with its minute
        assert (
            "2150-02-01 10:00 medication: assistant — orders Metformin 500 mg PO" in row["question"]
        )
        assert (
            "2150-02-01 10:00 medication: user — order placed: Metformin 500 mg PO"
            in row["question"]
        )
        assert "Heparin" not in row["question"].split("It is now")[0]


def test_l3_catches_a_leaking_stay(cands):
    row = cands.iloc[0].to_dict()
    cut = json.loads(row["meta"])["cut_time"]
    leaked = row["question"].replace(
        "It is now", f"{cut} medication: Heparin 5000 UNIT SC\nIt is now"
    )
    assert "not before the cut" in t11_leak({**row, "question": leaked})
    late = row["question"].replace(f"It is now {cut}", "It is now 2150-02-03 11:00")
    assert "cut's minute" in t11_leak({**row, "question": late})


@pytest.mark.parametrize(
    ("drug", "dose", "unit", "route", "told"),
    [
        ("Sodium Chloride 0.9%  Flush", "3", "mL", "IV", "Sodium Chloride 0.9% Flush 3 mL IV"),
        ("Insulin", "0", "UNIT", "SC", "Insulin SC"),  # sliding scale: no dose, no unit
        ("Insulin", "0.0", "UNIT", "SC", "Insulin SC"),
        ("Heparin", "25,000", "UNIT", "IV", "Heparin 25,000 UNIT IV"),
        ("Acetaminophen", "325-650", "mg", "PO", "Acetaminophen 325-650 mg PO"),
        ("Senna", None, None, "PO", "Senna PO"),
    ],
)
def test_l2_tells_an_order_by_the_cohort_rules_read_on_their_own(drug, dose, unit, route, told):
    # the L2 recompute's own reading of issue 26's rules (docs/real-data.md): on the MEDS
    # fixture the generator's collapsed names and dose-0 orders failed 6 of 482 recomputes
    from clinlib.tasks.recompute.t11 import _order_text

    record = {"drug": drug, "dose_val_rx": dose, "dose_unit_rx": unit, "route": route}
    assert _order_text(record) == told


# --------------------------------------------------------------------------- decision edges
# (issue 33 §3, the last mutation round). Credits print rounded half-up to 4 places: 27 min
# is 1 - 27/1440 = 0.98125 exactly -> "0.9813" (half-even would give "0.9812", the 4th digit
# being even). A canonical gold is <letter> then |<letter>=<credit> parts (4 places), the
# credit letters unique, in letter order, none above 1 (1 itself allowed: an action at the
# cut's minute), every letter among the question's options when their count is known; each
# failure has its own reason. ``correct`` = the answered letter's credit is 1. T11's strict
# reading is T7's with the options: a letter followed by another option's text is None.


def test_decay_text_rounds_half_up():
    assert decay(27) * 1440 == 1413  # 1413 / 1440 = 0.98125 exactly
    assert decay_text(decay(27)) == "0.9813"


FORMAT = "not '<letter>' followed by '|<letter>=<credit>' parts"
ORDER = "credit letters repeat or are out of order"


@pytest.mark.parametrize(
    ("gold", "n_options", "reason"),
    [
        ("B|A=0.93", None, FORMAT),  # 2 places, not 4
        (7, None, FORMAT),  # not a string
        ("B|B=0.5000", None, ORDER),  # the gold letter repeated (in order)
        ("B|C=0.5000|A=0.2500", None, ORDER),  # out of order (no repeat)
        ("B|A=1.5000", None, "a credit above 1"),
        ("B|A=1.0000", None, None),  # credit 1: an action at the cut's minute
        ("C", 2, "a letter beyond the 2 options"),
        ("B", 2, None),
    ],
)
def test_gold_decision_problem_names_the_reason(gold, n_options, reason):
    assert gold_decision_problem(gold, n_options) == reason


def test_split_gold_refuses_a_malformed_gold():
    with pytest.raises(ValueError, match=r"^T11 gold 'B\|A=1\.5000': a credit above 1$"):
        split_gold("B|A=1.5000")


def test_correct_means_full_credit():
    from clinlib.tasks.answers import gold_problem, is_correct, parse_strict

    assert is_correct("T11", "B", "B|A=0.9271")  # the gold letter
    assert is_correct("T11", "A", "B|A=1.0000")  # another letter worth 1
    assert not is_correct("T11", "A", "B|A=0.9271")  # partial credit is not correct
    options = ["lab test", "medication order", "procedure"]
    got = score("T11", "B", "B|A=0.9271", options)
    assert (got.correct, got.value) == (True, 1.0)
    # the gold is checked against the question's options
    assert gold_problem("T11", "C", ["yes", "no"]) == "a letter beyond the 2 options"
    assert gold_problem("T11", "B", ["yes", "no"]) is None
    # strict reads the letter with the options
    assert parse_strict("T11", "C. procedure", options) == "C"
    assert parse_strict("T11", "A. procedure", options) is None  # A is "lab test"
