"""The extended T1R task (relative-time retrieval) on the hand-built fixture of
tests/task_fixture.py, with golds worked out by hand; L2 on a hand-built raw record; the
leak rule, pair selection, parsing through the registry, and T1–T9 left as they were.

By hand: the only visit holding two measurements of one lab, all covered, on distinct days
and each alone on its day, is patient 1001's third stay (2150-06-01): Glucose 120 (LAB-10,
06-01) then 300 (LAB-13, 06-02). Sodium 138 / 139 of the first stay share a day (and 139 is
missed); every other visit measures each lab once. So: two pairs, four questions.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.data.build import load
from clinlib.tasks import TASKS, score
from clinlib.tasks.answers import EXTENDED_TASK_NAMES, TASK_NAMES
from clinlib.tasks.build import TASK_ORDER
from clinlib.tasks.generators import t1r
from clinlib.tasks.recompute import RawRecord
from clinlib.tasks.recompute.t1r import recompute_t1r
from clinlib.tasks.relative import select_pairs, select_t1r, t1r_leak
from clinlib.tasks.rules import PAPER_COUNTS
from clinlib.tasks.templates import T1_TEMPLATES
from tests import task_fixture as F


@pytest.fixture(scope="module")
def cands() -> pd.DataFrame:
    return t1r.generate(F.inputs())


def _meta(row) -> dict:
    return json.loads(row["meta"])


def test_two_pairs_with_hand_worked_golds(cands):
    got = sorted((r["subtype"], r["gold"], tuple(r["anchor_event_ids"]), _meta(r)["position"])
                 for r in cands.to_dict("records"))  # fmt: skip
    assert got == [
        ("explicit", "120 mg/dL", ("LAB-10",), 1),
        ("explicit", "300 mg/dL", ("LAB-13",), 2),
        ("relative", "120 mg/dL", ("LAB-10",), 1),
        ("relative", "300 mg/dL", ("LAB-13",), 2),
    ]
    for r in cands.to_dict("records"):
        m = _meta(r)
        assert (m["subject_id"], m["visit_idx"], m["n_in_visit"], m["n_visits"]) == (1001, 2, 2, 3)
        assert m["pair"] == r["anchor_event_ids"][0]
        assert (r["disease"], r["tertile"]) == ("diabetes", "low")


def test_wording_relative_names_position_explicit_names_date(cands):
    by = {(r["subtype"], _meta(r)["position"]): r for r in cands.to_dict("records")}
    rel = by[("relative", 2)]["question"]
    assert "second Glucose" in rel and "third hospital stay" in rel
    assert not any(ch.isdigit() for ch in rel.split("?")[0])  # Glucose: no digit at all
    expl = by[("explicit", 2)]["question"]
    stems = {t.format(lab="Glucose", date="2150-06-02") for t in T1_TEMPLATES}
    assert any(expl.startswith(s) for s in stems)
    assert all(t1r_leak(r) is None for r in cands.to_dict("records"))


def test_generation_does_not_depend_on_row_order(cands):
    again = t1r.generate(F.inputs(shuffle_seed=3))
    pd.testing.assert_frame_equal(cands.drop(columns="conflicts"),
                                  again.drop(columns="conflicts"))  # fmt: skip


def _raw(covered=True) -> tuple[RawRecord, dict]:
    visits = pd.DataFrame({"subject_id": [1001] * 3, "hadm_id": [11, 12, 13],
                           "visit_idx": [0, 1, 2]})  # fmt: skip
    labs = pd.DataFrame({
        "event_id": ["LAB-10", "LAB-13", "LAB-99"], "labevent_id": [10, 13, 99],
        "subject_id": [1001] * 3, "hadm_id": [13, 13, 12], "lab_key": ["glucose"] * 3,
        "charttime": pd.to_datetime(["2150-06-01 08:00", "2150-06-02 08:00", "2150-03-01 08:00"]),
        "date": ["2150-06-01", "2150-06-02", "2150-03-01"], "value_text": ["120", "300", "150"],
        "unit": ["mg/dL"] * 3,
    })  # fmt: skip
    empty = pd.DataFrame({"subject_id": pd.Series([], dtype="int64")})
    raw = RawRecord(visits, labs, empty, empty, empty, frozenset())
    status = {"LAB-10": "covered", "LAB-13": "covered" if covered else "missed"}
    return raw, status


def test_l2_recomputes_both_subtypes_from_the_raw_record(cands):
    raw, status = _raw()
    for r in cands.to_dict("records"):
        rec = recompute_t1r(_meta(r), r, raw, status)
        assert (rec.gold, rec.anchors, rec.problem) == (r["gold"], tuple(r["anchor_event_ids"]),
                                                        None)  # fmt: skip


def test_l2_catches_a_wrong_position_and_an_uncovered_visit_value(cands):
    row = next(r for r in cands.to_dict("records") if r["subtype"] == "relative")
    raw, status = _raw()
    wrong = {**_meta(row), "position": 3 - _meta(row)["position"]}
    assert "the position names" in recompute_t1r(wrong, row, raw, status).problem
    raw, status = _raw(covered=False)
    assert "not covered" in recompute_t1r(_meta(row), row, raw, status).problem
    assert "outside" in recompute_t1r({**_meta(row), "position": 5}, row, raw, status).problem


def test_leak_rule():
    base = {"task": "T1R", "gold": "4.1 mEq/L", "meta": "{}", "injection": "", "options": []}
    fmt = TASKS["T1R"].answer_format
    ok = {**base, "subtype": "relative",
          "question": "Report the second Potassium result recorded during the third hospital "
                      f"stay. {fmt}"}  # fmt: skip
    assert t1r_leak(ok) is None  # the format's "1.3 mg/dL" example is not the stem
    dated = {**ok, "question": ok["question"].replace("third", "2150-01-02")}
    assert "states a number" in t1r_leak(dated)
    numbered = {**ok, "question": ok["question"].replace("the third hospital stay", "visit 3")}
    assert "states a number" in t1r_leak(numbered)
    a1c = {**ok, "question": ok["question"].replace("Potassium", "% Hemoglobin A1c")}
    assert t1r_leak(a1c) is None  # a lab name, not a number
    stated = {**base, "subtype": "explicit",
              "question": f"Was the Potassium 4.1 on 2150-01-02? {fmt}"}  # fmt: skip
    assert "gold value" in t1r_leak(stated)


def test_pairs_are_selected_together(cands):
    one = select_pairs(cands, 1, seed=0)
    assert len(one) == 2 and set(one["subtype"]) == {"explicit", "relative"}
    assert one["anchor_event_ids"].map(tuple).nunique() == 1
    assert "conflicts" not in one.columns
    assert len(select_pairs(cands, 5, seed=0)) == 4  # only two pairs exist


def test_registry_entry_reuses_t1_parsing_and_leaves_t1_t9_alone():
    task = TASKS["T1R"]
    assert task.subtypes == ("explicit", "relative") and task.max_tokens == TASKS["T1"].max_tokens
    assert task.answer_format == TASKS["T1"].answer_format and task.paper is False
    assert score("T1R", "120 mg/dL", "120 mg/dL").correct
    assert not score("T1R", "The glucose was 120 on 2150-06-01.", "120 mg/dL").correct  # strict
    assert score("T1R", "The glucose was 120 on 2150-06-01.", "120 mg/dL", lenient=True).correct
    assert score("T1R", "0.12 g/dL", "120 mg/dL").correct is False  # T1's unit rule
    assert "T1R" in EXTENDED_TASK_NAMES and "T1R" not in TASK_NAMES
    assert TASK_ORDER == TASK_NAMES == tuple(f"T{i}" for i in range(1, 10))
    assert sum(PAPER_COUNTS.values()) == 6271 and "T1R" not in PAPER_COUNTS


def test_extended_build_selects_t1r_in_pairs(cands):
    cands = pd.concat([cands, cands.assign(qid=cands["qid"] + "x", subtype="explicit")])
    with pytest.raises(ValueError, match="twins"):
        select_t1r(cands, "T1R", 2, seed=0)
    sel, avail, short = select_t1r(t1r.generate(F.inputs()), "T1R", 6, seed=0)
    assert len(sel) == 4 and "conflicts" in sel.columns  # the build drops it after selection
    assert avail.set_index("subtype")["selected"].to_dict() == {"explicit": 2, "relative": 2}
    assert (short["target"], short["selected"], short["missing"]) == (6, 4, 2)


def test_quick_extended_set_holds_t1r_pairs_that_pass_every_gate(quick_temporal):
    extended = load("temporal_questions", "quick")
    rows = extended[extended["task"] == "T1R"]
    assert rows["subtype"].value_counts().to_dict() == {"explicit": 12, "relative": 12}
    pairs = rows.groupby(rows["meta"].map(lambda m: json.loads(m)["pair"]))
    assert all(sorted(g) == ["explicit", "relative"] for _, g in pairs["subtype"])
    assert pairs["gold"].nunique().eq(1).all()
    assert rows["disease"].nunique() == 4
    gates = load("temporal_gates", "quick")
    t1r_gates = gates[gates["task"] == "T1R"]
    assert set(t1r_gates["gate"]) >= {"L0", "L1", "L2", "L3", "L4"} and t1r_gates["passed"].all()
    assert t1r_gates.set_index("gate").loc["L2", "n_checked"] == 24
