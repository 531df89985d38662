"""The gates' driver and report (clinlib/tasks/gates/run.py) and T10 / T11's L3 checks
(clinlib/tasks/gates/ordering.py) at their edges (issue 33 §3: the functions the mutation
group `gates` never mutated before). Every expected value below is written out by hand.

The run_gates cases use tests/tasks/test_gates.py's hand-built hosp world and its ten
hand-checked questions (one per task, T9 twice), which pass every hard gate.
"""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import pytest

import clinlib.tasks.gates.run as gate_run
from clinlib.data.schema import HOSP_TABLES
from clinlib.tasks import gates
from clinlib.tasks.gates.ordering import order_stem, t10_leak, t11_leak
from clinlib.tasks.gates.run import _frame, _threshold_text, _zero_tolerance_exclusions
from clinlib.tasks.gates.structure import EXCLUDED_PREFIX
from tests.tasks.test_gates import cell, frame, good_rows, run, world  # noqa: F401 - the fixture

# --------------------------------------------------------------------------- T10 (ordering.py)

SORT_ITEMS = [
    "Admission type: EW EMER. Creatinine 1.9 mg/dL, abnormal.",
    "Admission type: ELECTIVE. Insulin was started.",
    "Glucose 180 mg/dL; discharged home.",
]


def sorting_row(**changes) -> dict:
    """A visit_sorting question whose clips state no date, time or ordinal; gold B, A, C."""
    items = changes.pop("options", SORT_ITEMS)
    question = "Put the visits in order.\n" + "\n".join(
        f"{'ABC'[i]}. {o}" for i, o in enumerate(SORT_ITEMS)
    )
    row = {"qid": "T10-s", "task": "T10", "subtype": "visit_sorting", "gold": "B,A,C",
           "options": items, "question": question}  # fmt: skip
    return {**row, **changes}


def test_order_stem_replaces_each_item_line_by_one_space():
    text = "Visit:\nA. one\nB. two\nK. not an item\nA.glued\nEnd A. inline"
    assert order_stem(text) == "Visit:\n \n \nK. not an item\nA.glued\nEnd A. inline"


def test_t10_clean_sorting_question_passes_in_any_container():
    assert t10_leak(sorting_row()) is None
    assert t10_leak(sorting_row(options=tuple(SORT_ITEMS))) is None
    assert t10_leak(sorting_row(options=np.array(SORT_ITEMS, dtype=object))) is None


def test_t10_items_shown_in_gold_order_leak_for_every_subtype():
    why = "the items are shown in their gold order"
    assert t10_leak(sorting_row(gold="A,B,C")) == why
    assert t10_leak(sorting_row(gold="A,B,C", subtype="visit_cloze")) == why
    assert t10_leak(sorting_row(gold="A,C,B")) is None
    # the gold is compared with the first len(items) letters: "A,B" is not three in order
    assert t10_leak(sorting_row(gold="A,B")) is None
    # an ndarray of items (a parquet round trip) counts its items too
    assert t10_leak(sorting_row(gold="A,B,C", options=np.array(SORT_ITEMS))) == why


def test_t10_first_leaking_clip_is_named_with_its_letter():
    items = [SORT_ITEMS[0], "Seen again on 3/14 for Insulin.", "Glucose 180 mg/dL in 2151."]
    assert t10_leak(sorting_row(options=items)) == "clip B states a numeric date '3/14'"
    items = [SORT_ITEMS[0], SORT_ITEMS[1], "The second admission: Glucose 180 mg/dL."]
    assert t10_leak(sorting_row(options=items)) == (
        "clip C states a visit ordinal 'second admission'"
    )


def test_t10_without_items_checks_nothing():
    # no items: nothing can leak, nothing to compare with a non-empty gold
    assert t10_leak(sorting_row(options=None)) is None
    assert t10_leak(sorting_row(options="A. not a list")) is None


CLOZE_ITEMS = [
    "2150-01-02 14:00 lab: Creatinine 1.9 mg/dL (abnormal)",
    "2150-01-01 12:00 medication: MetFORMIN (Glucophage)",
]


def cloze_row(body: str, items=CLOZE_ITEMS, gold="B,A") -> dict:
    """A visit_cloze question: the visit text, then the removed events as item lines."""
    lines = "\n".join(f"{'AB'[i]}. {str(o).strip()}" for i, o in enumerate(items))
    return {"qid": "T10-c", "task": "T10", "subtype": "visit_cloze", "gold": gold,
            "options": list(items), "question": f"{body}\nWhich order?\n{lines}"}  # fmt: skip


BODY = "Visit of 2150-01-01:\n2150-01-01 10:00 lab: Glucose 200 mg/dL (abnormal)"


def test_t10_cloze_items_may_state_their_time_and_appear_as_item_lines():
    # the items are timestamped lines (clip_leak would call them dates: the cloze subtype is
    # not checked clip by clip) and each is in the question as its own "A. ..." line
    assert t10_leak(cloze_row(BODY)) is None


def test_t10_cloze_item_left_in_the_visit_text_leaks():
    body = BODY + "\n" + CLOZE_ITEMS[1]
    assert t10_leak(cloze_row(body)) == "removed event B is still in the visit text"
    # compared stripped: an item padded with spaces is still found at the end of a line
    padded = [CLOZE_ITEMS[0], "  " + CLOZE_ITEMS[1] + "  "]
    assert t10_leak(cloze_row(body, items=padded)) == "removed event B is still in the visit text"


def test_t10_blank_cloze_item_is_never_found_in_the_text():
    assert t10_leak(cloze_row(BODY, items=[CLOZE_ITEMS[0], "   "])) is None


def test_t10_missing_question_reads_as_an_empty_visit():
    row = {**cloze_row(BODY), "question": None}
    assert t10_leak(row) is None
    # an empty text holds no item, whatever the item says
    assert t10_leak({**row, "options": ["XX", "None"]}) is None


# --------------------------------------------------------------------------- T11 (ordering.py)

CUT = "2150-02-01 10:00"
STAY = "Stay so far:\n2150-01-31 09:00 admission: EW EMER.\n2150-02-01 09:59 lab: Glucose 180 mg/dL"


def t11_row(question: str, meta=None) -> dict:
    meta = json.dumps({"cut_time": CUT}) if meta is None else meta
    return {"qid": "T11-a", "task": "T11", "meta": meta, "question": question}


def test_t11_stay_before_the_cut_passes():
    assert t11_leak(t11_row(f"{STAY}\nIt is now {CUT}. What comes next?")) is None


def test_t11_a_line_at_the_cut_minute_leaks():
    q = f"{STAY}\n2150-02-01 10:00 medication: Heparin 5000 UNIT SC\nIt is now {CUT}."
    assert t11_leak(t11_row(q)) == (
        "the stated stay holds a medication line at 2150-02-01 10:00, "
        "not before the cut 2150-02-01 10:00"
    )


def test_t11_the_discharge_before_the_cut_leaks_and_a_late_one_is_a_late_line():
    q = f"{STAY}\n2150-02-01 09:59 discharge: home\nIt is now {CUT}."
    assert t11_leak(t11_row(q)) == "the stated stay holds the discharge"
    q = f"{STAY}\n2150-02-02 11:00 discharge: home\nIt is now {CUT}."
    assert t11_leak(t11_row(q)) == (
        "the stated stay holds a discharge line at 2150-02-02 11:00, "
        "not before the cut 2150-02-01 10:00"
    )


def test_t11_now_must_state_the_cut_minute():
    why = "the stem does not state the cut's minute 2150-02-01 10:00 as now"
    assert t11_leak(t11_row(f"{STAY}\nIt is now 2150-02-01 09:59.")) == why
    assert t11_leak(t11_row(f"{STAY}\nWhat comes next?")) == why
    assert t11_leak(t11_row(None)) == why


@pytest.mark.parametrize("meta", ["{}", "not json", "[1, 2]", "null", json.dumps({"cut": CUT})])
def test_t11_meta_without_cut_time(meta):
    assert t11_leak(t11_row(f"{STAY}\nIt is now {CUT}.", meta=meta)) == "meta lacks cut_time"


def test_t11_missing_meta_lacks_cut_time():
    row = {**t11_row(f"{STAY}\nIt is now {CUT}."), "meta": None}
    assert t11_leak(row) == "meta lacks cut_time"


# --------------------------------------------------------------------------- run.py helpers


def test_threshold_text():
    assert _threshold_text(0.0) == "0 failures allowed"
    assert _threshold_text(0.01) == "threshold < 1.0%"
    assert _threshold_text(0.005) == "threshold < 0.5%"


def test_zero_tolerance_fails_only_rows_with_excluded_sources():
    bad = f"{EXCLUDED_PREFIX}: hadm:102 (discharge_before_admission)"
    rows = [
        {"task": "T1", "passed": True, "detail": "T1-a: x"},
        {"task": "T2", "passed": True, "detail": "T2-q: anchor LAB-1 is not covered"},
        {"task": "T9", "passed": True, "detail": ""},
    ]
    l1 = {
        "T1": (300, [("T1-a", bad), ("T1-b", "anchor LAB-1 is not covered"),
                     ("T1-c", f"{EXCLUDED_PREFIX}: LAB-7 (value_out_of_bounds)")]),
        "T2": (5, [("T2-q", "anchor LAB-1 is not covered")]),
    }  # fmt: skip
    out = _zero_tolerance_exclusions(rows, l1)
    assert out == [
        {"task": "T1", "passed": False,
         "detail": "2 built on excluded source rows (0 allowed) | T1-a: x"},
        {"task": "T2", "passed": True, "detail": "T2-q: anchor LAB-1 is not covered"},
        {"task": "T9", "passed": True, "detail": ""},
    ]  # fmt: skip


def test_frame_keeps_the_gate_columns_in_order_with_their_dtypes():
    empty = _frame([])
    assert list(empty.columns) == list(gates.GATE_COLUMNS) and empty.empty
    row = {"detail": "d", "passed": True, "gate": "L0", "task": "T1", "n_checked": 2,
           "n_failed": 0, "threshold": 0, "severity": "hard", "extra": 1}  # fmt: skip
    df = _frame([row])
    assert list(df.columns) == list(gates.GATE_COLUMNS)
    assert {c: str(t) for c, t in df.dtypes.items()} == {
        "gate": "string", "task": "string", "n_checked": "int64", "n_failed": "int64",
        "threshold": "float64", "passed": "bool", "severity": "string", "detail": "string",
    }  # fmt: skip


def table(rows: list[tuple]) -> pd.DataFrame:
    cols = ["gate", "task", "n_checked", "n_failed", "threshold", "passed", "severity", "detail"]
    return pd.DataFrame(rows, columns=cols)


MIXED = [
    ("L0", "T1", 10, 0, 0.0, True, "hard", ""),
    ("L1", "T2", 200, 1, 0.01, True, "hard", "T2-a: anchor LAB-1 is not covered"),
    ("L2", "T3", 4, 1, 0.005, False, "hard", "T3-b: gold 'yes' but recomputed 'no'"),
    ("L4", "T7", 1, 1, 0.0, False, "soft", "medication share 100% outside 35%-65%"),
    ("question_shortfalls", "T5", 30, 2, 0.0, False, "soft", ""),
]


def test_failed_hard_takes_hard_rows_that_did_not_pass():
    got = gates.failed_hard(table(MIXED))
    assert got[["gate", "task"]].values.tolist() == [["L2", "T3"]]
    # passed as objects (a frame built by hand from mixed values) reads the same
    obj = table(MIXED).astype({"passed": object})
    assert gates.failed_hard(obj)[["gate", "task"]].values.tolist() == [["L2", "T3"]]


def test_check_gates_names_every_failed_hard_row():
    rows = [*MIXED, ("L3", "T7", 5, 2, 0.0, False, "hard", "T7-a: x; T7-b: y"),
            ("question_shortfalls", "T6", 3, 3, 0.0, False, "hard", "short")]  # fmt: skip
    with pytest.raises(gates.GateError) as err:
        gates.check_gates(table(rows))
    assert str(err.value) == (
        "3 hard validation gate(s) failed; the question set must not be used:\n"
        "  L2 gold recompute / T3: 1 of 4 failed (threshold < 0.5%): "
        "T3-b: gold 'yes' but recomputed 'no'\n"
        "  L3 no gold leakage / T7: 2 of 5 failed (0 failures allowed): T7-a: x; T7-b: y\n"
        "  question_shortfalls  / T6: 3 of 3 failed (0 failures allowed): short"
    )
    assert gates.check_gates(table([r for r in MIXED if r[0] != "L2"])) is None


def test_gate_report_by_hand():
    expected = [
        # gate: 26 wide, task: 6, checked / failed: 8 right-aligned, 2 spaces, rule: 20
        "gate                      task   checked  failed  rule                result",
        "L0 schema                 T1          10       0  0 failures allowed  PASS",
        "L1 anchor source          T2         200       1  threshold < 1.0%    PASS",
        "L2 gold recompute         T3           4       1  threshold < 0.5%    FAIL",
        "        -> T3-b: gold 'yes' but recomputed 'no'",
        "L4 distribution coverage  T7           1       1  0 failures allowed  WARN",
        "        -> medication share 100% outside 35%-65%",
        "question_shortfalls       T5          30       2  0 failures allowed  WARN",
        "hard failures: 1; soft warnings: 2",
    ]
    assert gates.gate_report(table(MIXED)).split("\n") == expected
    no_hard = [r for r in MIXED if r[2] != 4]
    assert gates.gate_report(table(no_hard)).split("\n")[-1] == (
        "hard failures: 0; soft warnings: 2 — the set passes L0–L3"
    )


# --------------------------------------------------------------------------- run_gates


def test_missing_columns_fail_every_gate_without_reading_inputs():
    rows = [r for r in good_rows() if r["task"] in ("T1", "T9")]
    rows.append({**rows[0], "qid": "T10-x", "task": "T10"})
    df = frame(rows).drop(columns=["meta", "options"])
    # no events, coverage or connection: a set without its columns is not checked further
    g = gates.run_gates(df, tasks=["T9", "T1"])
    got = g.to_dict("records")
    want = []
    for gate, threshold, severity in [("L0", 0.0, "hard"), ("L1", 0.01, "hard"),
                                      ("L2", 0.005, "hard"), ("L3", 0.0, "hard"),
                                      ("L4", 0.0, "soft")]:  # fmt: skip
        for task, n in [("T9", 2), ("T1", 1), ("T10", 1)]:
            want.append({"gate": gate, "task": task, "n_checked": n,
                         "n_failed": n if gate == "L0" else 0, "threshold": threshold,
                         "passed": False, "severity": severity,
                         "detail": "missing column(s) options, meta"
                         + ("" if gate == "L0" else "; not run")})  # fmt: skip
    assert got == want
    assert list(g.dtypes.astype(str)) == list(gates.GATE_COLUMNS.values())


def test_missing_task_column_reports_every_paper_task_with_nothing_checked():
    g = gates.run_gates(pd.DataFrame({"qid": ["T1-a"]}))
    assert g["task"].tolist() == [f"T{i}" for i in range(1, 10)] * 5
    assert (g["n_checked"] == 0).all() and (g["n_failed"] == 0).all()
    assert not g["passed"].any()
    assert cell(g, "L0", "T1")["detail"].startswith("missing column(s) task, subtype, ")


def test_tasks_named_first_then_the_others_present_sorted(world):  # noqa: F811 - the fixture
    rows = good_rows()
    rows.append({**rows[0], "qid": "T10-x", "task": "T10"})
    g = run_named(world, rows, tasks=["T3", "T1"])
    assert g.loc[g["gate"] == "L0", "task"].tolist() == [
        "T3", "T1", "T10", "T2", "T4", "T5", "T6", "T7", "T8", "T9"
    ]  # fmt: skip
    g = run(world, rows)
    assert g["gate"].tolist() == [gate for gate in gates.GATE_NAMES for _ in range(10)]
    assert g.loc[g["gate"] == "L3", "task"].tolist() == [f"T{i}" for i in range(1, 11)]


def run_named(w, rows, **kw):
    return gates.run_gates(frame(rows), events=w["events"], coverage=w["coverage"],
                           raw_con=w["con"], **kw)  # fmt: skip


def test_missing_event_columns_get_a_clear_error(world):  # noqa: F811 - the fixture
    with pytest.raises(gates.GateInputError) as err:
        gates.run_gates(frame(good_rows()), events=world["events"].drop(columns=["code"]),
                        coverage=world["coverage"], raw_con=world["con"])  # fmt: skip
    assert str(err.value) == "events: missing column(s) code"


def test_rows_without_usable_patients_are_checked_not_fatal(world):  # noqa: F811 - the fixture
    rows = good_rows()
    rows.append({**rows[0], "qid": "T1-none", "subject_ids": None})
    rows.append({**rows[0], "qid": "T1-word", "subject_ids": ["one"]})
    g = run(world, rows)
    row = cell(g, "L0", "T1")
    assert (row["n_checked"], row["n_failed"]) == (3, 2)
    assert cell(g, "L2", "T2")["passed"] and cell(g, "L2", "T9")["passed"]


EXCL_102 = pd.DataFrame(
    {"table": ["admissions"], "rule": ["discharge_before_admission"], "key": ["102"],
     "subject_id": [1], "field": ["dischtime"], "value": ["2150-01-30 00:00:00"]}
)  # fmt: skip


def test_a_given_connection_stays_open_and_ignores_the_profiles_exclusions(
    world,  # noqa: F811 - the fixture of tests/tasks/test_gates.py
    monkeypatch,
    tmp_path,
):
    (tmp_path / "p").mkdir()
    EXCL_102.to_parquet(tmp_path / "p" / "exclusions.parquet")
    monkeypatch.setattr(
        gate_run, "artifact_path", lambda name, profile=None: tmp_path / str(profile) / name
    )
    g = run_named(world, good_rows(), profile="p")
    assert cell(g, "L1", "T2")["passed"]  # the caller's connection: no profile exclusions
    assert world["con"].execute("SELECT count(*) FROM admissions").fetchall()[0][0] > 0


def copy_of(con) -> duckdb.DuckDBPyConnection:
    """A fresh connection with ``con``'s hosp tables as views (as open_source gives them)."""
    new = duckdb.connect()
    for name in HOSP_TABLES:
        new.register(f"_{name}", con.execute(f"SELECT * FROM {name}").df())
        new.execute(f"CREATE VIEW {name} AS SELECT * FROM _{name}")
    return new


def test_an_own_connection_reads_the_profiles_exclusions_and_is_closed(
    world,  # noqa: F811 - the fixture of tests/tasks/test_gates.py
    monkeypatch,
    tmp_path,
):
    opened = []

    def open_source(spec):
        assert spec == "source of p"  # the profile's own source
        opened.append(copy_of(world["con"]))
        return opened[-1]

    # profile "p": its source and its build folder tmp_path / "p"
    monkeypatch.setattr(gate_run, "open_source", open_source)
    monkeypatch.setattr(gate_run, "source_spec", lambda profile: f"source of {profile}")
    monkeypatch.setattr(
        gate_run, "artifact_path", lambda name, profile=None: tmp_path / str(profile) / name
    )
    (tmp_path / "p").mkdir()
    EXCL_102.to_parquet(tmp_path / "exclusions.parquet")  # another build's: never read
    q = frame(good_rows())
    kw = {"events": world["events"], "coverage": world["coverage"]}
    g = gates.run_gates(q, "p", **kw)  # no exclusions.parquet in p: every hard gate passes
    assert gates.failed_hard(g).empty, gates.gate_report(g)
    EXCL_102.to_parquet(tmp_path / "p" / "exclusions.parquet")
    g = gates.run_gates(q, "p", **kw)
    row = cell(g, "L1", "T2")
    assert (row["n_failed"], bool(row["passed"])) == (1, False)
    assert row["detail"] == (
        "1 built on excluded source rows (0 allowed) | T2-t2: built on an excluded source row: "
        "hadm:102 (discharge_before_admission)"
    )
    assert len(opened) == 2
    for con in opened:
        with pytest.raises(duckdb.ConnectionException):
            con.execute("SELECT 1")
