"""App. G.8 substrate pilot (clinlib.analysis.substrate) on hand-built predictions: the gap
from the dialogue to the event table per task, T3-T5 flagged, the pooled row of the tasks the
table can answer equivalently."""

from __future__ import annotations

import pandas as pd
import pytest

from clinlib.analysis.stats.question import StatsInputError
from clinlib.analysis.substrate import POOLED, substrate_gap


def _case():
    qs = pd.DataFrame({"qid": ["a", "b", "c", "d"], "task": ["T1", "T1", "T3", "T1"],
                       "subject_ids": [[1], [2], [1], [2]]})  # fmt: skip
    rows = []
    table_ok = {"a": False, "b": True, "c": False, "d": True}
    for q, task in zip(qs.qid, qs.task, strict=True):
        rows.append({"qid": q, "task": task, "strategy": "full-context", "backbone": "r",
                     "setting": "post", "correct": True})  # fmt: skip
        if q != "d":  # d is answered from the dialogue only: left out of the pair
            rows.append({"qid": q, "task": task, "strategy": "event-table", "backbone": "r",
                         "setting": "post", "correct": table_ok[q]})  # fmt: skip
    return pd.DataFrame(rows), qs


def test_gap_per_task_with_the_non_equivalent_tasks_flagged():
    preds, qs = _case()
    g = substrate_gap(preds, qs, n_boot=300).set_index("task")
    assert g.loc["T1", "n"] == 2 and g.loc["T1", "acc_dialogue"] == 1.0
    assert g.loc["T1", "acc_table"] == 0.5 and g.loc["T1", "gap_pp"] == pytest.approx(50)
    assert bool(g.loc["T1", "equivalent"]) and not bool(g.loc["T3", "equivalent"])
    assert g.loc["T3", "gap_pp"] == pytest.approx(100)
    assert g.loc[POOLED, "n"] == 2 and g.loc[POOLED, "gap_pp"] == pytest.approx(50)  # T1 only
    assert g.loc["T1", "n_clusters"] == 2


def test_gap_needs_both_strategies():
    preds, qs = _case()
    with pytest.raises(StatsInputError, match="event-table"):
        substrate_gap(preds[preds.strategy == "full-context"], qs)
