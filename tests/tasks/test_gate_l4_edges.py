"""Gate L4 (distribution) at every threshold, just inside and just outside (issue 33 §1, §3:
the gates group's L4 survivors). Frames are built by hand; every expected share, count and
message is worked out in the comments from clinlib.tasks.gates.content:

- binary tasks (T3, T5), judged from MIN_N_BINARY = 10 questions: HARD when the rarer gold
  holds under MIN_MINORITY_SHARE = 4 % (strictly) or one subtype over MAX_SUBTYPE_SHARE = 75 %
  (strictly);
- soft checks: every disease / tertile / expected subtype present (when n >= the number of
  strata), no disease above 2 / 4 = 50 %, from MIN_N_FOR_PATIENT_SHARE = 20 questions no
  patient above MAX_PATIENT_SHARE = 10 %, T7's medication share within [35 %, 65 %].
"""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.tasks import gates
from clinlib.tasks.gates.content import binary_collapse, gate_l4

DISEASES = ("diabetes", "hypertension", "ckd", "cad")
TERTILES = ("low", "medium", "high")


def questions(task: str, n: int, **cols) -> pd.DataFrame:
    """``n`` questions of ``task`` spread evenly over diseases, tertiles and patients (patient
    100 + i), T1 subtypes alternating; ``cols`` override whole columns (lists of length n)."""
    base = {
        "task": [task] * n,
        "disease": [DISEASES[i % 4] for i in range(n)],
        "tertile": [TERTILES[i % 3] for i in range(n)],
        "subtype": ["abnormal" if i % 2 else "normal" for i in range(n)],
        "subject_ids": [[100 + i] for i in range(n)],
        "anchor_event_ids": [[f"LAB-{i}"] for i in range(n)],
        "gold": ["yes"] * n,
    }
    base.update(cols)
    return pd.DataFrame(base)


def binary(n_yes: int, n_no: int, subtypes: list[str] | None = None) -> pd.DataFrame:
    n = n_yes + n_no
    subs = subtypes or [f"s{i % 5}" for i in range(n)]
    return questions("T5", n, gold=["yes"] * n_yes + ["no"] * n_no, subtype=subs)


# --------------------------------------------------------------------------- binary collapse


def test_minority_share_at_four_percent():
    # 1 "no" in 25 = 4.0 %: not under 4 %; 1 in 26 = 3.85 %: collapsed
    assert binary_collapse(binary(24, 1)) == []
    assert binary_collapse(binary(25, 1)) == [
        "gold balance collapsed: 'yes' holds 25 of 26 (the other answer 1 < 4%; a constant "
        "answer would score high)"
    ]
    # the minority may be "yes"; golds are read stripped and lower-cased
    q = binary(1, 25)
    assert binary_collapse(q)[0].startswith("gold balance collapsed: 'no' holds 25 of 26 ")
    q["gold"] = [" Yes "] + [" NO"] * 24 + ["No"]
    assert binary_collapse(q)[0].startswith("gold balance collapsed: 'no' holds 25 of 26 ")
    q["gold"] = ["Yes"] * 2 + ["no"] * 24  # 2 / 26 = 7.7 %
    assert binary_collapse(q) == []


def test_a_gold_that_never_occurs_counts_zero():
    # all "no": "yes" holds 0 of 26
    assert binary_collapse(binary(0, 26)) == [
        "gold balance collapsed: 'no' holds 26 of 26 (the other answer 0 < 4%; a constant "
        "answer would score high)"
    ]


def test_judged_from_ten_questions():
    # 10 questions, all "yes" and one subtype: both hard checks fail; 9: not judged
    assert [m.split(":")[0] for m in binary_collapse(binary(10, 0, ["s"] * 10))] == [
        "gold balance collapsed",
        "subtype coverage collapsed",
    ]
    assert binary_collapse(binary(9, 0, ["s"] * 9)) == []


def test_subtype_share_at_seventy_five_percent():
    # 15 of 20 = 75 %: holds; 16 of 20 = 80 %: collapsed
    assert binary_collapse(binary(10, 10, ["a"] * 15 + ["b"] * 5)) == []
    assert binary_collapse(binary(10, 10, ["a"] * 16 + ["b"] * 4)) == [
        "subtype coverage collapsed: a holds 16 of 20 (> 75%)"
    ]


def test_a_binary_row_is_hard_and_counts_its_two_checks():
    (row,) = gate_l4(binary(25, 1), ["T5"])
    # soft checks on 26 questions: 4 diseases + top disease + 3 tertiles + 5 T5 subtypes
    # (s0..s4 are not T5's: all 5 empty) + patient share = 14, plus the 2 binary checks
    assert row["n_checked"] == 16
    assert (row["severity"], row["passed"]) == ("hard", False)
    assert row["n_failed"] == 6  # gold balance + the 5 expected subtypes empty
    assert row["detail"].startswith("gold balance collapsed: 'yes' holds 25 of 26")
    assert row["detail"].endswith(" (+3 more)")  # 6 failures, 3 shown
    (row,) = gate_l4(binary(9, 0), ["T5"])  # under 10: no binary checks, soft
    assert row["severity"] == "soft" and row["n_checked"] == 13  # 4 + 1 + 3 + 5, no patient


# --------------------------------------------------------------------------- soft checks


def test_no_questions():
    (row,) = gate_l4(questions("T1", 0), ["T1"])
    assert (row["n_checked"], row["n_failed"], row["passed"]) == (1, 1, False)
    assert (row["severity"], row["detail"]) == ("soft", "the task has no questions")


def test_an_even_task_passes_every_check():
    (row,) = gate_l4(questions("T1", 20), ["T1"])
    # 4 disease + top disease + 3 tertile + 2 subtype + patient = 11 checks
    assert (row["n_checked"], row["n_failed"], row["passed"]) == (11, 0, True)
    assert row["detail"] == "" and row["threshold"] == 0.0
    (row,) = gate_l4(questions("T1", 19), ["T1"])
    assert row["n_checked"] == 10  # under 20 questions: no patient share


def test_patient_share_at_ten_percent():
    ids = [[100 + i] for i in range(20)]
    two = ids[:18] + [[7], [7]]  # patient 7: 2 of 20 = 10 %
    (row,) = gate_l4(questions("T1", 20, subject_ids=two), ["T1"])
    assert row["passed"]
    three = ids[:17] + [[7], [7], [7]]  # 3 of 20 = 15 %
    (row,) = gate_l4(questions("T1", 20, subject_ids=three), ["T1"])
    assert (row["passed"], row["detail"]) == (False, "patient 7 holds 15%")


def test_disease_share_at_half():
    ten = ["diabetes"] * 10 + ["hypertension", "ckd", "cad"] * 3 + ["cad"]  # 10 of 20
    (row,) = gate_l4(questions("T1", 20, disease=ten), ["T1"])
    assert row["passed"]
    eleven = ["diabetes"] * 11 + ["hypertension", "ckd", "cad"] * 3  # 11 of 20 = 55 %
    (row,) = gate_l4(questions("T1", 20, disease=eleven), ["T1"])
    assert (row["passed"], row["detail"]) == (False, "disease diabetes holds 55%")


def test_disease_share_is_judged_from_four_questions():
    # 4 questions (= the 4 diseases): 3 diabetes = 75 % > 50 %; 3 questions: not judged
    (row,) = gate_l4(questions("T1", 4, disease=["diabetes"] * 3 + ["ckd"]), ["T1"])
    assert row["n_checked"] == 10  # 4 disease + top disease + 3 tertile + 2 subtype
    assert row["detail"] == (
        "disease hypertension empty; disease cad empty; disease diabetes holds 75%"
    )
    (row,) = gate_l4(questions("T1", 3, disease=["diabetes"] * 3), ["T1"])
    assert row["n_checked"] == 5 and row["passed"]  # 3 tertile + 2 subtype


def test_empty_strata_are_named_only_when_the_task_could_fill_them():
    (row,) = gate_l4(questions("T1", 20, tertile=["low"] * 20), ["T1"])
    assert row["detail"] == "tertile medium empty; tertile high empty"
    (row,) = gate_l4(questions("T1", 2, tertile=["low"] * 2), ["T1"])  # 2 < 3 tertiles
    assert row["passed"] and row["n_checked"] == 2  # only the 2 subtypes


@pytest.mark.parametrize(
    ("n_rx", "passed"), [(6, False), (7, True), (13, True), (14, False)]
)  # of 20: 30 %, 35 %, 65 %, 70 %
def test_t7_medication_share_bounds_are_inclusive(n_rx, passed):
    anchors = [[f"RX-{i}"] for i in range(n_rx)] + [[f"PX-{i}-1"] for i in range(20 - n_rx)]
    subs = ["medication"] * n_rx + ["procedure"] * (20 - n_rx)
    (row,) = gate_l4(questions("T7", 20, anchor_event_ids=anchors, subtype=subs), ["T7"])
    assert row["passed"] is passed
    if not passed:
        assert row["detail"] == f"medication share {n_rx / 20:.0%} outside 35%-65%"


def test_check_gates_refuses_only_the_hard_l4_row():
    soft = gate_l4(questions("T1", 0), ["T1"])
    gates.check_gates(pd.DataFrame(soft))  # a soft failure is reported, never refused
    hard = gate_l4(binary(25, 1), ["T5"])
    with pytest.raises(gates.GateError, match="gold balance collapsed"):
        gates.check_gates(pd.DataFrame(hard))


# --------------------------------------------------------------------------- last round
# (the L4 survivors the previous round left: each case below fails on its mutant; the
# "(+N more)" at exactly 3 failures is already pinned by
# test_disease_share_is_judged_from_four_questions, whose detail has exactly 3)

T5_SUBTYPES = (
    "controlled_dx_presence",
    "controlled_procedure",
    "controlled_lab_value",
    "controlled_control",
    "natural_c2_lab_non_glucose",
)


def test_the_two_binary_checks_are_counted_from_exactly_ten_questions():
    # 10 T5 questions, 9 "yes" + 1 "no" (10 % >= 4 %), T5's 5 subtypes twice each (20 %):
    # soft checks = 4 disease + top disease (30 %) + 3 tertile + 5 subtype = 13 (no patient
    # share under 20 questions), plus the 2 binary checks = 15; none fails
    (row,) = gate_l4(binary(9, 1, list(T5_SUBTYPES) * 2), ["T5"])
    assert (row["n_checked"], row["n_failed"], row["passed"]) == (15, 0, True)
    assert (row["severity"], row["detail"]) == ("soft", "")


def test_a_question_without_patient_counts_as_patient_zero():
    # 17 distinct patients, then 3 questions whose subject_ids is empty / None: patient 0
    # holds 3 of 20 = 15 % > 10 %
    ids = [[100 + i] for i in range(17)] + [[], None, []]
    (row,) = gate_l4(questions("T1", 20, subject_ids=ids), ["T1"])
    assert (row["passed"], row["detail"]) == (False, "patient 0 holds 15%")


def test_a_task_outside_the_registry_expects_no_subtypes():
    # "TX" is not in TASKS: 4 disease + top disease + 3 tertile + patient = 9 checks, no
    # subtype stratum (its subtypes "normal" / "abnormal" are not judged)
    (row,) = gate_l4(questions("TX", 20), ["TX"])
    assert (row["n_checked"], row["n_failed"], row["passed"]) == (9, 0, True)
