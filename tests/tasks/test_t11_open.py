"""T11O, the open-ended next action and argument (clinlib.tasks.generators.t11, its
``OPEN_SPEC``; scoring beside it): the seed's time-decay credit read from a
free-text answer, worked by hand; a hedge or a vaguer name earns nothing; gate L2 recomputes
the quick set from the raw tables and catches a tampered credit; the offline reader answers
by its documented habits."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinlib.data.build import SourceSpec, load, open_source, read_source_info
from clinlib.eval.readers.decision import answer_open
from clinlib.tasks.gates import gate_l2
from clinlib.tasks.generators.t11 import OPEN_DECISION, open_gold_problem, open_score
from clinlib.tasks.recompute import load_raw

KIND_GOLD = "lab test|medication order=0.7500"
ARG_GOLD = "Heparin|Insulin=0.5000|Insulin Glargine=0.2500"


def test_open_score_by_hand():
    assert open_score("lab test", KIND_GOLD) == 1.0
    assert open_score("Draw labs.", KIND_GOLD) == 1.0
    assert open_score("a medication", KIND_GOLD) == 0.75  # credited: within 24 h, decayed
    assert open_score("procedure", KIND_GOLD) == 0.0
    assert open_score("lab test or medication", KIND_GOLD) == 0.0  # a hedge names two kinds
    assert open_score("Heparin 5000 UNIT SC", ARG_GOLD) == 1.0
    assert open_score("Insulin Glargine 10 UNIT", ARG_GOLD) == 0.25  # the longest entry
    assert open_score("Insulin", ARG_GOLD) == 0.5
    assert open_score("Hep", ARG_GOLD) == 0.0  # not the drug's name
    assert open_score(None, ARG_GOLD) == 0.0
    assert OPEN_DECISION.is_correct("heparin", ARG_GOLD)
    assert not OPEN_DECISION.is_correct("insulin", ARG_GOLD)


def test_open_gold_problems():
    assert open_gold_problem(ARG_GOLD) is None
    assert open_gold_problem("Heparin|Insulin=1.5000") == "a credit above 1"
    assert open_gold_problem("Heparin|Insulin") is not None
    assert open_gold_problem(3) is not None


@pytest.fixture(scope="module")
def t11o(quick_temporal):
    ext = load("temporal_questions", "quick")
    return ext[ext["task"] == "T11O"].reset_index(drop=True)


def test_l2_recomputes_the_open_set_and_catches_a_tampered_credit(t11o):
    assert len(t11o) == 16 and set(t11o["subtype"]) == {"next_action", "argument"}
    assert all(q.endswith("insufficient information.") for q in t11o["question"])
    assert "\nA. " not in "".join(t11o["question"])  # no options: open-ended
    info = read_source_info("quick")
    con = open_source(SourceSpec(info["kind"], Path(info["path"]), bool(info["credentialed"])))
    try:
        raw = load_raw(con, {int(s) for ids in t11o["subject_ids"] for s in ids})
    finally:
        con.close()
    cov = load("event_coverage", "quick")
    checked, fails = gate_l2(t11o, raw, cov)["T11O"]
    assert checked == len(t11o) and fails == []
    bad = t11o.assign(gold=t11o["gold"].map(lambda g: g + "|Made Up Drug=0.5000"))
    assert len(gate_l2(bad, raw, cov)["T11O"][1]) == len(t11o)


STAY = (
    "The patient is in hospital. The current stay so far, in time order:\n"
    "2150-02-01 08:00 admission: assistant — admits the patient (URGENT)\n"
    "2150-02-01 08:00 admission: user — the patient is admitted\n"
    "2150-02-01 09:00 lab: assistant — draws Sodium; Potassium\n"
    "2150-02-01 09:00 lab: user — Sodium 140 mEq/L; Potassium 5.9 mEq/L (abnormal)\n"
    "2150-02-01 10:00 medication: assistant — orders Heparin 5000 UNIT SC\n"
    "2150-02-01 10:00 medication: user — order placed: Heparin 5000 UNIT SC\n"
)


def test_reader_habits_on_open_questions():
    nxt = STAY + "It is now 2150-02-01 11:00. Given this stay, which kind of action comes next?"
    assert answer_open("", nxt) == "medication order"
    arg = STAY + "It is now 2150-02-01 11:00, and the next action is a lab test. Given this stay"
    assert answer_open("", arg) == "Sodium"
    none = arg.replace("lab test", "procedure")
    assert answer_open("", none) == "insufficient information"
    assert answer_open("", none, eager=True) == "Potassium"
