"""The judge audit's statistics (clinlib.analysis.judge_audit): Cohen's kappa and
precision / recall / F1 against scikit-learn and by hand on hand-made labels, and the audit
table on a small hand-built set."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score, precision_recall_fscore_support

from clinlib.analysis.judge_audit import binary_prf, cohen_kappa, judge_audit

TRUTH = [1, 1, 1, 0, 0, 0, 1, 0]
RATER = [1, 1, 0, 0, 0, 1, 1, 0]
LABEL_SETS = [
    (TRUTH, RATER),
    ([1, 0, 1, 1, 1, 0, 0, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0, 1, 1, 0]),
    ([1, 1, 1, 1, 0], [1, 1, 1, 1, 1]),
    ([0, 0, 1, 0, 0, 0], [0, 1, 1, 0, 0, 1]),
]


def test_by_hand():
    # p_o = 6/8; both raters say "correct" half the time: p_e = 1/2, kappa = (3/4-1/2)/(1/2)
    assert cohen_kappa(TRUTH, RATER) == pytest.approx(0.5)
    assert binary_prf(TRUTH, RATER) == pytest.approx((0.75, 0.75, 0.75))  # tp 3, fp 1, fn 1


@pytest.mark.parametrize("truth, rater", LABEL_SETS)
def test_against_scikit_learn(truth, rater):
    assert cohen_kappa(truth, rater) == pytest.approx(cohen_kappa_score(truth, rater))
    p, r, f, _ = precision_recall_fscore_support(truth, rater, average="binary", pos_label=1)
    assert binary_prf(truth, rater) == pytest.approx((p, r, f))


def test_undefined_cases_are_nan():
    assert np.isnan(cohen_kappa([1, 1], [1, 1]))  # p_e = 1
    assert np.isnan(cohen_kappa([], []))
    p, r, f = binary_prf([0, 0], [0, 0])
    assert np.isnan(p) and np.isnan(r) and np.isnan(f)
    with pytest.raises(ValueError, match="2 labels vs 1"):
        cohen_kappa([1, 0], [1])


def test_audit_table_by_task_and_overall():
    qs = pd.DataFrame({"qid": [f"q{i}" for i in range(8)],
                       "subject_ids": [[1], [1], [2], [2], [3], [3], [4], [4]]})  # fmt: skip
    tasks = ["T1"] * 4 + ["T2"] * 4
    preds = pd.DataFrame({"qid": qs["qid"], "strategy": "s", "backbone": "b", "setting": "post",
                          "correct": [bool(x) for x in TRUTH]})  # fmt: skip
    judged = preds[["qid", "strategy", "backbone", "setting"]].assign(
        task=tasks, judge_backbone="j", verdict=[bool(x) for x in RATER],
        verdict_lenient=True, parse_failed=[False] * 7 + [True])  # fmt: skip
    out = judge_audit(judged, preds, qs).set_index("task")
    assert list(out.index) == ["T1", "T2", "all"]
    overall = out.loc["all"]
    assert overall["n"] == 8 and overall["n_patients"] == 4
    assert overall["agreement"] == 0.75 and overall["kappa"] == pytest.approx(0.5)
    assert overall["parse_failed"] == 1 / 8
    assert overall["agree_q_low"] < 0.75 < overall["agree_q_high"]
    assert overall["agree_boot_low"] <= 0.75 <= overall["agree_boot_high"]
    # T1: truth 1110, rater 1100 -> precision 1, recall 2/3
    assert out.loc["T1", "precision"] == 1.0 and out.loc["T1", "recall"] == pytest.approx(2 / 3)
    lenient = judge_audit(judged, preds, qs, lenient=True).set_index("task")
    assert lenient.loc["all", "judge_rate"] == 1.0 and lenient.loc["all", "recall"] == 1.0
    with pytest.raises(ValueError, match="1 judged row"):
        judge_audit(judged, preds.iloc[:-1], qs)
