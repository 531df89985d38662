"""The visit cloze scored by insertion position in the LongMedBench stage's Table 3
(clinlib.analysis.cloze): values worked out by hand (tests/tasks/test_insertion.py works the
scores themselves)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.analysis import cloze
from clinlib.analysis.metrics import MetricsInputError

# one cloze question: four remaining lines, gold 1 A 2 3 B C 4 (letters A, B, C by time)
META = {"insertion": "A:1,B:3,C:3", "n_lines": 4, "event_ids": ["RX-1", "RX-2", "RX-3"]}
QUESTIONS = pd.DataFrame(
    {
        "qid": ["c1", "s1"],
        "meta": [json.dumps(META), json.dumps({"hadm_ids": [1, 2, 3]})],
        "options": [["a", "b", "c"], ["x", "y", "z"]],
    }
)


def _pred(qid, subtype, backbone, response, score):
    return {
        "qid": qid, "task": "T10", "subtype": subtype, "strategy": "full-context",
        "backbone": backbone, "response": response, "score": score,
    }  # fmt: skip


PREDS = pd.DataFrame(
    [
        _pred("c1", "visit_cloze", "reference", "A:1, B:3, C:3", 1.0),
        # the right order, every event after the last line: order tau 1, insertion 5/15
        _pred("c1", "visit_cloze", "eager", "A:4, B:4, C:4", 1.0),
        _pred("s1", "visit_sorting", "eager", "A, B, C", 0.5),
    ]
)


def test_cloze_scores_by_hand():
    rows = cloze.cloze_scores(PREDS, QUESTIONS).set_index("backbone")
    assert rows.loc["reference", "insertion_tau"] == 1.0
    assert rows.loc["eager", "insertion_tau"] == pytest.approx(1 / 3)
    assert rows.loc["eager", "insertion_exact"] == 0.0
    assert rows.loc["eager", "order_tau"] == 1.0  # the previous score, kept beside


def test_with_insertion_score_replaces_only_the_cloze_score():
    out = cloze.with_insertion_score(PREDS, QUESTIONS)
    assert out["score"].tolist() == pytest.approx([1.0, 1 / 3, 0.5])
    assert out["order_tau"].tolist()[:2] == [1.0, 1.0]
    assert pd.isna(out["order_tau"].iloc[2])


def test_cloze_table_labels_the_previous_score():
    table = cloze.cloze_table(PREDS, QUESTIONS).set_index("backbone")
    assert table.loc["eager", "mean_insertion_tau"] == pytest.approx(1 / 3)
    assert table.loc["eager", "share_exact_position"] == 0.0
    assert table.loc["eager", "mean_order_tau_previous"] == 1.0
    assert table.loc["reference", "n"] == 1


def test_an_old_cloze_question_without_positions_is_one_line():
    old = QUESTIONS.assign(meta=[json.dumps({"event_ids": ["RX-1"]}), "{}"])
    with pytest.raises(MetricsInputError, match="no meta.insertion") as err:
        cloze.cloze_scores(PREDS, old)
    assert "\n" not in str(err.value)
