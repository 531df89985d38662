"""Results of the accumulation settings (clinlib.analysis.streaming) on hand-made predictions."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.analysis import streaming as S
from clinlib.analysis.metrics.common import MetricsInputError
from clinlib.analysis.stats.question import wilson_ci


def preds() -> pd.DataFrame:
    rows = []

    def add(qid, setting, correct, cp=None, final=None, items=None, strategy="mem0"):
        rows.append({"qid": qid, "task": "T1", "strategy": strategy, "backbone": "reference",
                     "prep_model": "rule-based", "setting": setting, "correct": correct,
                     "checkpoint_visit": cp, "checkpoint_final": final, "memory_items": items})  # fmt: skip

    # q1 asked at checkpoints 2 and 4 (final); q2 only at 4
    add("q1", "stream@2", False, 2, False, 3)
    add("q1", "stream@4", True, 4, True, 6)
    add("q2", "stream@4", False, 4, True, 6)
    add("q1", "post", True)
    add("q2", "post", False)
    add("q1", "mixed", False)
    add("q2", "mixed", False)
    add("q1", "mixed(seed=7)", True)
    add("q2", "mixed(seed=7)", False)
    add("q1", "stream+mixed@8", False, 8, True, 9)
    return pd.DataFrame(rows)


def test_setting_rows_split_the_value():
    r = S.setting_rows(preds()).set_index(["qid", "setting"])
    assert r.loc[("q1", "stream@2"), ["mode", "checkpoint", "stream"]].tolist() == [
        "efficient", 2, True]  # fmt: skip
    assert r.loc[("q1", "mixed(seed=7)"), "noise_seed"] == 7
    assert r.loc[("q1", "mixed"), "noise_seed"] == 42 and pd.isna(
        r.loc[("q1", "post"), "checkpoint"]
    )
    assert r.loc[("q1", "stream+mixed@8"), "mode"] == "mixed"


def test_accuracy_by_checkpoint_by_hand():
    t = S.accuracy_by_checkpoint(preds()).set_index(["mode", "checkpoint"])
    assert t.loc[("efficient", 2), ["n", "n_correct"]].tolist() == [1, 0]
    assert t.loc[("efficient", 4), ["n", "n_correct", "accuracy"]].tolist() == [2, 1, 0.5]
    low, high = wilson_ci(1, 2)
    assert t.loc[("efficient", 4), "ci_low"] == pytest.approx(low)
    assert t.loc[("efficient", 4), "ci_high"] == pytest.approx(high)
    by_size = S.accuracy_by_checkpoint(preds(), x="memory_items").set_index(["mode",
                                                                             "memory_items"])  # fmt: skip
    assert by_size.loc[("efficient", 6.0), "n"] == 2
    with pytest.raises(MetricsInputError, match="no stream"):
        S.accuracy_by_checkpoint(preds().query("setting == 'post'"))


def test_final_equals_static_and_degradation():
    f = S.final_equals_static(preds()).set_index("mode")
    assert f.loc["efficient", ["n", "accuracy_final", "accuracy_static"]].tolist() == [2, 0.5, 0.5]
    assert f.loc["efficient", "equal"] and f.loc["mixed", "n"] == 1
    d = S.noise_degradation(preds(), by=["strategy"]).set_index("mode")
    assert d.loc["mixed", "drop"] == pytest.approx(0.5)  # 1/2 -> 0/2
    assert d.loc["mixed(seed=7)", "drop"] == pytest.approx(0.0)
    s = S.seed_scores(preds())
    assert s.set_index("seed")["accuracy"].to_dict() == {42: 0.0, 7: 0.5}


def test_stream_subset_is_stratified_and_seeded():
    turns = pd.DataFrame({"subject_id": [s for s in range(1, 10) for _ in range(s)],
                          "visit_idx": [v for s in range(1, 10) for v in range(s)]})  # fmt: skip
    qs = pd.DataFrame({"qid": [f"q{s}{t}" for s in range(1, 10) for t in "ab"],
                       "task": ["T1", "T2"] * 9, "subject_ids": [[s] for s in range(1, 10)
                                                                for _ in "ab"]})  # fmt: skip
    sub = S.stream_subset(qs, turns, n_patients=3, per_task=5, seed=1)
    sids = {ids[0] for ids in sub["subject_ids"]}
    # one patient from each visit-count tertile: {1,2,3}, {4,5,6}, {7,8,9}
    assert len(sids) == 3 and {(s - 1) // 3 for s in sids} == {0, 1, 2}
    assert sub.equals(S.stream_subset(qs, turns, n_patients=3, per_task=5, seed=1))
    assert len(S.stream_subset(qs, turns, n_patients=3, per_task=1, seed=1)) == 2
