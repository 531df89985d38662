"""clinlib.analysis.decisions on hand-made prediction tables, values worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from clinlib.analysis.decisions import (
    decision_table,
    memory_of,
    memory_table,
    rejection_table,
    tau_by_options,
    tau_option_slope,
)
from clinlib.analysis.metrics import MetricsInputError
from clinlib.tasks.base import ABSTAIN


def test_memory_labels():
    assert memory_of("history-visits(m=2)") == "2"
    assert memory_of("history-visits(m=inf)") == "inf"
    assert memory_of("no-context-blind") == "none"
    assert memory_of("full-context") is None


def _t11():
    # four next-action questions of two patients (q1, q2: patient 1; q3, q4: patient 2)
    qs = pd.DataFrame({"qid": ["q1", "q2", "q3", "q4"], "subject_ids": [[1], [1], [2], [2]]})
    rows = []
    for strat, scores in (("history-visits(m=1)", [1.0, 0.5, 0.0, 0.25]),
                          ("no-context-blind", [0.0, 0.0, 0.0, 1.0])):  # fmt: skip
        for q, s in zip(qs["qid"], scores, strict=True):
            rows.append(dict(qid=q, task="T11", strategy=strat, backbone="reference",
                             subtype="next_action", score=s, correct=s == 1.0))  # fmt: skip
    return pd.DataFrame(rows), qs


def test_decision_table_by_hand():
    preds, qs = _t11()
    t = decision_table(preds, qs, n_boot=200).set_index("m")
    assert list(t.index) == ["none", "1"]  # MEMORY_ORDER
    m1 = t.loc["1"]
    assert m1["mean_score"] == pytest.approx(1.75 / 4) and m1["accuracy"] == 0.25
    assert (m1["n"], m1["n_patients"]) == (4, 2)
    # two patients: the clustered bootstrap can only draw patient means 0.75 / 0.125 or both
    assert m1["score_low"] >= 0.125 - 1e-9 and m1["score_high"] <= 0.75 + 1e-9
    assert t.loc["none", "mean_score"] == 0.25
    with pytest.raises(MetricsInputError, match="no T11"):
        decision_table(preds.assign(task="T10"), qs)


def test_rejection_table_by_hand():
    rows = []
    for q, task, sub, parsed, ok in (("a", "T1R", "relative", "4.1 mEq/L", True),
                                     ("b", "T1R", "explicit", "4.1 mEq/L", True),
                                     ("c", "T1F", "relative", ABSTAIN, True),
                                     ("d", "T1F", "relative", "4.6 mEq/L", False),
                                     ("e", "T1F", "relative", None, False),
                                     ("f", "T7R", "relative", "B", False)):  # fmt: skip
        rows.append(dict(qid=q, task=task, strategy="window-visits(m=1)", backbone="eager",
                         subtype=sub, parsed=parsed, correct=ok))  # fmt: skip
    t = rejection_table(pd.DataFrame(rows)).set_index("question")
    assert t.loc["Lab-F", "accuracy"] == pytest.approx(1 / 3)
    assert t.loc["Lab-F", "hallucination_rate"] == pytest.approx(1 / 3)  # one stated value
    assert t.loc["Lab-T relative", "accuracy"] == 1.0
    assert math.isnan(t.loc["Lab-T explicit", "hallucination_rate"])
    assert t.loc["Medication relative", "accuracy"] == 0.0


def test_tau_by_options_and_slope_by_hand():
    qs = pd.DataFrame({"qid": ["a", "b", "c", "d"],
                       "options": [["x"] * 3, ["x"] * 3, ["x"] * 4, ["x"] * 5]})  # fmt: skip
    preds = pd.DataFrame({"qid": ["a", "b", "c", "d"], "task": "T10", "strategy": "s",
                          "backbone": "r", "subtype": "visit_cloze",
                          "score": [1.0, 0.0, 0.5, 0.0]})  # fmt: skip
    t = tau_by_options(preds, qs)
    assert t[["n_items", "n", "mean_tau"]].values.tolist() == [[3, 2, 0.5], [4, 1, 0.5],
                                                               [5, 1, 0.0]]  # fmt: skip
    # weighted LS on (3, 0.5) x2, (4, 0.5), (5, 0): xm = 3.75, ym = 0.375;
    # sxy = 2(-.75)(.125) + (.25)(.125) + (1.25)(-.375) = -0.625; sxx = 2(.5625) + .0625 +
    # 1.5625 = 2.75; slope = -0.625 / 2.75
    slope = tau_option_slope(t)["slope"].iloc[0]
    assert slope == pytest.approx(-0.625 / 2.75)
    with pytest.raises(MetricsInputError, match="not in questions"):
        tau_by_options(preds, qs.iloc[:2])


def test_memory_table_rows_are_strategies_in_the_order_given():
    preds, qs = _t11()
    extra = preds[preds["strategy"] == "history-visits(m=1)"].assign(
        task="T11O", strategy="note-memory(m=inf)", score=[0.5, 0.5, 0.0, 0.0], correct=False
    )
    preds = pd.concat([preds, extra], ignore_index=True)
    order = ["note-memory(m=inf)", "history-visits(m=1)", "no-context-blind"]
    t = memory_table(preds, qs, order, n_boot=100)
    assert list(zip(t["task"], t["strategy"], strict=True)) == [
        ("T11", "history-visits(m=1)"),
        ("T11", "no-context-blind"),
        ("T11O", "note-memory(m=inf)"),
    ]
    got = t.set_index(["task", "strategy"])
    assert got.loc[("T11", "history-visits(m=1)"), "mean_score"] == pytest.approx(1.75 / 4)
    assert got.loc[("T11O", "note-memory(m=inf)"), "mean_score"] == 0.25
    assert got.loc[("T11O", "note-memory(m=inf)"), "accuracy"] == 0.0
    assert set(t["subtype"]) == {"next_action"}
    with pytest.raises(MetricsInputError, match="no T11/T11O prediction"):
        memory_table(preds, qs, ["full-context"])
