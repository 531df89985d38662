"""Every threshold of the task layer at the value just inside and just outside it, worked out
by hand: the gates' failure rates (L1 < 1 %, L2 < 0.5 %, L0 / L3 none), gate L4's caps
(patient share, disease share, event-type mix, the strata), gate L1's "never measured" T9
branches (events and raw labevents), the trend / T8 / T6 bins in both implementations (the
generators' and the independent recompute), and T8's before / after windows.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pandas as pd
import pytest

from clinlib.data.vocab import INDEX_DISEASES
from clinlib.tasks import gates, recompute, rules
from clinlib.tasks.base import ABSTAIN, TASKS
from clinlib.tasks.gates.common import (
    DETAIL_EXAMPLES,
    _detail,
    _passed,
    gate_rows,
)
from clinlib.tasks.gates.content import MIN_N_FOR_PATIENT_SHARE, leak
from clinlib.tasks.gates.structure import (
    gate_l1,
)
from clinlib.tasks.generators import common
from clinlib.tasks.generators.t8 import before_after
from tests.tasks import test_gates as tg
from tests.tasks.test_gates import world  # noqa: F401 - the hand-built hosp tables

# --------------------------------------------------------------------------- failure rates


@pytest.mark.parametrize(
    ("gate", "n_checked", "n_failed", "passed"),
    [
        ("L1", 100, 1, False),  # 1 / 100 = 1 % exactly: not < 1 %
        ("L1", 101, 1, True),  # 0.99 %
        ("L1", 200, 2, False),
        ("L1", 201, 2, True),
        ("L2", 200, 1, False),  # 0.5 % exactly: not < 0.5 %
        ("L2", 201, 1, True),  # 0.4975 %
        ("L2", 1000, 5, False),
        ("L2", 1001, 5, True),
        ("L0", 10_000, 1, False),  # zero tolerance however large the set
        ("L0", 10_000, 0, True),
        ("L3", 10_000, 1, False),
        ("L3", 1, 0, True),
        ("L1", 0, 0, True),  # a task with no questions has no failure rate
    ],
)
def test_failure_rate_thresholds(gate, n_checked, n_failed, passed):
    assert _passed(gate, n_checked, n_failed) is passed
    fails = [(f"q{i}", "why") for i in range(n_failed)]
    (row,) = gate_rows(gate, {"T1": (n_checked, fails)}, ["T1"])
    assert (row["n_checked"], row["n_failed"], row["passed"]) == (n_checked, n_failed, passed)
    assert row["threshold"] == {"L0": 0, "L1": 0.01, "L2": 0.005, "L3": 0}[gate]


def test_check_gates_blocks_at_the_threshold_not_below_it():
    def table(n_failed: int, n_checked: int) -> pd.DataFrame:
        fails = [(f"T1-{i}", "anchor missing") for i in range(n_failed)]
        rows = gate_rows("L1", {"T1": (n_checked, fails)}, ["T1"])
        return pd.DataFrame(rows).astype(gates.GATE_COLUMNS)

    gates.check_gates(table(1, 101))
    with pytest.raises(gates.GateError, match="L1"):
        gates.check_gates(table(1, 100))


# --------------------------------------------------------------------------- L4


def _l4_frame(task: str, n: int, *, patients=None, diseases=None, anchors=None) -> pd.DataFrame:
    """n questions of ``task`` spread evenly over diseases, tertiles, subtypes and patients
    (one patient each), with the given columns overriding that spread."""
    subtypes = TASKS[task].subtypes
    return pd.DataFrame(
        {
            "task": [task] * n,
            "disease": diseases or [INDEX_DISEASES[i % len(INDEX_DISEASES)] for i in range(n)],
            "tertile": [("low", "medium", "high")[i % 3] for i in range(n)],
            "subtype": [subtypes[i % len(subtypes)] for i in range(n)],
            "subject_ids": [[p] for p in (patients or range(100, 100 + n))],
            "anchor_event_ids": anchors or [["LAB-1"]] * n,
        }
    )


def _l4(df: pd.DataFrame) -> dict:
    (row,) = gates.gate_l4(df, [str(df["task"].iloc[0])])
    return row


def test_l4_evenly_spread_task_passes():
    row = _l4(_l4_frame("T1", 20))
    assert (row["passed"], row["n_failed"], row["detail"]) == (True, 0, "")


@pytest.mark.parametrize(
    ("top", "n", "passed"),
    [
        (2, 20, True),  # 10 % exactly: at the cap
        (3, 20, False),  # 15 %
        (3, 30, True),  # 10 %
        (4, 30, False),  # 13.3 %
        (3, 19, True),  # 15.8 %, but a task under 20 questions is not checked
    ],
)
def test_l4_patient_share_cap(top, n, passed):
    assert gates.MAX_PATIENT_SHARE == 0.10 and MIN_N_FOR_PATIENT_SHARE == 20
    patients = [7] * top + list(range(100, 100 + n - top))
    row = _l4(_l4_frame("T1", n, patients=patients))
    assert row["passed"] is passed
    if passed:
        assert row["detail"] == ""
    else:
        assert row["n_failed"] == 1
        assert row["detail"] == f"patient 7 holds {top / n:.0%}"


@pytest.mark.parametrize(("top", "passed"), [(10, True), (11, False)])
def test_l4_disease_share_cap(top, passed):
    # 4 index diseases: at most twice the uniform share, 2 / 4 = 50 % of 20 = 10 questions
    assert len(INDEX_DISEASES) == 4
    others = [d for d in INDEX_DISEASES if d != "ckd"]
    diseases = ["ckd"] * top + [others[i % 3] for i in range(20 - top)]
    row = _l4(_l4_frame("T1", 20, diseases=diseases))
    assert row["passed"] is passed
    assert row["detail"] == ("" if passed else f"disease ckd holds {top / 20:.0%}")


@pytest.mark.parametrize(
    ("n_med", "passed"),
    [(6, False), (7, True), (13, True), (14, False)],  # T7 medication share 35 %..65 % of 20
)
def test_l4_t7_event_type_mix(n_med, passed):
    anchors = [["RX-1"]] * n_med + [["PX-1-1"]] * (20 - n_med)
    row = _l4(_l4_frame("T7", 20, anchors=anchors))
    assert row["passed"] is passed
    share = f"{n_med / 20:.0%}"
    assert row["detail"] == ("" if passed else f"medication share {share} outside 35%-65%")


@pytest.mark.parametrize(
    ("n_lab", "passed"),
    [(11, False), (12, True), (18, True), (19, False)],  # T9 lab share 60 %..90 % of 20
)
def test_l4_t9_event_type_mix_counts_anchorless_questions_as_labs(n_lab, passed):
    # half the lab questions have no anchor (a lab never measured): they count as labs
    anchors = [["LAB-1"] if i % 2 else [] for i in range(n_lab)] + [["RX-1"]] * (20 - n_lab)
    row = _l4(_l4_frame("T9", 20, anchors=anchors))
    assert row["passed"] is passed
    if not passed:
        assert row["detail"] == f"lab share {n_lab / 20:.0%} outside 60%-90%"


def test_l4_empty_strata_are_checked_only_when_the_task_could_fill_them():
    # T1 has 2 subtypes and 3 tertiles, 4 diseases: with 4 questions every stratum is due
    df = _l4_frame("T1", 4).assign(tertile=["low"] * 4)
    row = _l4(df)
    assert row["detail"] == "tertile medium empty; tertile high empty"
    # 2 questions: fewer than the 4 diseases and the 3 tertiles -> only subtypes are checked
    df = _l4_frame("T1", 2).assign(tertile=["low"] * 2, disease=["ckd"] * 2)
    assert _l4(df)["passed"] is True
    df = df.assign(subtype=["normal"] * 2)
    assert _l4(df)["detail"] == "subtype abnormal empty"


def test_l4_a_task_without_questions_fails_alone():
    df = _l4_frame("T1", 20)
    rows = {r["task"]: r for r in gates.gate_l4(df, ["T1", "T2"])}
    assert rows["T1"]["passed"] is True
    assert (rows["T2"]["passed"], rows["T2"]["detail"]) == (False, "the task has no questions")


# --------------------------------------------------------------------------- L1 never measured

EVENT_COLS = ["event_id", "subject_id", "kind", "code", "time"]


def _t9_unmeasured(date: str = "2150-01-02") -> pd.DataFrame:
    meta = {"subject_id": 1, "lab": "sodium", "date": date}
    return pd.DataFrame(
        [{"qid": "T9-x", "task": "T9", "subtype": "lab-unmeasured", "subject_ids": [1],
          "anchor_event_ids": [], "meta": json.dumps(meta), "gold": ABSTAIN}]
    )  # fmt: skip


def _sodium_event(time: str) -> pd.DataFrame:
    return pd.DataFrame([["LAB-5", 1, "lab", "50983", pd.Timestamp(time)]], columns=EVENT_COLS)


NO_COVERAGE = pd.DataFrame(columns=["event_id", "subject_id", "status"])


@pytest.mark.parametrize(
    ("event_time", "failed"),
    [
        ("2150-01-02 00:00", True),
        ("2150-01-02 23:59:59", True),
        ("2150-01-01 23:59:59", False),
        ("2150-01-03 00:00", False),
    ],
)
def test_l1_never_measured_against_the_events_day(event_time, failed):
    out = gate_l1(_t9_unmeasured(), _sodium_event(event_time), NO_COVERAGE, None)
    n, fails = out["T9"]
    assert n == 1 and len(fails) == int(failed)
    if failed:
        assert fails[0][1] == "never-measured lab sodium has an event on 2150-01-02"


@pytest.mark.parametrize(
    ("raw_days", "reason"),
    [
        (frozenset({(1, "sodium", "2150-01-02")}),
         "never-measured lab sodium has a raw labevents row on 2150-01-02"),
        (frozenset({(1, "sodium", "2150-01-03")}), None),  # another day
        (frozenset({(2, "sodium", "2150-01-02")}), None),  # another patient
        (frozenset({(1, "potassium", "2150-01-02")}), None),  # another lab
        (None, None),  # the raw source was not available: events only
    ],
)  # fmt: skip
def test_l1_never_measured_against_the_raw_labevents(raw_days, reason):
    no_events = pd.DataFrame(columns=EVENT_COLS)
    n, fails = gate_l1(_t9_unmeasured(), no_events, NO_COVERAGE, raw_days)["T9"]
    assert n == 1
    assert [why for _, why in fails] == ([reason] if reason else [])


# --------------------------------------------------------------------------- bins


@pytest.mark.parametrize(
    ("first", "last", "trend", "t8"),
    [
        (100, 104.99, "stable;none", ("similar", "0")),
        (100, 105, "increased;weak", ("increased", "S+")),
        (100, 95.01, "stable;none", ("similar", "0")),
        (100, 95, "decreased;weak", ("decreased", "S-")),
        (100, 114.99, "increased;weak", ("increased", "S+")),
        (100, 115, "increased;moderate", ("increased", "M+")),
        (100, 85.01, "decreased;weak", ("decreased", "S-")),
        (100, 85, "decreased;moderate", ("decreased", "M-")),
        (100, 129.99, "increased;moderate", ("increased", "M+")),
        (100, 130, "increased;strong", ("increased", "L+")),
        (100, 70.01, "decreased;moderate", ("decreased", "M-")),
        (100, 70, "decreased;strong", ("decreased", "L-")),
        (-2, -1.9, "increased;weak", ("increased", "S+")),  # |first| in the denominator
    ],
)
def test_trend_and_t8_bins_in_both_implementations(first, last, trend, t8):
    assert common.trend_label(first, last) == recompute.trend_gold(first, last) == trend
    assert common.t8_label(first, last) == recompute.t8_gold(first, last) == t8


@pytest.mark.parametrize(
    ("a", "b", "gold"),
    [
        (100, 95, "similar"),  # |5| = 5 % of the larger
        (95, 100, "similar"),
        (100, 94.99, "A"),
        (94.99, 100, "B"),
        ("0.20", "0.21", "similar"),  # 0.01 <= 0.05 * 0.21 = 0.0105
        ("0.20", "0.22", "B"),  # 0.02 > 0.011
    ],
)
def test_t6_similarity_band_in_both_implementations(a, b, gold):
    assert common.compare_ab(a, b) == recompute.compare_values(a, b) == gold


def test_t6_counts_are_similar_only_when_equal():
    assert common.compare_ab(20, 20, count=True) == "similar"
    assert common.compare_ab(20, 19, count=True) == "A"  # 5 % apart, but counts are exact
    assert common.compare_ab(19, 20, count=True) == "B"


# --------------------------------------------------------------------------- T8 windows

DAY_US = 86_400_000_000
START = 1_000 * DAY_US


def _series(*offsets_us: int) -> list[dict]:
    return [{"t": START + o, "value": i} for i, o in enumerate(sorted(offsets_us))]


@pytest.mark.parametrize(
    ("offset", "is_before"),
    [
        (0, True),  # at the start counts as before
        (1, False),  # one microsecond after the start does not
        (-rules.T8_MAX_BEFORE_DAYS * DAY_US, True),  # 180 days before: still in the window
        (-rules.T8_MAX_BEFORE_DAYS * DAY_US - 1, False),
    ],
)
def test_t8_before_window(offset, is_before):
    before, _ = before_after(_series(offset), START)
    assert (before is not None) is is_before


@pytest.mark.parametrize(
    ("offset", "is_after"),
    [
        (rules.T8_MIN_AFTER_DAYS * DAY_US, True),  # exactly 7 days later
        (rules.T8_MIN_AFTER_DAYS * DAY_US - 1, False),
        (rules.T8_MAX_AFTER_DAYS * DAY_US, True),  # exactly 365 days later
        (rules.T8_MAX_AFTER_DAYS * DAY_US + 1, False),
    ],
)
def test_t8_after_window(offset, is_after):
    _, after = before_after(_series(offset), START)
    assert (after is not None) is is_after


def test_t8_takes_the_latest_before_and_the_first_after():
    s = _series(-3 * DAY_US, -DAY_US, 7 * DAY_US - 1, 7 * DAY_US, 9 * DAY_US)
    before, after = before_after(s, START)
    assert (before["t"], after["t"]) == (START - DAY_US, START + 7 * DAY_US)


def test_relative_change_is_exact():
    assert common.relative_change("0.1", "0.07") == Fraction(-3, 10)


def test_l1_raw_branch_end_to_end(world):  # noqa: F811 - the fixture of tests/tasks/test_gates.py
    """Through run_gates on the hand-built hosp tables: patient 1's glucose draw of 2150-06-01
    has no hadm_id and falls in no admission window, so it is no event, but the raw
    labevents row exists: "never measured" that day is false and L1 fails the question."""
    meta = {"subject_id": 1, "lab": "glucose", "date": "2150-06-01"}
    rows = tg.replace(tg.good_rows(), "T9-t9b", meta=json.dumps(meta))
    ev = world["events"]
    assert not ((ev["subject_id"] == 1) & (ev["time"].astype(str).str[:10] == "2150-06-01")).any()
    row = tg.cell(tg.run(world, rows), "L1", "T9")
    assert (row["n_failed"], row["passed"]) == (1, False)
    assert row["detail"] == (
        "T9-t9b: never-measured lab glucose has a raw labevents row on 2150-06-01"
    )


@pytest.mark.parametrize(
    ("first", "last", "expected"),
    [
        (100, 104.99, (0, "none")),
        (100, 95.01, (0, "none")),
        (100, 105, (1, "weak")),
        (100, 95, (-1, "weak")),
        (100, 115, (1, "moderate")),
        (100, 70, (-1, "strong")),
    ],
)
def test_change_bin_returns_a_unit_sign_and_its_bin(first, last, expected):
    # the recompute's contract: sign in {-1, 0, 1}, "none" only in the stable band
    assert recompute.change_bin(first, last) == expected


def test_change_bin_refuses_a_zero_first_value_by_name():
    with pytest.raises(
        ZeroDivisionError, match="^first value is 0: the relative change is undefined$"
    ):
        recompute.change_bin(0, 1)


# --------------------------------------------------------------------------- L1 anchors
# (survivors of bench-mutation's gates group: the anchor statuses each task allows, the
# anchorless subtypes and the reasons L1 prints)

COVERAGE = pd.DataFrame({"event_id": ["E1", "E2"], "subject_id": [1, 1],
                         "status": ["covered", "missed"]})  # fmt: skip


def _anchored(task: str, anchors: list[str], subtype: str = "x", sids=(1,)) -> pd.DataFrame:
    return pd.DataFrame([{"qid": f"{task}-q", "task": task, "subtype": subtype,
                          "subject_ids": list(sids), "anchor_event_ids": anchors,
                          "meta": "{}", "gold": "g"}])  # fmt: skip


@pytest.mark.parametrize(
    ("task", "anchors", "subtype", "reason"),
    [
        ("T1", ["E1"], "x", None),  # covered: what T1-T8 need
        ("T1", ["E2"], "x", "anchor E2 is missed, not covered"),
        ("T9", ["E2"], "x", None),  # T9 asks about what the dialogue missed
        ("T9", ["E1"], "x", "anchor E1 is covered, not missed"),
        ("T10", ["E1", "E2"], "x", None),  # T10 orders covered and missed events alike
        ("T1", ["E9"], "x", "anchor E9 is absent, not covered"),
        ("T10", ["E9"], "x", "anchor E9 is absent, not covered or missed"),
        ("T1", [], "x", "no anchor event"),
        ("T5", [], "controlled_control", None),  # the one anchorless subtype
        ("T5", [], "x", "no anchor event"),
        ("T9", [], "x", "T9 question without anchors lacks meta subject_id / lab / date"),
    ],
)
def test_l1_anchor_status_per_task(task, anchors, subtype, reason):
    n, fails = gate_l1(_anchored(task, anchors, subtype), _sodium_event("2150-01-01"),
                       COVERAGE, None)[task]  # fmt: skip
    assert n == 1 and fails == ([] if reason is None else [(f"{task}-q", reason)])


def test_l1_anchor_of_another_patient():
    n, fails = gate_l1(_anchored("T1", ["E1"], sids=(2,)), _sodium_event("2150-01-01"),
                       COVERAGE, None)["T1"]  # fmt: skip
    assert fails == [("T1-q", "anchor E1 belongs to subject 1, not [2]")]


# --------------------------------------------------------------------------- L3 injected text
SENTENCE = "Physician suspects early heart failure."


@pytest.mark.parametrize(
    ("injection", "stem", "leaks"),
    [
        (json.dumps([{"text": SENTENCE}]), f"Does the record say '{SENTENCE.upper()}'?", True),
        (json.dumps({"text": SENTENCE}), f"Is '{SENTENCE}' consistent?", True),  # one object
        (json.dumps([{"text": "Other."}, {"text": SENTENCE}]), f"Was {SENTENCE}", True),
        (json.dumps([{"text": SENTENCE}]), "Is heart failure consistent with the codes?", False),
        (json.dumps([{"note": SENTENCE}, "x", {"text": ""}]), f"Was {SENTENCE}", False),
        (None, f"Was {SENTENCE}", False),
        ("  ", f"Was {SENTENCE}", False),
    ],
)
@pytest.mark.parametrize("task", ["T3", "T5"])
def test_l3_stem_quoting_the_injected_sentence(task, injection, stem, leaks):
    row = {"task": task, "gold": "yes", "question": stem, "injection": injection}
    assert leak(row) == ("the stem quotes the injected sentence" if leaks else None)


# --------------------------------------------------------------------------- report rows
def test_a_task_without_questions_is_checked_zero_times():
    (row,) = gate_rows("L1", {}, ["T4"])
    assert (row["n_checked"], row["n_failed"], row["passed"], row["detail"]) == (0, 0, True, "")


def test_detail_shows_three_examples_then_counts_the_rest():
    assert DETAIL_EXAMPLES == 3
    three = [(f"q{i}", "bad") for i in range(3)]
    assert _detail(three) == "q0: bad; q1: bad; q2: bad"  # exactly three: no "more"
    assert _detail([*three, ("q3", "bad"), ("q4", "bad")]) == "q0: bad; q1: bad; q2: bad (+2 more)"
    assert _detail(three[:1], extra="n=5") == "n=5 | q0: bad"
    assert _detail([], extra="n=5") == "n=5"


def test_l1_never_measured_ignores_lab_codes_outside_the_panel():
    # a non-numeric code and an item id outside the panel on the same day are not sodium
    events = pd.DataFrame(
        [["LAB-6", 1, "lab", "LOINC-2951-2", pd.Timestamp("2150-01-02 08:00")],
         ["LAB-7", 1, "lab", "99999999", pd.Timestamp("2150-01-02 09:00")]],
        columns=EVENT_COLS,
    )  # fmt: skip
    n, fails = gate_l1(_t9_unmeasured(), events, NO_COVERAGE, None)["T9"]
    assert (n, fails) == (1, [])
